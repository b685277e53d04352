"""Joint-twist calibration from torque logs (seed 000 §2, Algorithm 1).

Residual ``r = tau(q, dq, ddq; chain) + F_v dq + F_c sign(dq) - tau_meas``,
its Jacobian with respect to eta from ``twist_derivatives`` (d tau / d eta at
eta = 0 of the current chain, eq. 9), and optionally the inertial parameters
(regressor columns, ``tau = Y phi``) and friction. Gauss-Newton /
Levenberg-Marquardt iterates ``chain <- chain.with_eta(delta)`` (eq. 6),
relinearising at the updated chain, and moves only in the directions that
both change a twist (``identifiable_eta_basis``) and change the logged torques
(SVD of the stacked Jacobian, :func:`identifiable_subspace`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.linalg import block_diag

from workbench import inertia
from workbench.calibration.dynamic import friction_columns
from workbench.calibration.eta import eta_between
from workbench.calibration.logs import Log
from workbench.calibration.solver import Solution, Subspace, identifiable_subspace
from workbench.calibration.solver import levenberg_marquardt as lm
from workbench.chain import Chain
from workbench.differential_dynamics import identifiable_eta_basis, twist_derivatives
from workbench.errors import WorkbenchError
from workbench.lie import Array


@dataclass(frozen=True)
class TwistModel:
    """The parameters being calibrated: the chain (twists, inertias) and friction (2 n,)."""

    chain: Chain
    friction: Array


@dataclass(frozen=True)
class TwistProblem:
    """Logged joint states and torques; ``inertial`` also fits phi."""

    log: Log
    inertial: bool = False

    def predict(self, model: TwistModel) -> Array:
        """Model torques (N, n) including friction."""
        from workbench.dynamics import inverse_dynamics

        log = self.log
        tau = inverse_dynamics(model.chain, log.q, log.dq, log.ddq)
        return tau + np.einsum("snk,k->sn", friction_columns(log.dq), model.friction)

    def evaluate(self, model: TwistModel) -> tuple[Array, Array]:
        """Residuals (N n,) and d r / d [eta, (phi), friction] at eta = 0."""
        log = self.log
        d = twist_derivatives(model.chain, log.q, log.dq, log.ddq)
        F = friction_columns(log.dq)
        r = d.tau + np.einsum("snk,k->sn", F, model.friction) - log.tau
        blocks = [d.dtau_deta]
        if self.inertial:
            blocks.append(inertia.torque_regressor(model.chain, log.q, log.dq, log.ddq))
        blocks.append(F)
        J = np.concatenate(blocks, axis=2)
        return r.ravel(), J.reshape(r.size, -1)

    def prior(self, chain: Chain) -> Array:
        """Candidate directions: twist-changing eta, then all of phi and friction."""
        n = chain.n
        blocks = [identifiable_eta_basis(chain)]
        if self.inertial:
            blocks.append(np.eye(10 * n))
        blocks.append(np.eye(2 * n))
        return block_diag(*blocks)

    def retract(self, model: TwistModel, delta: Array) -> TwistModel:
        """Apply a step: eta by ``with_eta`` (eq. 6), phi and friction additively."""
        n = model.chain.n
        p = 6 * (n + 1)
        chain = model.chain.with_eta(delta[:p])
        if self.inertial:
            phi = chain.phi + delta[p : p + 10 * n].reshape(n, 10)
            chain = replace(chain, inertias=inertia.matrix_from_phi(phi))
        return TwistModel(chain, model.friction + delta[-2 * n :])


@dataclass(frozen=True)
class TwistFit:
    """A twist calibration: calibrated model, eta from the nominal and statistics."""

    model: TwistModel
    eta: Array
    covariance: Array  # of [eta, (phi), friction] steps at the solution
    subspace: Subspace  # identifiable directions at the nominal
    solution: Solution

    @property
    def chain(self) -> Chain:
        return self.model.chain


def calibrate_twist(
    chain: Chain,
    log: Log,
    *,
    inertial: bool = False,
    loss: str = "linear",
    f_scale: float = 1.0,
    rtol: float = 1e-8,
    max_iterations: int = 50,
    progress: bool = False,
) -> TwistFit:
    """Estimate eta (and phi with ``inertial``) and friction from logged torques."""
    if log.tau is None:
        raise WorkbenchError(f"{log.source}: twist calibration needs tau_<joint> columns")
    problem = TwistProblem(log, inertial)
    start = TwistModel(chain, np.zeros(2 * chain.n))
    _, J0 = problem.evaluate(start)
    nominal_subspace = identifiable_subspace(J0, problem.prior(chain), rtol=rtol)

    def subspace(model: TwistModel, J: Array) -> Array:
        return identifiable_subspace(J, problem.prior(model.chain), rtol=rtol).basis

    solution = lm(
        start,
        problem.evaluate,
        problem.retract,
        subspace,
        loss=loss,
        f_scale=f_scale,
        max_iterations=max_iterations,
        progress=progress,
        label="twist calibration",
    )
    return TwistFit(
        model=solution.model,
        eta=eta_between(chain, solution.model.chain),
        covariance=solution.covariance,
        subspace=nominal_subspace,
        solution=solution,
    )
