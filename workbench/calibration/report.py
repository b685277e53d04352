"""One calibration run end to end: choose, fit, validate on held-out samples, write the results.

Every run validates on samples no fit saw: the last fraction of the log,
contiguous cross-validation folds (every sample held out once, predicted by
a fit on the others; leave-one-out for static poses), or a second log
(:mod:`workbench.calibration.validation`). The same folds choose what to fit
among the kind's candidates (:mod:`workbench.calibration.selection`: for
measured poses ``frames``, ``offsets`` or ``twists`` with a ridge toward the
nominal), the kept candidate is fitted on the whole log, and its held-out
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

The results directory holds

* ``summary.json``: ``heldout_relative_rms`` (RMS of the held-out error
  divided by the RMS of the measurement; for poses, of the positions about
  their mean), the nominal model's figure on the same samples, per-joint or
  per-marker figures, per-fold figures, every candidate's figures and why
  one was kept (``heldout.selection``), the kind's own statistics,
  ``urdf_check`` and ``warnings``;
* ``parameters.csv``: columns ``name,value,rel_std_percent`` (base
  parameters named by their regrouping, drive terms ``fv1, fs1, Ia1, off1,
  ..., Iam6, fvm6, fsm6``; for twists, the eta components);
* ``calibrated.urdf``, only when it is exactly the calibrated model (read
  back by Pinocchio to 1e-9; viscous and Coulomb friction in
  ``<dynamics>``): a model with physically impossible link inertias or one
  that does not read back is not written, with a warning
  (:func:`calibrated_urdf`); with drive terms, ``calibrated.drives.toml``
  (all drive parameters, read back by
  :func:`workbench.calibration.drives.read_drive_file`);
* ``residuals.png`` (held-out RMS per channel on a log scale, residual
  histograms; for poses the 3-D distance and the angle per marker) and, for
  torques, ``heldout_torques.png`` (measured, nominal and calibrated torque
  per joint on the held-out samples);
* ``report.html``: the page to open first, with the summary table, the
  candidates, the warnings and the plots inline
  (:mod:`workbench.viz.report_page`).

A forced fit (``parameters`` other than ``auto``) that makes the held-out
error worse is still written (the command line then exits with code 1);
figures that do not exist (a NaN) are ``null`` in ``summary.json``, which
stays valid JSON.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from workbench.calibration.exact_urdf import calibrated_urdf
from workbench.calibration.kinds import Options, kind, std_figure
from workbench.calibration.samples import Log
from workbench.calibration.selection import select
from workbench.calibration.selection import table as selection_table
from workbench.calibration.term_screening import benefit_rows
from workbench.calibration.validation import EndSplit, Folds, relative_rms
from workbench.chain import Chain
from workbench.errors import WorkbenchError
from workbench.io import atomic_write_text
from workbench.lie import Array
from workbench.viz.plots import plot_heldout_torques, plot_residuals
from workbench.viz.report_page import write_report_page


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


def default_validation(log: Log) -> EndSplit | Folds:
    """The scheme a log description asks for, else the last 20 % held out."""
    if log.defaults.folds:
        return Folds(log.defaults.folds)
    return EndSplit(log.defaults.validation or 0.2)


def calibrate(
    chain: Chain,
    kind_name: str,
    log: Log,
    validation: EndSplit | Folds | Log | None = None,
    options: Options | None = None,
) -> CalibrationReport:
    """Calibrate ``chain`` on ``log`` and validate it (module docstring)."""
    options = options or Options()
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
    problem = spec.prepare(chain, log, quiet)
    bar.update()
    everything = np.arange(len(problem.times))
    second = isinstance(validation, Log)  # then the fitted log's own folds choose the model
    scheme = default_validation(log) if second else validation or default_validation(log)
    splits = scheme.splits(problem.times)
    fits = len(problem.candidates) + (problem.nominal_candidate is None)
    bar.total += len(splits) * fits
    bar.set_description(f"{kind_name} calibration: validation fits")
    forced = options.parameters if options.parameters != "auto" else None
    selection = select(problem, splits, bar.update, forced=forced)
    if len(problem.candidates) > 1 and options.progress:
        print(selection_table(selection), file=sys.stderr)
    bar.set_description(f"{kind_name} calibration: fitting {len(problem.times)} samples")
    problem.options = options
    full = problem.fit(None, selection.kept.candidate)
    problem.options = quiet
    bar.update()
    train_after = problem.errors(full, everything)
    train_before = problem.errors(problem.baseline(None), everything)
    folds: list[dict[str, Any]] = []
    shown = problem
    if second:
        weight = getattr(problem, "rotation_weight", options.rotation_weight)  # as fitted
        other = shown = spec.prepare(chain, validation, replace(quiet, rotation_weight=weight))
        rows = np.arange(len(other.times))
        after = other.errors(full, rows)
        before = other.errors(other.baseline(None), rows)
        label = f"second log {validation.source}"
        times, measured = other.times, other.measured(rows)
        figures, nominal = other.heldout(after, rows), other.heldout(before, rows)
    else:
        kept, base = selection.kept, selection.nominal
        rows = kept.rows
        after, before = kept.errors[rows], base.errors[rows]
        label, folds = scheme.label, kept.folds
        times, measured = problem.times[rows], problem.measured(rows)
        figures, nominal = kept.figures, base.figures
    fitted = problem.summary(full)
    _check_determined(log, train_after, fitted.get("identifiable_dimension"))
    _check_measurable(log, len(times), figures, nominal)
    rms = {
        "train_before": problem.rms(train_before),
        "train_after": problem.rms(train_after),
        "validation_before": shown.rms(before),
        "validation_after": shown.rms(after),
        "unit": problem.unit,
    }
    summary = report_summary(
        kind_name, chain, log, label, figures, nominal, folds, rms,
        fitted=len(problem.times), heldout=len(times), convention=problem.rms_convention,
        nominal_model=problem.nominal_model,
    )  # fmt: skip
    if len(problem.candidates) > 1:
        summary["heldout"]["selection"] = selection.summary(forced is not None)
        if second:
            summary["heldout"]["selection"]["scheme"] = scheme.label
    summary.update(fitted)
    if measured is not None:
        summary["train_relative_rms"] = relative_rms(
            train_after + problem.measured(everything), problem.measured(everything)
        )
    a, labels, unit = shown.channels(after)
    b, _, _ = shown.channels(before)
    heldout = HeldOut(times, a, b, measured, labels, unit)
    return report_of(problem, full, summary, heldout)


def report_summary(
    kind: str, chain: Chain, log, scheme: str, figures: dict, nominal: dict, folds: list,
    rms: dict, *, fitted: int, heldout: int, convention: str, nominal_model: str,
) -> dict:  # fmt: skip
    """The summary.json entries every calibration report has (a :class:`Log` or a large log:
    both carry ``dropped``, ``differentiated``, ``decimation`` and ``border``).

    ``convention`` says what the ``rms`` figures are (3-D distances in m, or
    efforts in each joint's unit), ``nominal_model`` what "nominal" is."""
    return {
        "kind": kind,
        "model": chain.name,
        "tool_frame": chain.tool_name,
        "log": log.source,
        "joint_names": list(chain.joint_names),
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


def report_of(problem, fit, summary: dict, heldout: HeldOut) -> CalibrationReport:
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


def _check_determined(log: Log, residuals: Array, parameters: int | None) -> None:
    """Refuse a fit with fewer equations (finite residual entries) than identified parameters."""
    equations = int(np.count_nonzero(np.isfinite(residuals)))
    if parameters is not None and equations < parameters:
        raise WorkbenchError(
            f"{log.source}: underdetermined calibration: {equations} equations from "
            f"{residuals.shape[0]} samples for {parameters} identifiable parameters; "
            "log more samples (or more motion)"
        )


def _check_measurable(log: Log, samples: int, *figures: dict[str, Any]) -> None:
    """Refuse held-out samples on which the relative error is undefined (NaN or inf)."""
    if all(math.isfinite(f["relative_rms"] or math.nan) for f in figures):
        return
    raise WorkbenchError(
        f"{log.source}: the {samples} held-out sample(s) cannot measure the calibration (their "
        "relative RMS is undefined: too few, or measurements that do not vary); hold out more "
        "samples (--validation, --folds) or log more"
    )


def json_ready(value: Any) -> Any:
    """``value`` with NumPy scalars as numbers and NaN or inf as None (JSON has neither)."""
    if isinstance(value, dict):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, np.ndarray):
        return json_ready(value.tolist())
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def page_rows(summary: dict[str, Any]) -> list[tuple[str, Any]]:
    """The summary table of ``report.html``: what ran on what, the held-out figures, the
    candidates and why one was kept, per-joint figures with their units, the URDF check."""
    held = summary["heldout"]
    unit = summary["rms"]["unit"]
    rows = [
        ("model", f"{summary['model']} (tool frame {summary['tool_frame']})"),
        ("log", summary["log"]),
        ("held out", f"{held['scheme']}, {held['samples']} samples"),
        ("nominal model", held["nominal_model"]),
        (
            "held-out relative RMS, nominal -> calibrated",
            f"{_figure(held['nominal']['relative_rms'])} -> "
            f"{_figure(held['calibrated']['relative_rms'])}",
        ),
        (
            f"held-out RMS [{unit}] ({summary['rms_convention']}), nominal -> calibrated",
            f"{_figure(summary['rms']['validation_before'])} -> "
            f"{_figure(summary['rms']['validation_after'])}",
        ),
    ]
    if "orientation_rms_rad" in held["calibrated"]:
        rows.append(
            (
                "held-out orientation RMS [rad] (rotation angle), nominal -> calibrated",
                f"{_figure(held['nominal']['orientation_rms_rad'])} -> "
                f"{_figure(held['calibrated']['orientation_rms_rad'])}",
            )
        )
    joints = summary.get("units", {}).get("joints", {})
    for joint, relative in held["calibrated"].get("relative_rms_per_joint", {}).items():
        rows.append(
            (
                f"{joint}: held-out relative RMS, nominal -> calibrated; RMS "
                f"[{joints.get(joint, {}).get('effort', unit)}]",
                f"{_figure(held['nominal']['relative_rms_per_joint'][joint])} -> "
                f"{_figure(relative)}; {_figure(held['nominal']['rms'][joint])} -> "
                f"{_figure(held['calibrated']['rms'][joint])}",
            )
        )
    selection = held.get("selection")
    if selection:
        for candidate in selection["candidates"]:
            kept = " (kept)" if candidate["name"] == selection["kept"] else ""
            text = f"relative RMS {_figure(candidate['relative_rms'])}"
            if "position_rms_m" in candidate:
                text += f", position {_figure(candidate['position_rms_m'])} m (3-D)"
            if "orientation_rms_rad" in candidate:
                text += f", orientation {_figure(candidate['orientation_rms_rad'])} rad"
            rows.append((f"candidate {candidate['name']}{kept}", text))
        rows.append(("kept, and why", f"{selection['kept']}: {selection['reason']}"))
        rows.append(("held-out figures of the kept candidate", selection["heldout_figures"]))
    rows += benefit_rows(summary.get("term_benefits"))
    check = summary["urdf_check"]
    rows.append(
        (
            "calibrated.urdf",
            "written; reads back equal to the model within "
            f"{_figure(max(check['reload_max_difference'].values()))}"
            if check["written"]
            else f"not written: {check['reason']}",
        )
    )
    rows += [
        ("samples fitted", summary["samples"]["fitted"]),
        ("files", ", ".join(summary["files"])),
    ]
    return rows


def _figure(value: Any) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.4g}"


def parameters_csv(rows: list[tuple[str, float, float]]) -> str:
    """``name,value,rel_std_percent`` text: the relative std in percent, ``0 (fixed)`` for a
    parameter not estimated, ``<1e-9`` below numerical meaning, ``inf`` for a value of 0
    (:func:`workbench.calibration.kinds.std_figure`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["name", "value", "rel_std_percent"])
    for name, value, rel in rows:
        figure = std_figure(rel)
        writer.writerow(
            [name, repr(float(value)), figure if isinstance(figure, str) else repr(figure)]
        )
    return buffer.getvalue()


def write_report(
    directory: str | os.PathLike, report: CalibrationReport, warnings: list[str] | None = None
) -> Path:
    """Write the results (module docstring) into ``directory``."""
    directory = Path(directory)
    written = ["summary.json", "parameters.csv", "report.html", *report.files]
    if report.urdf is not None:
        atomic_write_text(directory / "calibrated.urdf", report.urdf)
        written.append("calibrated.urdf")
    for name, text in report.files.items():
        atomic_write_text(directory / name, text)
    atomic_write_text(directory / "parameters.csv", parameters_csv(report.parameters))
    h = report.heldout
    plots = [plot_residuals(directory / "residuals.png", h.before, h.after, h.labels, unit=h.unit)]
    if h.measured is not None:
        plots.append(
            plot_heldout_torques(
                directory / "heldout_torques.png", h.t, h.measured, h.measured + h.after,
                h.measured + h.before, h.labels,
                ylabel="torque [N m]" if h.unit == "N m" else "effort [unit in each title]",
            )
        )  # fmt: skip
    summary = report.summary | {
        "urdf": "calibrated.urdf" if report.urdf is not None else None,
        "files": sorted(written),
        "warnings": warnings or [],
    }
    write_report_page(
        directory / "report.html",
        f"{summary['kind']} calibration of {summary['model']}",
        page_rows(summary),
        plots,
        warnings=summary["warnings"],
    )
    text = json.dumps(json_ready(summary), indent=2, allow_nan=False)
    atomic_write_text(directory / "summary.json", text + "\n")
    return directory
