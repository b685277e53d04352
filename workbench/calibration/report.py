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
  and calibrated torque per joint on the held-out samples).
"""

from __future__ import annotations

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

from workbench.calibration.kinds import Options, kind
from workbench.calibration.samples import Log
from workbench.calibration.validation import EndSplit, Folds, relative_rms
from workbench.chain import Chain
from workbench.errors import WorkbenchError
from workbench.io import atomic_write_text
from workbench.lie import Array
from workbench.urdf import load_urdf, write_urdf
from workbench.viz.plots import plot_heldout_torques, plot_residuals


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
    spec = kind(kind_name)
    problem = spec.prepare(chain, log, options)
    _say(options, f"{kind_name} calibration: fitting {len(problem.times)} samples")
    full = problem.fit(None)
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
        after = np.full_like(train_after, np.nan)
        before = np.full_like(train_before, np.nan)
        held = np.zeros(len(problem.times), dtype=bool)
        for f, (train, test) in enumerate(splits):
            _say(options, f"{kind_name} calibration: validation fit {f + 1} of {len(splits)}")
            after[test] = problem.errors(problem.fit(train), test)
            before[test] = problem.errors(problem.baseline(train), test)
            held[test] = True
            if len(splits) <= 20:
                folds.append(
                    {"samples": int(test.size), **_numbers(problem.heldout(after[test], test))}
                )
        rows = np.flatnonzero(held)
        after, before = after[rows], before[rows]
        times, measured = problem.times[rows], problem.measured(rows)
        figures = problem.heldout(after, rows)
        nominal = problem.heldout(before, rows)
    summary = {
        "kind": kind_name,
        "model": chain.name,
        "tool_frame": chain.tool_name,
        "log": log.source,
        "joint_names": list(chain.joint_names),
        "heldout_relative_rms": figures["relative_rms"],
        "heldout": {
            "scheme": label,
            "samples": len(times),
            "calibrated": figures,
            "nominal": nominal,
            "folds": folds,
        },
        "rms": {
            "train_before": _rms(train_before),
            "train_after": _rms(train_after),
            "validation_before": _rms(before),
            "validation_after": _rms(after),
            "unit": problem.unit,
        },
        "samples": {"fitted": len(problem.times), "heldout": len(times)},
        "dropped_rows": [
            {"line": d.line, "column": d.column, "reason": d.reason} for d in log.dropped
        ],
        "velocities_estimated": log.differentiated,
        "preprocessing": {"decimation": log.decimation, "border_samples": log.border},
        **problem.summary(full),
    }
    if problem.unit == "N m":
        summary["train_relative_rms"] = relative_rms(
            train_after + problem.measured(everything), problem.measured(everything)
        )
    heldout = HeldOut(times, after, before, measured, tuple(problem.labels), problem.unit)
    return CalibrationReport(
        problem.chain(full),
        summary,
        problem.parameters(full),
        heldout,
        problem.files(full),
        problem.dynamics(full),
    )


def _say(options: Options, message: str) -> None:
    if options.progress:
        print(message, file=sys.stderr, flush=True)


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
    reloaded = load_urdf(urdf, tool_frame=report.chain.tool_name)
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
    plot_residuals(directory / "residuals.png", h.before, h.after, h.labels, unit=h.unit)
    if h.measured is not None:
        plot_heldout_torques(
            directory / "heldout_torques.png", h.t, h.measured, h.measured + h.after,
            h.measured + h.before, h.labels,
        )  # fmt: skip
    summary = report.summary | {
        "urdf": urdf.name,
        "urdf_reload_max_difference": mismatch,
        "files": sorted(["summary.json", "parameters.csv", "calibrated.urdf", *report.files]),
        "warnings": warnings or [],
    }
    text = json.dumps(json_ready(summary), indent=2, allow_nan=False)
    atomic_write_text(directory / "summary.json", text + "\n")
    return directory
