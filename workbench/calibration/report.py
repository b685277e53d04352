"""One calibration run end to end: fit, validate on held-out samples, write the results.

Every run fits the whole log and validates on samples no fit saw: the last
fraction of the log, contiguous cross-validation folds (every sample held
out once, predicted by a fit on the others; leave-one-out for static poses),
or a second log (:mod:`workbench.calibration.validation`). The nominal model
is scored on the same held-out samples (for measured poses in an unknown
device frame, with its device and marker frames fitted on the same training
samples, its best case).

The results directory holds

* ``summary.json``: ``heldout_relative_rms`` (RMS of the held-out error
  divided by the RMS of the measurement; for poses, of the positions about
  their mean), the nominal model's figure on the same samples, per-channel
  RMS, per-fold figures, the kind's own statistics, and ``warnings``;
* ``parameters.csv``: columns ``name,value,rel_std_percent`` (base
  parameters named by their regrouping, drive terms ``fv1, fs1, Ia1, off1,
  ..., Iam6, fvm6, fsm6``; for twists, the eta components);
* ``calibrated.urdf`` (checked by loading it back with Pinocchio; viscous
  and Coulomb friction in ``<dynamics>``) and, with drive terms,
  ``calibrated.drives.toml`` (all drive parameters, read back by
  :func:`workbench.calibration.drives.read_drive_file`);
* ``residuals.png`` (held-out RMS per channel on a log scale, residual
  histograms) and, for torques, ``heldout_torques.png`` (measured, nominal
  and calibrated torque per joint on the held-out samples);
* ``report.html``: the page to open first, with the summary table, the
  warnings and the plots inline (:mod:`workbench.viz.report_page`).

A fit that makes the held-out error worse is still written (the command
line then exits with code 1); figures that do not exist (a NaN) are
``null`` in ``summary.json``, which stays valid JSON.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import sys
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from workbench.calibration.kinds import Options, kind
from workbench.calibration.samples import Log
from workbench.calibration.validation import EndSplit, Folds, relative_rms
from workbench.chain import Chain, check_inertias
from workbench.errors import WorkbenchError, WorkbenchWarning
from workbench.io import atomic_write_text
from workbench.lie import Array
from workbench.urdf import reload_urdf, write_urdf
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
    problem = spec.prepare(chain, log, options)
    bar.update()
    bar.set_description(f"{kind_name} calibration: fitting {len(problem.times)} samples")
    full = problem.fit(None)
    bar.update()
    problem.options = replace(options, progress=False)  # validation fits run quietly
    everything = np.arange(len(problem.times))
    train_after = problem.errors(full, everything)
    train_before = problem.errors(problem.baseline(None), everything)
    folds: list[dict[str, Any]] = []
    if isinstance(validation, Log):
        other = spec.prepare(chain, validation, options)
        rows = np.arange(len(other.times))
        after = other.errors(full, rows)
        before = other.errors(other.baseline(None), rows)
        label, times, measured = (
            f"second log {validation.source}",
            other.times,
            other.measured(rows),
        )
        figures = other.heldout(after, rows)
        nominal = other.heldout(before, rows)
    else:
        scheme = validation or default_validation(log)
        label = scheme.label
        splits = scheme.splits(problem.times)
        bar.total += len(splits)
        after = np.full_like(train_after, np.nan)
        before = np.full_like(train_before, np.nan)
        held = np.zeros(len(problem.times), dtype=bool)
        bar.set_description(f"{kind_name} calibration: validation fits")
        for train, test in splits:
            after[test] = problem.errors(problem.fit(train), test)
            before[test] = problem.errors(problem.baseline(train), test)
            held[test] = True
            bar.update()
            if len(splits) <= 20:
                folds.append(
                    {"samples": int(test.size), **_numbers(problem.heldout(after[test], test))}
                )
        rows = np.flatnonzero(held)
        after, before = after[rows], before[rows]
        times, measured = problem.times[rows], problem.measured(rows)
        figures = problem.heldout(after, rows)
        nominal = problem.heldout(before, rows)
    fitted = problem.summary(full)
    _check_determined(log, train_after, fitted.get("identifiable_dimension"))
    _check_measurable(log, len(times), figures, nominal)
    rms = {
        "train_before": _rms(train_before),
        "train_after": _rms(train_after),
        "validation_before": _rms(before),
        "validation_after": _rms(after),
        "unit": problem.unit,
    }
    summary = report_summary(
        kind_name, chain, log, label, figures, nominal, folds, rms,
        fitted=len(problem.times), heldout=len(times),
    )  # fmt: skip
    summary.update(fitted)
    if problem.unit == "N m":
        summary["train_relative_rms"] = relative_rms(
            train_after + problem.measured(everything), problem.measured(everything)
        )
    heldout = HeldOut(times, after, before, measured, tuple(problem.labels), problem.unit)
    return report_of(problem, full, summary, heldout)


def report_summary(
    kind: str, chain: Chain, log, scheme: str, figures: dict, nominal: dict, folds: list,
    rms: dict, *, fitted: int, heldout: int,
) -> dict:  # fmt: skip
    """The summary.json entries every calibration report has (a :class:`Log` or a large log:
    both carry ``dropped``, ``differentiated``, ``decimation`` and ``border``)."""
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
            "folds": folds,
        },
        "rms": rms,
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
    model (a warning when it is physically impossible), parameters, files and dynamics."""
    calibrated = problem.chain(fit)
    warn_if_impossible(calibrated)
    return CalibrationReport(
        calibrated,
        summary,
        problem.parameters(fit),
        heldout,
        problem.files(fit),
        problem.dynamics(fit),
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


def warn_if_impossible(chain: Chain) -> None:
    """Warn when the calibrated inertias are no rigid body's (workbench will not load them)."""
    try:
        check_inertias(chain, "the calibrated model")
    except WorkbenchError as exc:
        warnings.warn(
            f"{exc}; it reproduces the identified torques, but workbench refuses to load it as "
            "a robot model (calibrate with --physical for a physically consistent one)",
            WorkbenchWarning,
            stacklevel=3,
        )


def _rms(r: Array) -> float:
    return float(np.sqrt(np.nanmean(np.square(r))))


def _numbers(figures: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in figures.items() if not isinstance(v, dict)}


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
    """The summary table of ``report.html``: what ran on what, and the held-out figures."""
    held = summary["heldout"]
    unit = summary["rms"]["unit"]
    return [
        ("model", f"{summary['model']} (tool frame {summary['tool_frame']})"),
        ("log", summary["log"]),
        ("held out", f"{held['scheme']}, {held['samples']} samples"),
        (
            "held-out relative RMS, nominal -> calibrated",
            f"{_figure(held['nominal']['relative_rms'])} -> "
            f"{_figure(held['calibrated']['relative_rms'])}",
        ),
        (
            f"held-out RMS [{unit}], nominal -> calibrated",
            f"{_figure(summary['rms']['validation_before'])} -> "
            f"{_figure(summary['rms']['validation_after'])}",
        ),
        ("samples fitted", summary["samples"]["fitted"]),
        ("files", ", ".join(summary["files"])),
    ]


def _figure(value: Any) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.4g}"


def parameters_csv(rows: list[tuple[str, float, float]]) -> str:
    """``name,value,rel_std_percent`` text (relative std ``inf`` where the value is 0)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["name", "value", "rel_std_percent"])
    for name, value, rel in rows:
        writer.writerow(
            [name, repr(float(value)), repr(float(rel)) if math.isfinite(rel) else "inf"]
        )
    return buffer.getvalue()


def write_report(
    directory: str | os.PathLike, report: CalibrationReport, warnings: list[str] | None = None
) -> Path:
    """Write the results (module docstring) into ``directory``."""
    directory = Path(directory)
    urdf = write_urdf(report.chain, directory / "calibrated.urdf", dynamics=report.dynamics)
    reloaded = reload_urdf(report.chain, urdf)
    if reloaded.joint_names != report.chain.joint_names:
        raise WorkbenchError(f"{urdf}: joint names changed when written")
    mismatch = {
        "twists": float(np.abs(reloaded.twists - report.chain.twists).max()),
        "tool_frame": float(np.abs(reloaded.tool_frame - report.chain.tool_frame).max()),
        "phi": float(np.abs(reloaded.phi - report.chain.phi).max()),
    }
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
            )
        )  # fmt: skip
    summary = report.summary | {
        "urdf": urdf.name,
        "urdf_reload_max_difference": mismatch,
        "files": sorted(
            ["summary.json", "parameters.csv", "calibrated.urdf", "report.html", *report.files]
        ),
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
