"""Held-out validation: which samples each fit may use, and how far its predictions land.

Schemes (samples are ordered in time; ``t`` their times):

* :class:`EndSplit`: the last ``fraction`` of the log's time span is held
  out (the classic split; misleading when a log ends at rest);
* :class:`Folds`: ``k`` contiguous blocks of equal time span (blocked
  cross-validation): every block is predicted by a fit on the others, so
  every sample is held out once; ``k`` equal to the number of samples is
  leave-one-out (static poses); ``shuffle``: ``k`` folds of random samples
  instead (a permutation from ``seed``, fold sizes differing by one at
  most), for static poses logged in an order that drifts (one region of the
  workspace after the other), not for time series, whose neighbours share
  their noise;
* a second log (the caller fits on one log and predicts the other, scored
  by the second log's own folds: :func:`second_log_validation`).

The figure of merit is the relative RMS of the held-out error,
``sqrt(sum (prediction - measurement)^2) / sqrt(sum measurement^2)`` over
all held-out samples and channels, pooled.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.errors import WorkbenchError
from workbench.lie import Array


@dataclass(frozen=True)
class EndSplit:
    """Hold out the last ``fraction`` of the time span."""

    fraction: float

    def __post_init__(self) -> None:
        if isinstance(self.fraction, bool) or not isinstance(self.fraction, int | float):
            raise WorkbenchError(f"validation fraction {self.fraction!r} is not a number")
        if not 0.0 < self.fraction < 1.0:
            raise WorkbenchError(f"validation fraction {self.fraction} must lie in (0, 1)")

    @property
    def label(self) -> str:
        return f"last {100 * self.fraction:g} % of the log held out"

    def splits(self, t: Array) -> list[tuple[np.ndarray, np.ndarray]]:
        start, span = _span(t)
        test = t >= start + (1.0 - self.fraction) * span
        if test.all() or not test.any():
            raise WorkbenchError(
                f"too few samples ({t.size}) to hold out {self.fraction} of the log"
            )
        return [(np.flatnonzero(~test), np.flatnonzero(test))]


@dataclass(frozen=True)
class Folds:
    """``k`` contiguous blocks of equal time span, or (``shuffle``) of random samples drawn
    with ``seed``; ``k = -1``: one sample per fold."""

    k: int
    shuffle: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int | np.integer):
            raise WorkbenchError(f"the number of folds {self.k!r} is not a whole number")
        if self.k != -1 and self.k < 2:
            raise WorkbenchError(f"cross-validation needs at least 2 folds, not {self.k}")

    @property
    def label(self) -> str:
        if self.k == -1:
            return "leave-one-out cross-validation"
        if self.shuffle:
            return f"cross-validation, {self.k} folds of random samples (seed {self.seed})"
        return f"blocked cross-validation, {self.k} contiguous folds"

    def splits(self, t: Array) -> list[tuple[np.ndarray, np.ndarray]]:
        k = t.size if self.k == -1 else self.k
        if k > t.size:
            raise WorkbenchError(f"{k} folds need at least {k} samples, the log has {t.size}")
        if self.k == -1:
            fold = np.arange(t.size)
        elif self.shuffle:
            fold = np.empty(t.size, np.int64)
            fold[np.random.default_rng(self.seed).permutation(t.size)] = (
                np.arange(t.size) * k // t.size
            )
        else:
            start, span = _span(t)
            fold = np.minimum((k * (t - start) / span).astype(np.int64), k - 1)
        out = []
        for f in range(k):
            test = fold == f
            if test.any():
                out.append((np.flatnonzero(~test), np.flatnonzero(test)))
        return out


def whole_log_splits(scheme: EndSplit | Folds, t: Array) -> list[tuple[np.ndarray, np.ndarray]]:
    """``scheme``'s splits of a whole log's samples at times ``t``, refused where an end split
    holds out one sample (no spread to measure its errors against: a held-out relative RMS
    of 1e14 came out of rounding) or a fold trains on fewer than two (leave-one-out of two
    postures wrote a model worse than the nominal with exit 0). Within a fixture's samples
    (:mod:`workbench.calibration.problems.kinematic_problem`) either is fine: the figures pool
    the groups, and the other fixtures' samples train."""
    splits = scheme.splits(t)
    if isinstance(scheme, EndSplit) and len(splits[0][1]) < 2:
        raise WorkbenchError(
            f"too few samples ({t.size}) to hold out {scheme.fraction} of the log: 1 held out, "
            "a held-out figure needs at least 2 (cross-validate with --folds K, or record more "
            "samples)"
        )
    fewest = min(len(train) for train, _ in splits)
    if fewest < 2:
        raise WorkbenchError(
            f"{scheme.label} of {t.size} samples trains a fold on {fewest}: too few samples to "
            "cross-validate (record more)"
        )
    return splits


FIXTURE_FOLDS = 5  # folds of a log with fixtures whose description asks for no scheme


def default_validation(log: Any) -> EndSplit | Folds:
    """The scheme a log's description asks for (``log.defaults``); else, for a log with
    fixtures, :data:`FIXTURE_FOLDS` contiguous folds (a kinematic problem cuts them within
    each fixture's samples), so that every sample is held out once: its few static poses
    (MUKCa's sockets: 20-35 each) are all scored, not the last 20 % of them (on a Kinova
    data set, 12 held-out poses preferred the nominal where every other split preferred a
    calibration by 2-4 times); else the last 20 % held out."""
    if log.defaults.folds:
        return Folds(log.defaults.folds, log.defaults.shuffle, log.defaults.seed)
    if log.fixtures and not log.defaults.validation:
        return Folds(FIXTURE_FOLDS, log.defaults.shuffle, log.defaults.seed)
    return EndSplit(log.defaults.validation or 0.2)


SECOND_LOG_FOLDS = 5  # folds of a second log whose description asks for none


def second_log_validation(log: Any) -> EndSplit | Folds:
    """How a second (validation) log is split when what the model needs from each session is
    refitted on it (the device and marker frames): its description's scheme, else
    :data:`SECOND_LOG_FOLDS` folds (leave-one-out for fewer samples), so that every sample
    is scored by frames fitted without it."""
    if log.defaults.folds or log.defaults.validation:
        return default_validation(log)
    if len(log) < 2 * SECOND_LOG_FOLDS:
        return Folds(-1)
    return Folds(SECOND_LOG_FOLDS, log.defaults.shuffle, log.defaults.seed)


def _span(t: Array) -> tuple[float, float]:
    """Start and length of the time span of ``t``, one sample period included."""
    if t.size < 2:
        raise WorkbenchError(f"validation needs at least 2 samples, the log has {t.size}")
    span = (t[-1] - t[0]) * t.size / (t.size - 1)
    return float(t[0]), float(span)


def relative_rms(prediction: Array, measurement: Array) -> float:
    """``|prediction - measurement| / |measurement|`` over all entries (module docstring)."""
    norm = float(np.sqrt(np.sum(np.square(measurement))))
    error = float(np.sqrt(np.sum(np.square(prediction - measurement))))
    return error / norm if norm > 0 else float("inf")
