"""The contract of a calibration problem: what every kind offers the one validation loop.

A kind (:mod:`workbench.calibration.problems.kinds`) turns a log into a *problem*
whose samples (torque equations after decimation, or measured poses) fall
into validation *blocks*; :func:`workbench.calibration.cross_validation.calibrate`
runs the same loop over any problem that satisfies :class:`CalibrationProblem`:

* ``folds(scheme)``: the (training blocks, held-out block) pairs of a
  validation scheme (:mod:`workbench.calibration.selection.validation`), and
  ``everything()`` the blocks that hold all samples; ``label(scheme)`` how
  the report names them; ``samples`` how many samples there are;
* ``candidates``: the models it may fit, simplest first (the kinematic
  kind's nested candidates, the dynamic kind's drive terms, chosen by the
  held-out folds in :mod:`workbench.calibration.selection.selection`; one ``None``
  otherwise) and ``nominal_candidate``, the one that is the nominal model
  (or None);
* ``fit(training, candidate)``: calibrate on the ``training`` blocks (None:
  all samples); ``baseline(training)``: the nominal model fitted there (for
  the kinematic kind the ``frames`` candidate: the model as loaded with the
  device and marker frames fitted; otherwise the model as loaded, None);
* ``residuals(fit, block)``: a :class:`Residuals`, the fit's per-channel
  sums of squared errors and measurements over the block, and the samples
  the plots show;
* ``figures(residuals)``: the held-out figures of merit of some blocks
  pooled, ``relative_rms`` first; ``rms(residuals)``: the RMS of
  ``summary.json``'s ``rms`` entries (``rms_convention`` says what it is);
  ``channels(errors)``: per-sample errors as the report plots them (3-D
  distances and angles for poses) with labels and unit; ``loss(errors)``:
  the per-sample squared error the selection pairs between candidates;
* ``summary(fit)``, ``parameters(fit)`` (rows of ``parameters.csv``),
  ``chain(fit)`` (the calibrated model), ``dynamics(fit)`` (URDF
  ``<dynamics>`` per joint) and ``files(fit)`` (extra outputs).

Problems of logs in memory have the samples' rows as blocks
(:class:`SampleBlocks`); the large-log dynamic problem
(:mod:`workbench.calibration.problems.accumulated_dynamic`) has the validation blocks
of its accumulated triangular factors.

To add a kind: write a module whose problem class satisfies
:class:`CalibrationProblem` (copy :mod:`workbench.calibration.problems.twist_problem`)
and add a :class:`~workbench.calibration.problems.kinds.Kind` to
:data:`~workbench.calibration.problems.kinds.KINDS`; the command line and
``simulate-log`` read their choices there.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from workbench.calibration.selection.validation import EndSplit, Folds, whole_log_splits
from workbench.chain import Chain
from workbench.errors import WorkbenchError
from workbench.lie import Array


@dataclass(frozen=True)
class Options:
    """What a calibration run may set; None keeps the kind's or the log's default."""

    loss: str = "linear"
    f_scale: float | None = None
    physical: bool = True  # dynamic: consistent with the prior toward the nominal (else none)
    inertial: bool = False
    weighted: bool = True
    terms: tuple[str, ...] | None = None
    nominal_drives: dict[str, float] | None = None  # name -> value, e.g. from a drive file
    # the drive file's shapes: Stribeck speeds (n,) rad/s (None: 1 rad/s) and sensor delay s
    nominal_stribeck_speed: Array | None = None
    nominal_delay: float = 0.0
    rotation_weight: float | None = None
    # kinematic: frames, offsets, twists or auto (chosen by the folds, with a ridge); with
    # auto the dynamic kind also chooses its drive terms (DynamicProblem)
    parameters: str = "auto"
    progress: bool = False
    # dynamic: further weights of the consistent fit's prior scored on the folds (summary.json
    # prior_weight; DynamicProblem.prior_weights)
    prior_weights: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.loss, str):
            raise WorkbenchError(f"Options: loss {self.loss!r} is not a name")
        for name in ("f_scale", "rotation_weight"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int | float | np.floating):
                raise WorkbenchError(f"Options: {name} {value!r} is not a number")
            if not (math.isfinite(value) and value > 0):
                raise WorkbenchError(f"Options: {name} {value} must be a positive finite number")
        for value in self.prior_weights:
            if not (math.isfinite(value) and value > 0):
                raise WorkbenchError(f"Options: prior weight {value} must be positive and finite")


@dataclass(frozen=True)
class Residuals:
    """One fit's errors on one validation block.

    ``error2`` (k,): per channel, the sum of squared errors over the block's
    finite entries; ``measured2`` (k,): per channel, the sum of squared
    measurements (None for poses, whose figures are relative to their spread);
    ``counts`` (k,): the finite error entries per channel; ``samples``: the
    block's samples. ``t`` (m,), ``errors`` (m, k) and ``measured`` (m, k)
    or None: the samples the plots show, every sample of the block in memory,
    a strided subsample of a large log's. ``block``: the problem's block.
    """

    block: Any
    samples: int
    error2: Array
    measured2: Array | None
    counts: Array
    t: Array
    errors: Array
    measured: Array | None

    @classmethod
    def of_samples(cls, block: Any, t: Array, errors: Array, measured: Array | None) -> Residuals:
        """The residuals of a block whose every sample is at hand."""
        return cls(
            block, int(errors.shape[0]), np.nansum(np.square(errors), axis=0),
            None if measured is None else np.nansum(np.square(measured), axis=0),
            np.count_nonzero(np.isfinite(errors), axis=0), t, errors, measured,
        )  # fmt: skip


def relative_rms_of(residuals: Sequence[Residuals]) -> float:
    """``sqrt(sum error^2 / sum measurement^2)`` over the blocks and channels pooled
    (:func:`workbench.calibration.selection.validation.relative_rms`; inf when nothing was
    measured)."""
    error2 = sum(float(r.error2.sum()) for r in residuals)
    measured2 = sum(float(r.measured2.sum()) for r in residuals)
    return float(np.sqrt(error2 / measured2)) if measured2 > 0 else float("inf")


def shown(residuals: Sequence[Residuals]) -> tuple[Array, Array, Array | None]:
    """Times, errors and measurements of the samples the blocks show, in block order."""
    measured = None
    if residuals[0].measured is not None:
        measured = np.concatenate([r.measured for r in residuals])
    return (
        np.concatenate([r.t for r in residuals]),
        np.concatenate([r.errors for r in residuals]),
        measured,
    )


@runtime_checkable
class CalibrationProblem(Protocol):
    """A calibration kind's problem on one log (module docstring)."""

    options: Options
    labels: tuple[str, ...]
    unit: str
    candidates: tuple[Any, ...]
    nominal_candidate: Any
    nominal_model: str
    rms_convention: str

    @property
    def samples(self) -> int: ...

    def folds(self, scheme: EndSplit | Folds) -> list[tuple[Any, Any]]: ...

    def everything(self) -> list[Any]: ...

    def label(self, scheme: EndSplit | Folds) -> str: ...

    def fit(self, training: Any, candidate: Any = None) -> Any: ...

    def baseline(self, training: Any) -> Any: ...

    def residuals(self, fit: Any, block: Any) -> Residuals: ...

    def figures(self, residuals: Sequence[Residuals]) -> dict[str, Any]: ...

    def rms(self, residuals: Sequence[Residuals]) -> float: ...

    def channels(self, errors: Array) -> tuple[Array, tuple[str, ...], str]: ...

    def loss(self, errors: Array) -> Array: ...

    def summary(self, fit: Any) -> dict[str, Any]: ...

    def parameters(self, fit: Any) -> list[tuple[str, float, float]]: ...

    def chain(self, fit: Any) -> Chain: ...

    def dynamics(self, fit: Any) -> dict[str, tuple[float, float]]: ...

    def files(self, fit: Any) -> dict[str, str]: ...


class SampleBlocks:
    """Blocks of a log in memory: arrays of sample rows, cut from the samples' ``times``.

    The problem gives ``times`` (M,), ``errors(fit, rows)`` (prediction minus
    measurement) and ``measured(rows)`` (the measurements, or None for poses).
    """

    times: Array

    @property
    def samples(self) -> int:
        return len(self.times)

    def folds(self, scheme: EndSplit | Folds) -> list[tuple[np.ndarray, np.ndarray]]:
        return whole_log_splits(scheme, self.times)

    def everything(self) -> list[np.ndarray]:
        return [np.arange(len(self.times))]

    def label(self, scheme: EndSplit | Folds) -> str:
        return scheme.label

    def residuals(self, fit: Any, block: np.ndarray) -> Residuals:
        return Residuals.of_samples(
            block, self.times[block], self.errors(fit, block), self.measured(block)
        )
