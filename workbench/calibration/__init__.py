"""Calibration of a robot model from its logs: kinematic, joint-twist, dynamic, payload.

The Python API, on one page::

    import workbench as wb
    from workbench.calibration import Folds, calibrate, read_log, write_report

    chain = wb.models.load("staubli_tx40")
    log = read_log("models/staubli_tx40/identification.toml", chain, require=("tau",))
    report = calibrate(chain, "dynamic", log, Folds(5))
    report.summary["heldout"]["calibrated"]["relative_rms"]
    write_report("results/tx40", report)

Reading: :func:`read_log` (tables, log descriptions, ROS bags), :func:`read_joint_states`,
:func:`read_poses` and :func:`topics` of bags, :func:`uniform_clock` and :func:`resample`
for real clocks, :func:`standstill_segments` and :func:`average_postures` for mocap
postures. Fitting: :func:`calibrate` with :class:`Options` and a validation scheme
(:class:`Folds`, :class:`EndSplit` or a second log), :func:`identify_payload`,
:func:`identify_drive_gains`. Checking: :func:`compare_efforts`, :func:`diagnose`.
A kind's problem satisfies :class:`CalibrationProblem` (blocks, fits,
:class:`Residuals`), the contract :func:`calibrate` runs for logs in memory
and large logs alike. Simulating: :func:`simulate_log`. Writing:
:func:`write_report`, :func:`write_log`.
A whole run as the command line makes it, every check included:
:func:`run_calibration` of a :class:`Request`.
"""

from __future__ import annotations

from workbench.exports import exports

_NAMES = {
    "Log": "workbench.recordings.log",
    "read_log": "workbench.recordings.log_files",
    "write_log": "workbench.recordings.log_files",
    "logged_joints": "workbench.recordings.log_files",
    "read_description": "workbench.recordings.recording",
    "read_joint_states": "workbench.recordings.bags",
    "read_poses": "workbench.recordings.bags",
    "topics": "workbench.recordings.bags",
    "uniform_clock": "workbench.recordings.clock",
    "resample": "workbench.recordings.clock",
    "standstill_segments": "workbench.recordings.standstill",
    "average_postures": "workbench.recordings.standstill",
    "Options": "problems.problem",
    "CalibrationProblem": "problems.problem",
    "Residuals": "problems.problem",
    "KINDS": "problems.kinds",
    "Folds": "selection.validation",
    "EndSplit": "selection.validation",
    "calibrate": "cross_validation",
    "CalibrationReport": "cross_validation",
    "write_report": "reporting.report",
    "identify_payload": "fitting.payload",
    "identify_drive_gains": "fitting.drive_gains",
    "compare_efforts": "checks.effort_units",
    "diagnose": "checks.fit_plausibility",
    "simulate_log": "simulation.simulate",
    "Request": "run",
    "Outcome": "run",
    "run_calibration": "run",
}

__all__, __getattr__ = exports(__name__, _NAMES)
