"""Static postures in a continuous recording: where every joint stands still, and their means.

A robot moved from posture to posture and held at each lets a motion-capture
system measure static poses; :func:`standstill_segments` finds the holds in
the joint-position log and :func:`average_postures` averages the joint
positions (arithmetic mean) and the poses (positions by mean, orientations
by the eigenvector method of [Markley]) over each.

Detection. For every sample ``i`` let ``j`` be the first sample more than
``window`` seconds later (the next later sample when ``window`` is 0). The
interval ``[t_i, t_j]`` *moves* when some joint changes by more than
``speed * (t_j - t_i)`` over it. Every sample of a moving interval, both ends
included, moves; a segment is a maximal run of the other samples spanning at
least ``min_duration`` seconds (first to last sample). A hold is therefore
found shrunk by at most ``window`` plus one sample period at each end, and
grown into the adjacent motion by at most the time the motion takes to cover
``speed * (window + period)``. Position noise of standard deviation ``sigma``
appears as a speed of about ``7 sigma / window`` at worst over thousands of
samples: choose ``window`` so that this stays below ``speed``.

[Markley] F. L. Markley, Y. Cheng, J. L. Crassidis, Y. Oshman, "Averaging
quaternions", J. Guidance, Control, and Dynamics 30(4), 2007.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from workbench.arrays import as_real_array, as_samples
from workbench.errors import WorkbenchError
from workbench.lie import Array


@dataclass(frozen=True)
class Postures:
    """Per segment: its first and last sample time (s), mean joint positions and mean pose.

    Without poses ``position``, ``quaternion_xyzw`` and ``pose_count`` are
    None; a segment without any pose sample has NaN there and count 0.
    """

    start: Array  # (S,) s
    end: Array  # (S,) s
    q: Array  # (S, n)
    position: Array | None = None  # (S, 3) m
    quaternion_xyzw: Array | None = None  # (S, 4) unit, x y z w
    pose_count: np.ndarray | None = None  # (S,) pose samples averaged


def standstill_segments(
    t: ArrayLike, q: ArrayLike, *, speed: float, min_duration: float, window: float = 0.0
) -> list[slice]:
    """Slices of the samples where every joint stands still (module docstring).

    ``t`` (N,) s non-decreasing, ``q`` (N, n) finite joint positions;
    ``speed`` in position units per second, ``min_duration`` and ``window``
    in seconds.
    """
    t, q = _times_and_samples(t, q)
    if not speed > 0 or not min_duration >= 0 or not window >= 0:
        raise WorkbenchError(
            f"standstill needs speed > 0, min_duration >= 0 and window >= 0 "
            f"(got {speed}, {min_duration}, {window})"
        )
    n = t.size
    i = np.arange(n)
    j = np.searchsorted(t, t + window, side="right")  # first sample more than window later
    has = j < n
    i, j = i[has], j[has]
    change = np.abs(q[j] - q[i]).max(axis=1)
    moving = change > speed * (t[j] - t[i])
    cover = np.zeros(n + 1, dtype=np.int64)  # samples i..j of each moving interval
    np.add.at(cover, i[moving], 1)
    np.add.at(cover, j[moving] + 1, -1)
    still = np.cumsum(cover[:n]) == 0
    edges = np.diff(np.concatenate([[False], still, [False]]).astype(np.int8))
    starts, stops = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    long = t[stops - 1] - t[starts] >= min_duration
    return [slice(int(a), int(b)) for a, b in zip(starts[long], stops[long], strict=True)]


def average_postures(
    t: ArrayLike,
    q: ArrayLike,
    segments: list[slice],
    *,
    pose_t: ArrayLike | None = None,
    position: ArrayLike | None = None,
    quaternion_xyzw: ArrayLike | None = None,
) -> Postures:
    """Mean joint positions over each segment and, given poses, the mean pose inside its span.

    Poses (``pose_t`` (M,) s non-decreasing, ``position`` (M, 3),
    ``quaternion_xyzw`` (M, 4)) are averaged over the samples with
    ``start <= pose_t <= end`` of each segment; they may come from another
    clock-synchronised recording at another rate.
    """
    t, q = _times_and_samples(t, q)
    for s in segments:
        if not (0 <= s.start < s.stop <= t.size):
            raise WorkbenchError(f"segment {s} is not a non-empty slice of {t.size} samples")
    start = np.array([t[s.start] for s in segments])
    end = np.array([t[s.stop - 1] for s in segments])
    mean_q = np.array([q[s].mean(axis=0) for s in segments]).reshape(len(segments), q.shape[1])
    if pose_t is None:
        return Postures(start, end, mean_q)
    pose_t, p = _times_and_samples(pose_t, position, width=3, what="pose position")
    quat, _ = as_samples(quaternion_xyzw, 4, "pose quaternion_xyzw")
    if quat.shape[0] != pose_t.size:
        raise WorkbenchError(f"{quat.shape[0]} quaternions for {pose_t.size} pose times")
    lo = np.searchsorted(pose_t, start, side="left")
    hi = np.searchsorted(pose_t, end, side="right")
    mean_p = np.full((len(segments), 3), np.nan)
    mean_quat = np.full((len(segments), 4), np.nan)
    for k, (a, b) in enumerate(zip(lo, hi, strict=True)):
        if b > a:
            mean_p[k] = p[a:b].mean(axis=0)
            mean_quat[k] = mean_quaternion(quat[a:b])
    return Postures(start, end, mean_q, mean_p, mean_quat, hi - lo)


def mean_quaternion(quaternion_xyzw: ArrayLike) -> Array:
    """The chordal mean of quaternions (M, 4) x y z w [Markley], signed like the first sample.

    The principal eigenvector of ``sum q q^T`` over the normalised samples,
    which does not depend on each sample's sign (q and -q are one rotation).
    """
    quat, _ = as_samples(quaternion_xyzw, 4, "quaternion_xyzw")
    norm = np.linalg.norm(quat, axis=1)
    if not (norm > 0).all():
        raise WorkbenchError(f"quaternion_xyzw row {int(np.argmin(norm))} is zero")
    unit = quat / norm[:, None]
    _, vectors = np.linalg.eigh(unit.T @ unit)
    mean = vectors[:, -1]
    return mean if mean @ unit[0] >= 0 else -mean


def _times_and_samples(
    t: ArrayLike, x: ArrayLike, width: int | None = None, what: str = "q"
) -> tuple[Array, Array]:
    """(N,) non-decreasing finite times and (N, width) finite samples."""
    t = as_real_array(t, "t")
    x = as_real_array(x, what)
    if x.ndim == 1 and width is None:
        x = x[:, None]
    x, _ = as_samples(x, x.shape[-1] if width is None else width, what)
    if t.ndim != 1 or t.size != x.shape[0]:
        raise WorkbenchError(f"t has shape {t.shape}; expected ({x.shape[0]},) as {what}")
    if not np.isfinite(t).all() or (np.diff(t) < 0).any():
        raise WorkbenchError("t must be finite and non-decreasing (sort the samples by time)")
    return t, x
