"""The twist calibration problem: joint twists (and inertias) with drive terms from torques.

Its blocks are rows of the torque equations (:class:`~workbench.calibration.
problem.SampleBlocks`); the fit is :func:`workbench.calibration.fitting.twist.calibrate_twist`,
or for a closed chain the motors' equations of
:mod:`workbench.calibration.fitting.closed_chain`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from workbench.calibration.fitting.closed_chain import ClosedChainTwistProblem
from workbench.calibration.fitting.drive_shapes import refuse_further
from workbench.calibration.fitting.twist import TwistModel, TwistProblem, calibrate_twist
from workbench.calibration.problems.parameter_figures import eta_entries, relative_std
from workbench.calibration.problems.problem import Options, SampleBlocks
from workbench.calibration.problems.torque_problem import (
    TorqueProblem,
    log_drives,
    nominal_drive_values,
    prismatic_note,
    urdf_dynamics,
)
from workbench.chain import Chain
from workbench.closed_chains.kinematics import solve_passive
from workbench.closed_chains.model import ClosedChain
from workbench.eta import twist_covariance
from workbench.identification.drives import drive_file_text
from workbench.lie import Array
from workbench.recordings.log import Log


class TwistCalibrationProblem(SampleBlocks, TorqueProblem):
    """Joint twists (and optionally inertias) with drive terms from torques (:mod:`.twist`).

    ``chain`` may be a closed chain, whose log holds the motors only
    (:mod:`workbench.calibration.fitting.closed_chain`).
    """

    def __init__(self, chain: Chain, log: Log, options: Options) -> None:
        self.options = options
        self.nominal = chain
        drives = log_drives(log, options.terms)
        refuse_further(drives, log.source, "the twist calibration")
        closed = isinstance(chain, ClosedChain)
        kind = ClosedChainTwistProblem if closed else TwistProblem
        self.problem = kind(log, options.inertial, drives)
        self.tree = chain.tree if closed else chain
        self.x0 = nominal_drive_values(drives, options)
        n_equations = self.problem.measured().shape[0]
        self.times = log.t[log.equation_samples()][:n_equations]
        self.labels = chain.actuated if closed else chain.joint_names
        self.joint_chain = self.tree
        self.logged_unit = log.effort_unit

    def _rows(self, rows):
        return replace(self.problem, rows=rows)

    def fit(self, rows: np.ndarray | None, candidate: None = None):
        o = self.options
        return calibrate_twist(
            self.nominal, self._rows(rows), start=self.x0, loss=o.loss, f_scale=o.f_scale or 1.0,
            progress=o.progress,
        )  # fmt: skip

    def baseline(self, rows: np.ndarray | None) -> None:
        return None

    def errors(self, fit, rows: np.ndarray) -> Array:
        model = TwistModel(self.nominal, self.x0) if fit is None else fit.model
        problem = self._rows(rows)
        return problem.predict(model) - problem.measured()

    def measured(self, rows: np.ndarray) -> Array:
        return self._rows(rows).measured()

    def parameters(self, fit) -> list[tuple[str, float, float]]:
        chain, n = self.tree, self.tree.n
        std = np.sqrt(np.clip(np.diag(fit.covariance), 0.0, None))
        std[np.linalg.norm(fit.solution.S, axis=1) < 1e-9] = 0.0  # not moved: fixed
        rows = []
        names = [*chain.joint_names, f"tool:{chain.tool_name}"]
        for k, name in enumerate(names[:n]):
            for c, axis in enumerate(("wx", "wy", "wz", "vx", "vy", "vz")):
                value = float(fit.eta[6 * k + c])
                rows.append((f"eta_{name}_{axis}", value, relative_std(std[6 * k + c], value)))
        offset = 6 * (n + 1) + (10 * n if self.options.inertial else 0)
        for k, name in enumerate(self.problem.terms.names):
            value = float(fit.model.drive[k])
            rows.append((name, value, relative_std(std[offset + k], value)))
        return rows

    def chain(self, fit) -> Chain:
        return fit.chain.tree if self.tree is not self.nominal else fit.chain

    def dynamics(self, fit) -> dict[str, tuple[float, float]]:
        return urdf_dynamics(self.problem.terms, fit.model.drive, self.labels)

    def files(self, fit) -> dict[str, str]:
        note = "Identified by workbench calibrate --kind twist." + prismatic_note(self.units())
        files = {
            "calibrated.drives.toml": drive_file_text(
                self.problem.terms, fit.model.drive, note=note
            )
        }
        if self.tree is not self.nominal:  # a closed chain: its closure file on the new tree
            closed = fit.chain
            home = solve_passive(closed, closed.home[closed.active], guess=closed.home)
            files["calibrated.toml"] = replace(closed, home=home).closure_file_text(
                "calibrated.urdf"
            )
        return files

    def summary(self, fit) -> dict[str, Any]:
        chain, n = self.tree, self.tree.n
        fitted = self.chain(fit)
        p = 6 * (n + 1)
        std = np.sqrt(np.clip(np.diag(fit.covariance), 0.0, None))
        summary = {
            "terms": list(self.problem.terms.terms),
            "inertial": self.options.inertial,
            "iterations": fit.solution.iterations,
            "identifiable_dimension": int(fit.subspace.basis.shape[1]),
            "condition_number": fit.subspace.condition_number,
            "sigma": fit.solution.sigma,
            "units": self.units(),
            "twists": fitted.twists.tolist(),
            "twist_std": np.sqrt(
                np.einsum("nii->ni", twist_covariance(fitted, fit.covariance[:p, :p]))
            ).tolist(),
            "drive_parameters": dict(
                zip(self.problem.terms.names, fit.model.drive.tolist(), strict=True)
            ),
            "eta_observability": {
                "max_std": fit.observability.max_std,
                "calibrated_directions": fit.observability.kept,
                "principal_std": fit.observability.std.tolist(),
                "note": "standard deviations (rad, m) of the principal eta directions with the "
                "inertial and drive parameters fitted too; only those below max_std move",
            },
            **eta_entries(fit.eta, std[:p], fit.subspace.null[:p], chain),
        }
        if self.options.inertial:
            summary["phi"] = fitted.phi.tolist()
        return summary
