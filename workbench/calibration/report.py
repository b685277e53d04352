"""One calibration run end to end: split, fit, validate, and write the results directory.

Every run reports, for the training part and a held-out validation part (the
last ``validation`` fraction of the log in time, or a second log): residual
RMS before (nominal model) and after calibration, first-order parameter
standard deviations ``sigma^2 (J^T J)^-1``, the condition number of the
column-scaled Jacobian, the directions the data cannot identify, and the rows
dropped from the log. The results directory holds ``summary.json``,
``calibrated.urdf`` (checked by loading it back with Pinocchio) and
``residuals.png``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from workbench.calibration.dynamic import calibrate_dynamic, predict_torques
from workbench.calibration.eta import twist_covariance
from workbench.calibration.kinematic import KinematicProblem, calibrate_kinematic
from workbench.calibration.logs import Log
from workbench.calibration.twist import TwistModel, TwistProblem, calibrate_twist
from workbench.chain import Chain
from workbench.dynamics import inverse_dynamics
from workbench.errors import WorkbenchError
from workbench.io import atomic_write_text
from workbench.lie import Array

KINDS = ("kinematic", "twist", "dynamic")


@dataclass(frozen=True)
class CalibrationReport:
    """A calibrated chain, the summary (JSON-ready) and validation residuals for the plots."""

    chain: Chain
    summary: dict[str, Any]
    before: Array  # (N_val, m) validation residuals of the nominal model
    after: Array  # (N_val, m) of the calibrated model
    labels: tuple[str, ...] = field(default=())
    unit: str = ""


def split_log(log: Log, fraction: float) -> tuple[Log, Log]:
    """Training part and the last ``fraction`` of the samples (in time) for validation."""
    if not 0.0 < fraction < 1.0:
        raise WorkbenchError(f"validation fraction {fraction} must lie in (0, 1)")
    cut = round(len(log) * (1.0 - fraction))
    if cut < 1 or cut >= len(log):
        raise WorkbenchError(f"{log.source}: too few samples ({len(log)}) to hold out {fraction}")
    rows = np.arange(len(log))
    return log.subset(rows < cut), log.subset(rows >= cut)


def _rms(r: Array) -> float:
    return float(np.sqrt(np.mean(np.square(r))))


def calibrate(
    chain: Chain,
    kind: str,
    train: Log,
    validation: Log,
    *,
    loss: str = "linear",
    f_scale: float | None = None,
    inertial: bool = False,
    physical: bool = False,
    progress: bool = False,
) -> CalibrationReport:
    """Run the ``kind`` calibration on ``train`` and validate it on ``validation``."""
    if kind == "kinematic":
        return _kinematic(chain, train, validation, loss, f_scale or 1e-3, progress)
    if kind == "twist":
        return _twist(chain, train, validation, loss, f_scale or 1.0, inertial, progress)
    if kind == "dynamic":
        return _dynamic(chain, train, validation, loss, f_scale or 1.0, physical)
    raise WorkbenchError(f"unknown calibration kind '{kind}'; choose one of {', '.join(KINDS)}")


def _common(chain: Chain, train: Log, validation: Log, kind: str) -> dict[str, Any]:
    dropped = {*train.dropped, *validation.dropped}
    return {
        "kind": kind,
        "model": chain.name,
        "tool_frame": chain.tool_name,
        "log": train.source,
        "validation_log": validation.source,
        "samples": {"train": len(train), "validation": len(validation)},
        "dropped_rows": [
            {"line": d.line, "column": d.column, "reason": d.reason}
            for d in sorted(dropped, key=lambda d: d.line)
        ],
        "velocities_from_savgol": train.differentiated,
        "joint_names": list(chain.joint_names),
    }


def _eta_entries(eta: Array, std: Array, null: Array, chain: Chain) -> dict[str, Any]:
    names = [*chain.joint_names, f"tool:{chain.tool_name}"]
    return {
        "eta_order": "per joint then tool: (omega_x, omega_y, omega_z, v_x, v_y, v_z)",
        "eta": {name: eta[6 * k : 6 * k + 6].tolist() for k, name in enumerate(names)},
        "eta_std": {name: std[6 * k : 6 * k + 6].tolist() for k, name in enumerate(names)},
        "non_identifiable_directions": null.T.tolist(),
    }


def _kinematic(chain, train, validation, loss, f_scale, progress) -> CalibrationReport:
    problem = KinematicProblem.from_log(train)
    check = KinematicProblem.from_log(validation)
    fit = calibrate_kinematic(chain, problem, loss=loss, f_scale=f_scale, progress=progress)
    width = 6 if problem.orientation is not None else 3
    before = check.residual(chain).reshape(-1, width)
    after = check.residual(fit.chain).reshape(-1, width)
    cov_twist = twist_covariance(fit.chain, fit.covariance)
    summary = _common(chain, train, validation, "kinematic")
    summary |= {
        "rms": {
            "train_before": _rms(problem.residual(chain)),
            "train_after": _rms(fit.solution.residual),
            "validation_before": _rms(before),
            "validation_after": _rms(after),
            "unit": "m (rotations in m via rotation_weight)",
        },
        "iterations": fit.solution.iterations,
        "identifiable_dimension": int(fit.subspace.basis.shape[1]),
        "condition_number": fit.subspace.condition_number,
        "sigma": fit.solution.sigma,
        "twists": fit.chain.twists.tolist(),
        "twist_std": np.sqrt(np.einsum("nii->ni", cov_twist)).tolist(),
        "tool_position": fit.chain.tool_frame[:3, 3].tolist(),
        **_eta_entries(fit.eta, fit.eta_std, fit.subspace.null, chain),
    }
    labels = ("px", "py", "pz", "rx", "ry", "rz")[:width]
    return CalibrationReport(fit.chain, summary, before, after, labels, "m")


def _twist(chain, train, validation, loss, f_scale, inertial, progress) -> CalibrationReport:
    fit = calibrate_twist(
        chain, train, inertial=inertial, loss=loss, f_scale=f_scale, progress=progress
    )
    nominal = TwistModel(chain, np.zeros(2 * chain.n))
    check = TwistProblem(validation)
    before = check.predict(nominal) - validation.tau
    after = check.predict(fit.model) - validation.tau
    p = 6 * (chain.n + 1)
    cov_eta = fit.covariance[:p, :p]
    std = np.sqrt(np.clip(np.diag(fit.covariance), 0.0, None))
    n = chain.n
    summary = _common(chain, train, validation, "twist")
    summary |= {
        "rms": {
            "train_before": _rms(TwistProblem(train).predict(nominal) - train.tau),
            "train_after": _rms(fit.solution.residual),
            "validation_before": _rms(before),
            "validation_after": _rms(after),
            "unit": "N m",
        },
        "iterations": fit.solution.iterations,
        "identifiable_dimension": int(fit.subspace.basis.shape[1]),
        "condition_number": fit.subspace.condition_number,
        "sigma": fit.solution.sigma,
        "inertial": inertial,
        "twists": fit.chain.twists.tolist(),
        "twist_std": np.sqrt(np.einsum("nii->ni", twist_covariance(fit.chain, cov_eta))).tolist(),
        "viscous_friction": fit.model.friction[:n].tolist(),
        "coulomb_friction": fit.model.friction[n:].tolist(),
        "friction_std": std[-2 * n :].tolist(),
        **_eta_entries(fit.eta, std[:p], fit.subspace.null[:p], chain),
    }
    if inertial:
        summary["phi"] = fit.chain.phi.tolist()
    return CalibrationReport(fit.chain, summary, before, after, chain.joint_names, "N m")


def _dynamic(chain, train, validation, loss, f_scale, physical) -> CalibrationReport:
    fit = calibrate_dynamic(chain, train, loss=loss, f_scale=f_scale, physical=physical)
    before = inverse_dynamics(chain, validation.q, validation.dq, validation.ddq) - validation.tau
    after = predict_torques(fit, validation) - validation.tau
    train_before = inverse_dynamics(chain, train.q, train.dq, train.ddq) - train.tau
    std = np.sqrt(np.diag(fit.covariance))
    nb, n = fit.beta.shape[0], chain.n
    names = [f"{p}_{j}" for j in chain.joint_names for p in _PHI_NAMES]
    summary = _common(chain, train, validation, "dynamic")
    summary |= {
        "rms": {
            "train_before": _rms(train_before),
            "train_after": _rms(predict_torques(fit, train) - train.tau),
            "validation_before": _rms(before),
            "validation_after": _rms(after),
            "unit": "N m",
        },
        "iterations": fit.iterations,
        "condition_number": fit.condition_number,
        "sigma": fit.sigma,
        "base_parameters": {
            "independent": [names[k] for k in fit.base.independent],
            "matrix": fit.base.matrix.tolist(),
            "value": fit.beta.tolist(),
            "std": std[:nb].tolist(),
        },
        "viscous_friction": fit.friction[:n].tolist(),
        "coulomb_friction": fit.friction[n:].tolist(),
        "friction_std": std[nb:].tolist(),
        "phi_order": list(_PHI_NAMES),
        "phi": fit.chain.phi.tolist(),
        "physically_consistent": fit.physically_consistent,
    }
    return CalibrationReport(fit.chain, summary, before, after, chain.joint_names, "N m")


_PHI_NAMES = ("m", "hx", "hy", "hz", "Ixx", "Iyy", "Izz", "Ixy", "Ixz", "Iyz")


def write_report(directory: str | os.PathLike, report: CalibrationReport) -> Path:
    """Write calibrated.urdf (checked by reloading), residuals.png and summary.json."""
    from workbench.viz.plots import plot_residuals

    directory = Path(directory)
    urdf = report.chain.to_urdf(directory / "calibrated.urdf")
    reloaded = Chain.from_urdf(urdf, tool_frame=report.chain.tool_name)
    if reloaded.joint_names != report.chain.joint_names:
        raise WorkbenchError(f"{urdf}: joint names changed when written")
    mismatch = {
        "twists": float(np.abs(reloaded.twists - report.chain.twists).max()),
        "tool_frame": float(np.abs(reloaded.tool_frame - report.chain.tool_frame).max()),
        "phi": float(np.abs(reloaded.phi - report.chain.phi).max()),
    }
    plot_residuals(
        directory / "residuals.png", report.before, report.after, report.labels, unit=report.unit
    )
    summary = report.summary | {"urdf": urdf.name, "urdf_reload_max_difference": mismatch}
    atomic_write_text(directory / "summary.json", json.dumps(summary, indent=2) + "\n")
    return directory
