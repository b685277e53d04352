"""Real clocks: non-uniform time stamps made into uniform segments before filtering.

A robot's log is stamped by a clock that jitters (a ROS ``/joint_states``
topic at "100 Hz" has periods from 7 to 13 ms), drops messages, repeats a
stamp or delivers one late, and stops for a while when a node stalls. The
filters and differentiators of :mod:`workbench.recordings.signals` need
uniform sampling, so a recording is first put on a uniform grid:

1. stamps that step back by more than ``gap_periods`` typical steps (a clock
   set back or restarted) are refused (:func:`check_no_jump_back`); samples
   are sorted by time (stable); samples with equal stamps are merged
   (their mean, NaN ignored); more repeated stamps than distinct ones are
   refused (stamps coarser than the samples, e.g. rounded to whole seconds);
2. the period is the stated one (``rate``), else the clock's mean step: the
   median of the positive steps first, then the span of the steps that are
   no gap over the periods they hold (a dropped sample's step holds two; a
   step of two periods beside one under half a period is jitter and holds
   one).
   The median alone is biased by the stamps' rounding: epoch stamps in
   float64 (about 1.7e9 s) are multiples of 0.24 µs, so every 5 ms step is
   rounded to one of two values 0.24 µs apart, and their median is off by up
   to 24 ppm, a drift of 1 ms over 40 s; the span is exact to one rounding;
3. a step longer than ``gap_periods`` periods is a gap: it splits the
   recording into segments that are filtered on their own and never
   differentiated across; shorter missing stretches (dropped samples) are
   interpolated over;
4. each segment is sampled at ``t0 + k period`` (``t0`` its first stamp) by
   linear interpolation of every channel on its own finite samples (a joint
   missing from some messages is interpolated from the others).

Linear interpolation of a signal sampled at rate ``fs`` changes it by at most
``period^2 / 8`` times its second derivative, far below the noise of encoders
for the motions identification uses. A recording that is already uniform
(every step within 1e-6 of the period, nothing to merge or sort) is not
touched, so it gives exactly the same samples.

:func:`uniform_clock` measures the clock (jitter, drops, duplicates,
out-of-order samples, gaps) and plans the grid; :func:`resample` puts any
channel with its raw stamps on it (the stamps the grid was planned from, or
another stream's).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from workbench.errors import WorkbenchError
from workbench.lie import Array

UNIFORM_TOLERANCE = 1e-6  # of the period: steps this close are a uniform clock already
GAP_PERIODS = 5.0  # a step longer than this many periods splits the recording


@dataclass(frozen=True)
class Clock:
    """A recording's time base and the uniform grid it is resampled to.

    ``segments`` are ``(start, stop)`` ranges of the grid samples ``t``.
    Statistics are over steps inside
    segments: ``jitter`` the RMS and ``max_jitter`` the largest deviation of
    a step from the period (fractions of it, dropped samples excluded);
    ``dropped`` the periods the steps hold beyond one each (:func:`periods_held`:
    jitter alone, a late sample followed by an early one, drops none);
    ``out_of_order`` the samples not in recorded order (a bag's, which is read
    sorted by time, counted from its message numbers).
    """

    period: float
    t: Array  # (M,) uniform times, segment after segment
    segments: tuple[tuple[int, int], ...]
    resampled: bool
    jitter: float = 0.0
    max_jitter: float = 0.0
    duplicates: int = 0
    out_of_order: int = 0
    dropped: int = 0
    gaps: tuple[tuple[float, float], ...] = field(default_factory=tuple)  # (start, length) s

    @property
    def rate(self) -> float:
        return 1.0 / self.period

    def summary(self) -> dict:
        """What the report states about the clock."""
        return {
            "period_s": self.period,
            "resampled": self.resampled,
            "jitter_rms_percent": 100.0 * self.jitter,
            "jitter_max_percent": 100.0 * self.max_jitter,
            "dropped_samples": self.dropped,
            "duplicate_stamps": self.duplicates,
            "out_of_order_samples": self.out_of_order,
            "gaps": [{"start_s": s, "length_s": g} for s, g in self.gaps],
            "segments": [
                {"start_s": float(self.t[a]), "end_s": float(self.t[b - 1]), "samples": b - a}
                for a, b in self.segments
            ],
        }


def check_no_jump_back(t: Array, where: str, gap_periods: float = GAP_PERIODS) -> None:
    """Refuse stamps ``t`` (N,), in recorded order, that step back by more than ``gap_periods``
    of their typical step (the median positive one): a clock set back (an NTP step) or
    restarted, whose samples sorting would interleave with the earlier ones. Samples
    delivered a little late (a step back of a few periods) pass."""
    steps = np.diff(np.asarray(t, dtype=float))
    forward = steps[steps > 0]
    if forward.size == 0:
        return
    back = np.flatnonzero(steps < -gap_periods * float(np.median(forward)))
    if back.size:
        k = int(back[0])
        raise WorkbenchError(
            f"{where}: the clock jumps back by {-steps[k]:.6g} s after sample {k} (of "
            f"{steps.size + 1}; {back.size} such jump(s)): a clock set back (an NTP step) or a "
            "restart; sorted, the samples of both stretches would interleave: split the "
            "recording there or correct the stamps"
        )


def uniform_clock(
    t: Array,
    *,
    period: float | None = None,
    gap_periods: float = GAP_PERIODS,
    min_samples: int = 2,
    where: str = "time",
) -> Clock:
    """Measure the stamps ``t`` (N,) and plan their uniform grid (module docstring).

    ``period`` is the stated sample period (s), else the mean step (module
    docstring, 2.); segments with fewer than ``min_samples`` grid samples are left out
    (listed in the gaps). Errors name ``where``.
    """
    t = np.asarray(t, dtype=float)
    if t.ndim != 1 or t.shape[0] < 2:
        raise WorkbenchError(f"{where}: needs at least 2 time stamps, found {t.size}")
    if not np.all(np.isfinite(t)):
        row = int(np.argmax(~np.isfinite(t)))
        raise WorkbenchError(f"{where}: time stamp {row} is {t[row]}, not a finite number")
    check_no_jump_back(t, where, gap_periods)
    order, stamps, _ = _distinct(t)
    out_of_order = int(np.count_nonzero(order != np.arange(t.shape[0])))
    duplicates = int(t.shape[0] - stamps.shape[0])
    if stamps.shape[0] < 2:
        raise WorkbenchError(f"{where}: every sample has the same time stamp {stamps[0]:.9g} s")
    steps = np.diff(stamps)
    if duplicates > stamps.shape[0]:
        raise WorkbenchError(
            f"{where}: {duplicates} of {t.shape[0]} samples repeat another's time stamp (about "
            f"{t.shape[0] / stamps.shape[0]:.3g} samples per stamp, {np.median(steps):.6g} s "
            "apart): the stamps are coarser than the samples (rounded, or written with too few "
            "digits); log them at full resolution"
        )
    if period is None:
        period = float(np.median(steps))
        inside = steps[steps <= gap_periods * period]
        period = float(inside.sum() / periods_held(inside, period).sum())
    elif not (np.isfinite(period) and period > 0):
        raise WorkbenchError(f"{where}: sample period {period} must be positive")
    deviation = np.abs(steps - period) / period
    if not out_of_order and not duplicates and np.all(deviation <= UNIFORM_TOLERANCE):
        return Clock(period, stamps, ((0, stamps.shape[0]),), False)
    gap = steps > gap_periods * period
    bounds = np.r_[0, np.flatnonzero(gap) + 1, stamps.shape[0]]
    grids, segments, gaps, start = [], [], [], 0
    for a, b in itertools.pairwise(bounds):
        count = int(np.floor((stamps[b - 1] - stamps[a]) / period + 1e-9)) + 1
        if count < min_samples:
            gaps.append((float(stamps[a]), float(stamps[b - 1] - stamps[a] + period)))
            continue
        grids.append(stamps[a] + period * np.arange(count))
        segments.append((start, start + count))
        start += count
    if not grids:
        raise WorkbenchError(
            f"{where}: no stretch of the recording without a gap (a step over {gap_periods:g} "
            f"periods of {period:.6g} s) holds {min_samples} samples"
        )
    gaps += [(float(stamps[k]), float(steps[k])) for k in np.flatnonzero(gap)]
    inside = steps[~gap]
    multiple = periods_held(inside, period)
    regular = multiple == 1.0
    jitter = (inside[regular] - period) / period if np.any(regular) else np.zeros(1)
    return Clock(
        period=period,
        t=np.concatenate(grids),
        segments=tuple(segments),
        resampled=True,
        jitter=float(np.sqrt(np.mean(jitter**2))),
        max_jitter=float(np.abs(jitter).max()),
        duplicates=duplicates,
        out_of_order=out_of_order,
        dropped=int(np.sum(multiple - 1.0)),
        gaps=tuple(sorted(gaps)),
    )


def periods_held(steps: Array, period: float) -> Array:
    """How many periods each step between consecutive stamps holds: its rounded ratio to
    ``period``, at least 1, except that a step of two next to one under half a period holds
    one (a late stamp then an early one, or the reverse: jitter, no dropped sample)."""
    ratio = steps / period
    held = np.maximum(np.rint(ratio), 1.0)
    short = ratio < 0.5
    beside = np.zeros_like(short)
    beside[:-1] |= short[1:]
    beside[1:] |= short[:-1]
    held[(held == 2.0) & beside] = 1.0
    return held


def resample(clock: Clock, t: Array, values: Array) -> Array:
    """``values`` (N, ...) sampled at the raw times ``t`` (N,), on the clock's grid (M, ...).

    ``t`` may be the stamps the clock was planned from or another stream's
    (a second topic). Samples with equal stamps are averaged; each channel
    is interpolated linearly from its own finite samples inside each
    segment (a channel with none there is NaN). Values already on the grid
    are returned as they are.
    """
    values = np.asarray(values, dtype=float)
    t = np.asarray(t, dtype=float)
    if t.shape == clock.t.shape and np.array_equal(t, clock.t):
        return values
    order, stamps, groups = _distinct(t)
    flat = values[order].reshape(values.shape[0], -1)
    finite = np.isfinite(flat)
    count = np.zeros((stamps.shape[0], flat.shape[1]))
    total = np.zeros_like(count)
    np.add.at(count, groups, finite)
    np.add.at(total, groups, np.where(finite, flat, 0.0))
    with np.errstate(invalid="ignore", divide="ignore"):
        merged = total / count  # NaN where a stamp has no finite value of the channel
    out = np.full((clock.t.shape[0], flat.shape[1]), np.nan)
    for a, b in clock.segments:
        grid = clock.t[a:b]
        lo = np.searchsorted(stamps, grid[0] - 0.5 * clock.period)
        hi = np.searchsorted(stamps, grid[-1] + 0.5 * clock.period, side="right")
        for c in range(flat.shape[1]):  # a loop over channels; each is one batched np.interp
            ok = np.isfinite(merged[lo:hi, c])
            if np.any(ok):
                out[a:b, c] = np.interp(grid, stamps[lo:hi][ok], merged[lo:hi, c][ok])
    return out.reshape(clock.t.shape[0], *values.shape[1:])


def _distinct(t: Array) -> tuple[np.ndarray, Array, np.ndarray]:
    """(stable sort order, distinct increasing stamps, stamp index of each sorted sample)."""
    order = np.argsort(t, kind="stable")
    sorted_t = t[order]
    new = np.r_[True, np.diff(sorted_t) > 0]
    return order, sorted_t[new], np.cumsum(new) - 1
