"""One calibration run: a request (model, log, kind, options) to a report, every check included.

This is what ``workbench calibrate`` does between parsing its options and
printing its result, so that the command line only parses, calls and
prints, and a program gets the same run from Python::

    from workbench.calibration import Request, run_calibration

    outcome = run_calibration(Request("staubli_tx40", "models/staubli_tx40/identification.toml",
                                      "dynamic", folds=5))
    outcome.report.summary["heldout"]

The run decides which combinations of log and options are legal (a large
log only for a kind with an accumulated problem, options that apply to
another kind refused naming the option: both as the registry
:mod:`workbench.calibration.problems.kinds` says), loads the model as the log needs
it (a whole robot cut to the joints the log names, a closed chain from its
motors' log), reads the log and the validation log, identifies drive gains
from a ``payload_log``, calibrates (:func:`workbench.calibration.calibrate`,
in memory or from a large log's triangular factors alike), and diagnoses an
implausible torque fit (:mod:`workbench.calibration.checks.fit_plausibility`; the efforts'
comparison with the nominal torques under the summary key ``effort_check``, its suggested
scales labelled as coming from the nominal model), and compares a
dynamic model's links and mass matrix with the nominal ones
(:mod:`workbench.calibration.checks.link_plausibility`, summary key ``nominal_comparison``).
Warnings are collected, not printed: :attr:`Outcome.messages`.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

from workbench import closed_chains, models
from workbench.calibration.checks.effort_units import compare_efforts, effort_summary
from workbench.calibration.checks.fit_plausibility import Diagnosis, diagnose
from workbench.calibration.checks.geometry_plausibility import compare_geometry, position_misfit
from workbench.calibration.checks.link_plausibility import compare_links
from workbench.calibration.cross_validation import CalibrationReport, calibrate
from workbench.calibration.fitting.closed_chain import require_motor_coordinates
from workbench.calibration.fitting.drive_gains import DriveGainFit, identify_drive_gains
from workbench.calibration.problems.kinds import KINDS, kind
from workbench.calibration.problems.problem import Options
from workbench.calibration.reporting.joint_figures import per_joint_figures
from workbench.calibration.selection.validation import EndSplit, Folds
from workbench.chain import Chain
from workbench.errors import WorkbenchError, WorkbenchWarning
from workbench.identification.drives import (
    DEFAULT_TERMS,
    Drives,
    nominal_drive_file,
    sidecar_path,
)
from workbench.recordings.chunked_logs import ChunkedLog, is_chunked_log, open_chunked_log
from workbench.recordings.log import Log
from workbench.recordings.log_files import logged_joints, read_log


@dataclass(frozen=True)
class Request:
    """What to calibrate and how (the options of ``workbench calibrate``, as values).

    ``model`` a model name, URDF path or closed chain; ``log`` a table, log
    description, ROS bag or large log; ``validation`` a held-out fraction,
    ``folds`` a number of contiguous folds (-1: leave one out) or
    ``validation_log`` a second log (at most one of the three).
    """

    model: str
    log: str
    kind: str
    tool: str | None = None
    validation: float | None = None
    folds: int | None = None
    validation_log: str | None = None
    terms: tuple[str, ...] | None = None
    loss: str = "linear"
    f_scale: float | None = None
    rotation_weight: float | None = None
    drop_bad_rows: bool = False
    savgol_window: int = 11
    inertial: bool = False
    physical: bool = False  # accepted; the consistent fit is the default
    unconstrained: bool = False  # dynamic: the least-squares completion, consistent or not
    parameters: str = "auto"
    payload_log: str | None = None
    progress: bool = False
    prior_weights: tuple[float, ...] | None = None  # dynamic: weights of the prior to score


@dataclass(frozen=True)
class Outcome:
    """A finished run: the report, the warnings it gave, and what makes its fit implausible."""

    report: CalibrationReport
    messages: list[str]
    diagnoses: list[Diagnosis]
    log: Log

    @property
    def untrusted(self) -> list[str]:
        """Why the calibrated model is not to be trusted (an implausible fit, a calibration that
        did not help); [] when it is. ``workbench calibrate`` exits 1 on any and records them in
        summary.json (``exit``), and ``workbench export`` refuses such results without
        --force."""
        reasons = [f"implausible fit: {d.message}" for d in self.diagnoses]
        if not self.improved:
            reasons.append(
                "the calibrated model predicts the held-out samples worse than the nominal model"
            )
        return reasons

    @property
    def improved(self) -> bool:
        """Whether the calibrated model predicts the held-out samples at least as well."""
        held = self.report.summary["heldout"]
        return held["calibrated"]["relative_rms"] <= held["nominal"]["relative_rms"]


def _naming_unlogged_joints(diagnoses: list[Diagnosis], chain: Chain, model: str) -> list:
    """``diagnoses`` of a kinematic fit, each naming the joints on the tool's path that the log
    gives no value for (locked: TIAGo's lift, its column lost, moved the arm's joints by
    73 mm in the fit, and the diagnosis could not say why)."""
    if not diagnoses or chain.reduction is None:
        return diagnoses
    locked = dict(chain.reduction.locked)
    unlogged = [j for j in models.path_joints(model, chain.tool_name) if j in locked]
    if not unlogged:
        return diagnoses
    note = (
        f"; the log gives no value for {', '.join(unlogged)} on the tool's path (locked at "
        f"{', '.join(f'{locked[j]:g}' for j in unlogged)}): if they moved, log them"
    )
    return [replace(d, evidence=d.evidence + note) for d in diagnoses]


def check_request(request: Request) -> None:
    """Refuse, before any work, options that do not apply or numbers out of range."""
    spec = kind(request.kind)  # an unknown kind names the known ones
    for other in KINDS.values():  # options that only other kinds read
        for field in other.reads:
            if getattr(request, field) not in (None, False) and field not in spec.reads:
                readers = [k.name for k in KINDS.values() if field in k.reads]
                raise WorkbenchError(
                    f"--{field.replace('_', '-')} applies to --kind {' or '.join(readers)}, "
                    f"not --kind {request.kind}"
                )
    held = [v is not None for v in (request.validation, request.folds, request.validation_log)]
    if sum(held) > 1:
        raise WorkbenchError("give one of --validation, --folds and --validation-log")
    for option in ("f_scale", "rotation_weight"):
        value = getattr(request, option)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise WorkbenchError(f"--{option.replace('_', '-')} {value} must be positive")
    if request.validation is not None:
        EndSplit(request.validation)  # checks the fraction
    if request.folds is not None:
        Folds(request.folds)  # checks the number of folds
    if is_chunked_log(request.log):
        spec.check_large_log(request.log)
        given = [
            option
            for option, value in (
                ("--validation-log", request.validation_log),
                ("--drop-bad-rows", request.drop_bad_rows),
                ("--payload-log", request.payload_log),
            )
            if value
        ]
        if given:
            raise WorkbenchError(
                f"--log {request.log} is a large log (pre-processed, read chunk by chunk): "
                f"{', '.join(given)} do(es) not apply; validate on its own folds "
                "(--folds K or --validation FRACTION)"
            )
    if request.validation_log is not None:
        if is_chunked_log(request.validation_log):
            raise WorkbenchError(
                f"--validation-log {request.validation_log}: a second validation log is a table "
                "(CSV, NPZ), a log description or a bag, not a large log (Parquet, a directory)"
            )
        if Path(request.validation_log).resolve() == Path(request.log).resolve():
            raise WorkbenchError(
                f"--validation-log {request.validation_log} is the log calibrated on: its score "
                "would be a training score, not a held-out one (use --folds instead)"
            )


def _coupled_motors_of_the_log(
    nominal: dict[str, float] | None, log: Log | ChunkedLog, drive_file: Path
) -> dict[str, float] | None:
    """The nominal drive values without the coupled motors' terms (``Iam``, ``fvm``, ``fsm``)
    when the log describes no transmission, which they need (a table log, as simulate-log
    writes for a robot whose drive file couples motors), with a warning naming them."""
    if not nominal or getattr(log, "transmission", None) is not None:
        return nominal
    coupled = sorted(name for name in nominal if re.fullmatch(r"(Iam|fvm|fsm)\d+", name))
    if coupled:
        warnings.warn(
            f"{drive_file}: the coupled motors' nominal terms {', '.join(coupled)} are left "
            f"out: the log {log.source} describes no transmission (a log description's "
            "[transmission])",
            WorkbenchWarning,
            stacklevel=2,
        )
    return {name: value for name, value in nominal.items() if name not in coupled}


def run_calibration(request: Request) -> Outcome:
    """Run ``request`` (module docstring); warnings are returned in the outcome."""
    check_request(request)
    spec = kind(request.kind)
    large = is_chunked_log(request.log)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", WorkbenchWarning)
        try:
            return _run(request, spec, large, caught)
        except WorkbenchError as exc:  # a refusal keeps what was warned on the way (the cause)
            said = _messages(caught)
            if type(exc) is not WorkbenchError or not said:
                raise
            raise WorkbenchError(f"{exc} (warned before: {'; '.join(said)})") from exc


def _messages(caught: list[warnings.WarningMessage]) -> list[str]:
    return [" ".join(str(w.message).split()) for w in caught if w.category is WorkbenchWarning]


def _run(request: Request, spec, large: bool, caught: list[warnings.WarningMessage]) -> Outcome:
    """:func:`run_calibration` inside its warnings' record ``caught``."""
    chain, log_chain, urdf = _model(request, large)
    nominal, speeds, delay = nominal_drive_file(urdf, chain.joint_names)
    reading = dict(
        require=spec.requires, drop_bad_rows=request.drop_bad_rows,
        savgol_window=request.savgol_window, progress=request.progress,
    )  # fmt: skip
    if large:
        log = open_chunked_log(request.log, log_chain)
    else:
        log = read_log(request.log, log_chain, **reading)
    if log.excluded and (request.kind != "dynamic" or request.payload_log):
        what = "--payload-log" if request.kind == "dynamic" else f"--kind {request.kind}"
        raise WorkbenchError(
            f"{log.source}: [torques] exclude ({', '.join(log.excluded)}) applies to the "
            f"dynamic identification of a log, not with {what}"
        )
    nominal = _coupled_motors_of_the_log(nominal, log, sidecar_path(urdf))
    validation = _validation(request, log_chain, reading, log)
    gains = None
    if request.payload_log:
        gains = _drive_gains(request, chain, log_chain, log, reading)
        log = gains.scaled(log)
        if isinstance(validation, Log):
            validation = gains.scaled(validation)
    options = Options(
        loss=request.loss, f_scale=request.f_scale, physical=not request.unconstrained,
        inertial=request.inertial, terms=request.terms, nominal_drives=nominal,
        nominal_stribeck_speed=speeds, nominal_delay=delay,
        rotation_weight=request.rotation_weight, parameters=request.parameters,
        progress=request.progress, prior_weights=request.prior_weights or (),
    )  # fmt: skip
    report = calibrate(chain, request.kind, log, validation, options)
    diagnoses = []
    if request.kind == "kinematic" and isinstance(report.chain, Chain):
        diagnoses = compare_geometry(chain, report.chain) + position_misfit(report.summary)
        diagnoses = _naming_unlogged_joints(diagnoses, chain, request.model)
    if not large and spec.requires == ("tau",) and log_chain is chain:
        diagnoses = diagnose(log, chain, report.chain, nominal)
        checked = effort_summary(compare_efforts(log, chain, nominal))
        report = replace(report, summary=report.summary | {"effort_check": checked})
    figures = per_joint_figures(report.summary)
    if figures is not None:
        report = replace(report, summary=report.summary | {"heldout_per_joint": figures})
        if request.kind == "dynamic":
            _warn_worse_than_zero(figures, log.source)
    if chain.reduction is not None:  # a whole robot: where the others were locked
        locked = {name: float(value) for name, value in chain.reduction.locked}
        report = replace(report, summary=report.summary | {"locked_joints": locked})
    if request.kind == "dynamic" and log_chain is chain:
        q = None if large else log.q[:: max(1, len(log) // 200)]
        comparison = compare_links(chain, report.chain, q)
        report = replace(report, summary=report.summary | {"nominal_comparison": comparison})
    if gains is not None:
        report = replace(
            report, summary=report.summary | {"drive_gains": gains.summary()},
            files=report.files | {"drive_gains.toml": gains.scale_text() + "\n"},
        )  # fmt: skip
    return Outcome(report, _messages(caught), diagnoses, log)


def _warn_worse_than_zero(figures: dict, source: str) -> None:
    """Warn of each joint the calibrated model predicts worse than zero on the held-out samples
    (a dead or untrusted channel the effort check could not judge), with its exclude line."""
    for joint in figures["worse_than_zero"]:
        warnings.warn(
            f"{source}: joint '{joint}': the calibrated model predicts its held-out torques "
            f"worse than zero (relative RMS {figures['calibrated'][joint]:.3g}): a dead or "
            "untrusted channel? Leave it out of the fit, its motion kept, with [torques] "
            f'exclude = ["{joint}"]',
            WorkbenchWarning,
            stacklevel=2,
        )


def _model(request: Request, large: bool):
    """The model to calibrate, the chain whose joints the log has, and the URDF behind it.

    A whole robot is cut to the joints the log names (``[model] joints`` or
    its columns), the others locked (:func:`workbench.models.load`). A
    closed chain (shipped name or closure file) is calibrated from its
    motors' log (``--kind twist``, with ``--inertial`` for the links' phi).
    """
    if closed_chains.is_closed_chain(request.model):
        if not kind(request.kind).closed_chains:
            able = " or ".join(k.name for k in KINDS.values() if k.closed_chains)
            raise WorkbenchError(
                f"--model {request.model} is a closed chain: only its motors are logged, so it "
                f"is calibrated with --kind {able} (add --inertial for the links' inertial "
                "parameters)"
            )
        model = closed_chains.load(request.model)
        require_motor_coordinates(model)
        return model, model.motors, model.urdf_path
    children = models.joint_children(request.model)
    if (
        request.kind == "kinematic"
        and request.tool in children
        and request.tool not in set(children.values())
    ):
        raise WorkbenchError(
            f"--tool {request.tool} is a joint of {request.model}, not a link: a kinematic "
            "calibration fits the tool frame, which the calibrated URDF keeps on a link; name "
            f"the link the markers are on (the joint's child: {children[request.tool]})"
        )
    whole = models.movable_joints(request.model)
    joints, locked, held = (None, {}, {}) if large else logged_joints(request.log, whole)
    chain = models.load(
        request.model, tool_frame=request.tool, moving=True, joints=joints, locked=locked,
        held=held,
    )  # fmt: skip
    return chain, chain, models.urdf_path(request.model)


def _validation(
    request: Request, log_chain, reading: dict, log: Log | ChunkedLog
) -> EndSplit | Folds | Log | None:
    if request.validation_log:
        validation = read_log(request.validation_log, log_chain, **reading)
        _check_same_efforts(log, validation)
        return validation
    if request.folds is not None:  # random samples when the description shuffles its folds
        return Folds(request.folds, log.defaults.shuffle, log.defaults.seed)
    if request.validation is not None:
        return EndSplit(request.validation)
    return None


def _check_same_efforts(log: Log | ChunkedLog, validation: Log) -> None:
    """A validation log scores the channels the log fits, in the same unit: its ``[torques]
    exclude`` and ``unit`` must be the log's."""
    pairs = {
        "[torques] exclude": (", ".join(log.excluded), ", ".join(validation.excluded)),
        "[torques] unit": (log.effort_unit or "SI", validation.effort_unit or "SI"),
    }
    for what, (mine, theirs) in pairs.items():
        if mine != theirs:
            raise WorkbenchError(
                f"--validation-log {validation.source}: its {what} ({theirs or 'none'}) is not "
                f"the log's ({mine or 'none'}): the held-out figures compare the same channels "
                "in the same unit"
            )


def _drive_gains(request: Request, chain, log_chain, log: Log, reading: dict) -> DriveGainFit:
    """Drive gains from the log and the payload log
    (:mod:`workbench.calibration.fitting.drive_gains`)."""
    loaded = read_log(request.payload_log, log_chain, **reading)
    if loaded.payload is None:
        raise WorkbenchError(
            f"--payload-log {request.payload_log}: the log names no known payload; describe it "
            "in [model.payload] (link, mass, com, inertia)"
        )
    terms = request.terms or log.defaults.terms or DEFAULT_TERMS
    drives = Drives(chain.n, tuple(terms), log.transmission, log.min_speed)
    return identify_drive_gains(chain, [log, loaded], drives)
