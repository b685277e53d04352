"""One calibration run: choose, fit and validate on held-out samples, for any kind and log form.

Every run validates on samples no fit saw: the last fraction of the log,
cross-validation folds (every sample held out once, predicted by a fit on
the others; contiguous or random; leave-one-out for static poses), or a
second log (:mod:`workbench.calibration.selection.validation`). The same
folds choose what to fit among the kind's candidates
(:mod:`workbench.calibration.selection.selection`: for measured poses
``frames``, ``offsets``, ``twists`` or ``compliance`` with a ridge toward
the nominal), the kept candidate is fitted on the whole log, and its held-out
figures are its score on those folds (the selection's fold score, stated in
``summary.json``). The nominal model is scored on the same held-out samples
and defined in ``summary.json`` (``heldout.nominal_model``): for measured
poses the model as loaded with the device and marker frames fitted on the
same training samples (the ``frames`` candidate), for torques the model as
loaded.

Conventions: position errors are 3-D distances (m) in every figure,
training and held-out (``rms_convention``, ``position_error``); torque
figures are per joint in its unit (N m revolute, N prismatic;
``units``) with the held-out relative RMS per joint; relative standard
deviations of parameters that were not estimated read ``0 (fixed)``, those
below 1e-9 % ``<1e-9``.

A second log of measured poses is another session, whose measuring frames
(the device frame when unknown, the markers) may have moved: the calibrated
joints are held and those frames refitted on the training samples of each of
the second log's own folds (:func:`~workbench.calibration.validation.
second_log_validation`), the nominal's alike, and both scored on the held-out
samples of those folds; ``heldout.frames_refitted`` says which frames were
refitted where. A calibration equal to the nominal then ties with it.

The loop (:func:`calibrate`) runs over the contract of
:class:`workbench.calibration.problems.problem.CalibrationProblem`: the problem of a
log in memory and that of a large log's accumulated factors
(:mod:`workbench.calibration.problems.accumulated_dynamic`) go through the same
folds, fits and figures. Writing the results:
:func:`workbench.calibration.reporting.report.write_report`.
"""

from __future__ import annotations

import contextlib
import io
import math
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from tqdm import tqdm

from workbench.calibration.problems.kinds import kind
from workbench.calibration.problems.problem import (
    CalibrationProblem,
    Options,
    Residuals,
    relative_rms_of,
    shown,
)
from workbench.calibration.reporting.exact_urdf import calibrated_urdf
from workbench.calibration.selection.selection import select
from workbench.calibration.selection.selection import table as selection_table
from workbench.calibration.selection.validation import (
    EndSplit,
    Folds,
    default_validation,
    second_log_validation,
)
from workbench.chain import Chain
from workbench.closed_chains.model import ClosedChain
from workbench.errors import WorkbenchError, WorkbenchWarning
from workbench.lie import Array
from workbench.recordings.chunked_logs import ChunkedLog
from workbench.recordings.log import Log, check_log_arrays


@dataclass(frozen=True)
class HeldOut:
    """Held-out samples for the plots: times, errors after and before, measurements."""

    t: Array
    after: Array  # (M, k)
    before: Array  # (M, k)
    measured: Array | None  # (M, k) torques, None for poses
    labels: tuple[str, ...]
    unit: str


@dataclass(frozen=True)
class CalibrationReport:
    """A calibrated chain, the summary (JSON-ready), parameter rows and extra files."""

    chain: Chain
    summary: dict[str, Any]
    parameters: list[tuple[str, float, float]]
    heldout: HeldOut
    files: dict[str, str] = field(default_factory=dict)
    dynamics: dict[str, tuple[float, float]] = field(default_factory=dict)
    urdf: str | None = None  # calibrated.urdf, None when it cannot be exactly the model


def calibrate(
    chain: Chain,
    kind_name: str,
    log: Log | ChunkedLog,
    validation: EndSplit | Folds | Log | None = None,
    options: Options | None = None,
) -> CalibrationReport:
    """Calibrate ``chain`` on ``log`` (in memory, or a large log of a kind that accumulates
    one) and validate it (module docstring); ``validation`` default: the log description's
    scheme, else :func:`~workbench.calibration.selection.validation.default_validation`."""
    options = Options() if options is None else options
    if not isinstance(chain, Chain | ClosedChain):
        raise WorkbenchError(f"calibrate: the model is {type(chain).__name__}, not a Chain")
    if not isinstance(options, Options):
        raise WorkbenchError(f"calibrate: options is {type(options).__name__}, not Options")
    if not isinstance(validation, EndSplit | Folds | Log | ChunkedLog | None):
        raise WorkbenchError(
            f"calibrate: validation is {type(validation).__name__}, not EndSplit, Folds or a log"
        )
    n = chain.n if isinstance(chain, Chain) else None  # a closed chain's log: its motors
    if not isinstance(log, ChunkedLog):
        check_log_arrays(log, n)
    if isinstance(validation, Log):
        check_log_arrays(validation, n)
    with tqdm(
        total=2, desc=f"{kind_name} calibration: equations", unit="fit", file=sys.stderr,
        disable=not options.progress, bar_format="{desc} {bar:20} {n_fmt}/{total_fmt} [{elapsed}]",
    ) as bar:  # fmt: skip
        if not options.progress:
            return _calibrate(chain, kind_name, log, validation, options, bar)
        with contextlib.redirect_stderr(_LinesAboveBar(bar)):  # solver lines above the bar
            return _calibrate(chain, kind_name, log, validation, options, bar)


class _LinesAboveBar(io.TextIOBase):
    """A text stream whose complete lines are written above a tqdm progress bar."""

    def __init__(self, bar: tqdm) -> None:
        self.bar, self.pending = bar, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            self.bar.write(line, file=self.bar.fp)
        return len(text)


def _calibrate(chain, kind_name, log, validation, options, bar) -> CalibrationReport:
    """:func:`calibrate`, advancing ``bar`` after the equations and after each fit."""
    spec = kind(kind_name)
    quiet = replace(options, progress=False)  # validation fits run quietly
    problem = spec.problem(chain, log, quiet, validation)
    bar.update()
    second = isinstance(validation, Log)  # then the fitted log's own folds choose the model
    scheme = default_validation(log) if second else validation or default_validation(log)
    try:
        folds = problem.folds(scheme)
    except WorkbenchError as exc:  # the scheme does not know the log it splits
        if str(exc).startswith(str(log.source)):
            raise
        raise WorkbenchError(f"{log.source}: {exc}") from None
    fits = len(problem.candidates) + (problem.nominal_candidate is None)
    bar.total += len(folds) * fits
    bar.set_description(f"{kind_name} calibration: validation fits")
    forced = options.parameters if options.parameters != "auto" else None
    selection = select(problem, folds, bar.update, forced=forced)
    bar.total = bar.n + 1  # candidates tried on the best one's ridge only skip fits: the full fit
    if len(problem.candidates) > 1 and options.progress:
        print(selection_table(selection), file=sys.stderr)
    bar.set_description(f"{kind_name} calibration: fitting {problem.samples} samples")
    problem.options = options
    full = problem.fit(None, selection.kept.candidate)
    problem.options = quiet
    bar.update()
    nominal_fit = problem.baseline(None)
    train_after = [problem.residuals(full, block) for block in problem.everything()]
    train_before = [problem.residuals(nominal_fit, block) for block in problem.everything()]
    folds_figures: list[dict[str, Any]] = []
    held = problem
    frames = None
    if second:
        weight = getattr(problem, "rotation_weight", options.rotation_weight)  # as fitted
        held = spec.problem(chain, validation, replace(quiet, rotation_weight=weight))
        label = f"second log {validation.source}"
        if hasattr(held, "refit_frames"):  # measuring frames of that session: its own folds
            own = second_log_validation(validation)
            pairs = held.folds(own)
            before = [held.residuals(held.baseline(t), b) for t, b in pairs]
            after = before  # the nominal kept: the same fits
            if selection.kept is not selection.nominal:
                after = [held.residuals(held.refit_frames(full, t), b) for t, b in pairs]
            where = f"on the training samples of each fold of the second log ({held.label(own)})"
            label += f", {held.label(own)}, the calibrated joints held and its frames refitted"
            frames = {
                "calibration_log": problem.refitted_frames(
                    f"on the training samples of each fold of the calibration log "
                    f"({problem.label(scheme)}), then on all of it"
                ),
                "validation_log": held.refitted_frames(where),
            }
        else:
            other_nominal = held.baseline(None)
            after = [held.residuals(full, block) for block in held.everything()]
            before = [held.residuals(other_nominal, block) for block in held.everything()]
        figures, nominal = held.figures(after), held.figures(before)
    else:
        after, before = selection.kept.residuals, selection.nominal.residuals
        label, folds_figures = problem.label(scheme), selection.kept.folds
        figures, nominal = selection.kept.figures, selection.nominal.figures
        if hasattr(problem, "refitted_frames"):
            frames = {
                "calibration_log": problem.refitted_frames(
                    "on the training samples of each fold (held-out figures), then on all of "
                    "the log (the calibrated model)"
                )
            }
    samples = sum(r.samples for r in after)
    fitted = problem.summary(full)
    _check_determined(log, train_after, fitted.get("identifiable_dimension"))
    _check_measurable(log, samples, figures, nominal)
    if kind_name == "kinematic" and options.loss == "linear":
        _warn_outliers(log, problem, train_after)
    rms = {
        "train_before": problem.rms(train_before),
        "train_after": problem.rms(train_after),
        "validation_before": held.rms(before),
        "validation_after": held.rms(after),
        "unit": problem.unit,
    }
    summary = report_summary(
        kind_name, chain, log, label, figures, nominal, folds_figures, rms,
        fitted=problem.samples, heldout=samples, convention=problem.rms_convention,
        nominal_model=problem.nominal_model,
    )  # fmt: skip
    if frames is not None:
        summary["heldout"]["frames_refitted"] = frames
    if len(problem.candidates) > 1:
        summary["heldout"]["selection"] = selection.summary(forced is not None)
        if second:
            summary["heldout"]["selection"]["scheme"] = problem.label(scheme)
    summary.update(fitted)
    if train_after[0].measured2 is not None:  # efforts: relative to the measurements
        summary["train_relative_rms"] = relative_rms_of(train_after)
    times, errors_after, measured = shown(after)
    _, errors_before, _ = shown(before)
    a, labels, unit = held.channels(errors_after)
    b, _, _ = held.channels(errors_before)
    return report_of(problem, full, summary, HeldOut(times, a, b, measured, labels, unit))


def report_summary(
    kind: str, chain: Chain, log, scheme: str, figures: dict, nominal: dict, folds: list,
    rms: dict, *, fitted: int, heldout: int, convention: str, nominal_model: str,
) -> dict:  # fmt: skip
    """The summary.json entries every calibration report has (a :class:`Log` or a large log:
    both carry ``dropped``, ``differentiated``, ``decimation`` and ``border``).

    ``convention`` says what the ``rms`` figures are (3-D distances in m, or
    efforts in each joint's unit), ``nominal_model`` what "nominal" is."""
    reduction = getattr(chain, "reduction", None)  # a whole robot's locked joints (a Chain's)
    return {
        "kind": kind,
        "model": chain.name,
        "tool_frame": chain.tool_name,
        "log": log.source,
        "joint_names": list(chain.joint_names),
        "locked_joints": dict(reduction.locked) if reduction is not None else {},
        "heldout_relative_rms": figures["relative_rms"],
        "heldout": {
            "scheme": scheme,
            "samples": heldout,
            "calibrated": figures,
            "nominal": nominal,
            "nominal_model": nominal_model,
            "folds": folds,
        },
        "rms": rms,
        "rms_convention": convention,
        "samples": {"fitted": fitted, "heldout": heldout},
        "dropped_rows": [
            {"line": d.line, "column": d.column, "reason": d.reason} for d in log.dropped
        ],
        "velocities_estimated": log.differentiated,
        "preprocessing": {"decimation": log.decimation, "border_samples": log.border},
        "clock": log.clock or "uniform (not resampled)",
    }


def report_of(
    problem: CalibrationProblem, fit: Any, summary: dict, heldout: HeldOut
) -> CalibrationReport:
    """The report of a kind's ``problem`` fitted on all samples (``fit``): the calibrated
    model, its URDF when it is exactly that model (:func:`calibrated_urdf`), parameters,
    files and dynamics."""
    calibrated = problem.chain(fit)
    dynamics = problem.dynamics(fit)
    urdf, check = calibrated_urdf(calibrated, dynamics)
    return CalibrationReport(
        calibrated,
        summary | {"urdf_check": check},
        problem.parameters(fit),
        heldout,
        problem.files(fit),
        dynamics,
        urdf,
    )


def _check_determined(
    log: Log | ChunkedLog, residuals: Sequence[Residuals], parameters: int | None
) -> None:
    """Refuse a fit with fewer equations (finite residual entries) than identified parameters."""
    equations = sum(int(r.counts.sum()) for r in residuals)
    if parameters is not None and equations < parameters:
        raise WorkbenchError(
            f"{log.source}: underdetermined calibration: {equations} equations from "
            f"{sum(r.samples for r in residuals)} samples for {parameters} identifiable "
            "parameters; log more samples (or more motion)"
        )


OUTLIER = 10.0  # a pose whose error after the fit is this many times the median is an outlier


def _warn_outliers(log: Log, problem, residuals: Sequence[Residuals]) -> None:
    """Warn when some samples' errors after the fit (the pooled score's per sample, as a
    length) exceed :data:`OUTLIER` times the median: a least-squares fit bends toward them
    (three poses of fifty off by 5 cm moved a Panda's calibrated tool by 5.2 mm, against
    0.011 mm without them, and a Huber loss brought it to 0.68 mm)."""
    errors = np.sqrt(np.concatenate([problem.loss(r.errors) for r in residuals]))
    rows = np.concatenate([r.block for r in residuals])
    median = float(np.median(errors))
    far = np.flatnonzero(errors > OUTLIER * median)
    if not median > 0.0 or far.size == 0:
        return
    worst = rows[far[np.argsort(-errors[far])][:5]]
    warnings.warn(
        f"{log.source}: {far.size} of {errors.size} samples miss the calibrated model by more "
        f"than {OUTLIER:g} times the median error (up to {1000 * errors.max():.3g} mm against "
        f"{1000 * median:.3g} mm; samples {', '.join(map(str, worst.tolist()))}): outliers "
        "(a marker swapped or lost, a pose of another instant)? They pull a least-squares fit; "
        "--loss huber or soft_l1 weighs them down",
        WorkbenchWarning,
        stacklevel=2,
    )


def _check_measurable(log: Log | ChunkedLog, samples: int, *figures: dict[str, Any]) -> None:
    """Refuse held-out samples on which the relative error is undefined (NaN or inf)."""
    if all(math.isfinite(f["relative_rms"] or math.nan) for f in figures):
        return
    raise WorkbenchError(
        f"{log.source}: the {samples} held-out sample(s) cannot measure the calibration (their "
        "relative RMS is undefined: too few, or measurements that do not vary); hold out more "
        "samples (--validation, --folds) or log more"
    )
