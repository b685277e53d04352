"""Held-out validation: which samples each fit may use, and how far its predictions land.

Schemes (samples are ordered in time; ``t`` their times):

* :class:`EndSplit`: the last ``fraction`` of the log's time span is held
  out (the classic split; misleading when a log ends at rest);
* :class:`Folds`: ``k`` contiguous blocks of equal time span (blocked
  cross-validation): every block is predicted by a fit on the others, so
  every sample is held out once; ``k`` equal to the number of samples is
  leave-one-out (static poses);
* a second log (the caller fits on one log and predicts the other).

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
    """``k`` contiguous blocks of equal time span; ``k = -1``: one sample per fold."""

    k: int

    def __post_init__(self) -> None:
        if self.k != -1 and self.k < 2:
            raise WorkbenchError(f"cross-validation needs at least 2 folds, not {self.k}")

    @property
    def label(self) -> str:
        if self.k == -1:
            return "leave-one-out cross-validation"
        return f"blocked cross-validation, {self.k} contiguous folds"

    def splits(self, t: Array) -> list[tuple[np.ndarray, np.ndarray]]:
        k = t.size if self.k == -1 else self.k
        if k > t.size:
            raise WorkbenchError(f"{k} folds need at least {k} samples, the log has {t.size}")
        if self.k == -1:
            fold = np.arange(t.size)
        else:
            start, span = _span(t)
            fold = np.minimum((k * (t - start) / span).astype(np.int64), k - 1)
        out = []
        for f in range(k):
            test = fold == f
            if test.any():
                out.append((np.flatnonzero(~test), np.flatnonzero(test)))
        return out


def default_validation(log: Any) -> EndSplit | Folds:
    """The scheme a log's description asks for (``log.defaults``), else the last 20 % held out."""
    if log.defaults.folds:
        return Folds(log.defaults.folds)
    return EndSplit(log.defaults.validation or 0.2)


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
