"""The results of a calibration run, written: summary, parameters, the calibrated URDF, plots, page.

The report comes from :func:`workbench.calibration.cross_validation.calibrate`
(its validation and conventions are described there); the results directory
holds

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
  (:func:`workbench.calibration.reporting.exact_urdf.calibrated_urdf`); with drive
  terms, ``calibrated.drives.toml`` (all drive parameters, read back by
  :func:`workbench.identification.drives.read_drive_file`);
* ``residuals.png`` (held-out RMS per channel on a log scale, residual
  histograms; for poses the 3-D distance and the angle per marker) and, for
  torques, ``heldout_torques.png`` (measured, nominal and calibrated torque
  per joint on the held-out samples; every k-th of them when there are more
  than :data:`PLOTTED_SAMPLES`);
* ``report.html``: the page to open first, with the summary table, the
  candidates, the warnings and the plots inline
  (:mod:`workbench.viz.report_page`).

A forced fit (``parameters`` other than ``auto``) that makes the held-out
error worse is still written (the command line then exits with code 1);
figures that do not exist (a NaN) are ``null`` in ``summary.json``, which
stays valid JSON.
"""

from __future__ import annotations

import csv
import io
import math
import os
from pathlib import Path
from typing import Any

from workbench.calibration.cross_validation import CalibrationReport
from workbench.calibration.problems.parameter_figures import std_figure
from workbench.calibration.reporting.joint_figures import summary_line
from workbench.calibration.selection.term_screening import benefit_rows
from workbench.io import atomic_write_text, json_text
from workbench.viz import drawing
from workbench.viz.report_page import write_report_page

PLOTTED_SAMPLES = 5_000
"""At most about this many held-out samples (every k-th) are drawn as torque curves."""


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
    ]
    if summary.get("torques_excluded"):
        rows.append(
            (
                "torque channels excluded ([torques] exclude: no figures, motion kept)",
                ", ".join(summary["torques_excluded"]),
            )
        )
    per_joint = summary.get("heldout_per_joint")
    if per_joint is not None:
        rows.append(
            ("held-out relative RMS per joint, mean of the joints", summary_line(per_joint))
        )
    rows += [
        (
            "held-out relative RMS (pooled"
            + (", adds N and N m" if per_joint and per_joint["pooled_mixes_units"] else "")
            + "), nominal -> calibrated",
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
    for log, frames in held.get("frames_refitted", {}).items():
        markers = "; ".join(f"{k}: {v}" for k, v in frames["marker_frames"].items())
        rows.append(
            (
                f"frames refitted ({log.replace('_', ' ')})",
                f"device frame: {frames['device_frame']}; marker frames: {markers}",
            )
        )
    for joint, entry in summary.get("compliance", {}).get("joints", {}).items():
        value = (
            "rigid"
            if entry["stiffness"] is None
            else (
                f"stiffness {_figure(entry['stiffness'])} +- {_figure(entry['stiffness_std'])} "
                f"{entry['stiffness_unit']}"
            )
        )
        rows.append(
            (
                f"{joint}: compliance [{entry['compliance_unit']}]",
                f"{_figure(entry['compliance'])} +- {_figure(entry['compliance_std'])} ({value}"
                f"{'' if entry['estimated'] else ', not seen by the data'})",
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
    (:func:`workbench.calibration.problems.parameter_figures.std_figure`)."""
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
    h = report.heldout
    drawings = [  # drawn in the drawing worker while the files below are written, if any
        drawing.draw(
            "residuals.png", "workbench.viz.plots:plot_residuals", h.before, h.after, h.labels,
            unit=h.unit,
        )
    ]  # fmt: skip
    if h.measured is not None:
        k = slice(None, None, max(1, -(-len(h.t) // PLOTTED_SAMPLES)))
        measured = h.measured[k]
        drawings.append(
            drawing.draw(
                "heldout_torques.png", "workbench.viz.plots:plot_heldout_torques", h.t[k],
                measured, measured + h.after[k], measured + h.before[k], h.labels,
                ylabel="torque [N m]" if h.unit == "N m" else "effort [unit in each title]",
            )
        )  # fmt: skip
    written = ["summary.json", "parameters.csv", "report.html", *report.files]
    if report.urdf is not None:
        atomic_write_text(directory / "calibrated.urdf", report.urdf)
        written.append("calibrated.urdf")
    for name, text in report.files.items():
        atomic_write_text(directory / name, text)
    atomic_write_text(directory / "parameters.csv", parameters_csv(report.parameters))
    plots = [d.write(directory) for d in drawings]
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
    atomic_write_text(directory / "summary.json", json_text(summary))
    return directory
