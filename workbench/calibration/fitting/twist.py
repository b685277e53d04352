"""Joint-twist calibration from torque logs ([Kwon] §2, Algorithm 1).

Residual ``r = tau(q, dq, ddq; chain) + C(dq, ddq) x - tau_meas`` with the
drive terms ``C x`` (:mod:`workbench.identification.drives`; viscous and
Coulomb friction by default), its Jacobian with respect to eta from
``twist_derivatives`` (d tau / d eta at eta = 0 of the current chain, eq. 9),
optionally the inertial parameters (regressor columns, ``tau = Y phi``), and
the drive parameters. Gauss-Newton / Levenberg-Marquardt iterates ``chain <-
chain.with_eta(delta)`` (eq. 6), relinearising at the updated chain, and
moves only in the directions that both change a twist
(``identifiable_eta_basis``) and change the logged torques (SVD of the
stacked Jacobian, :func:`identifiable_subspace`).

With a log description the residual and its Jacobian go through the same
parallel decimation as the dynamic identification (the filter is linear, so
decimating ``r`` and ``J`` is exact), and joint rows below the speed
threshold stay out of the fit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from scipy.linalg import block_diag

from workbench import inertia
from workbench.calibration.fitting.solver import Solution, Subspace, identifiable_subspace
from workbench.calibration.fitting.solver import levenberg_marquardt as lm
from workbench.chain import Chain
from workbench.dynamics.derivatives import twist_derivatives
from workbench.dynamics.inverse_dynamics import inverse_dynamics
from workbench.dynamics.regressor import torque_regressor
from workbench.errors import WorkbenchError
from workbench.eta import identifiable_eta_basis
from workbench.identification.drives import Drives
from workbench.lie import Array, left_jacobian_se3
from workbench.recordings import signals
from workbench.recordings.log import Log


@dataclass(frozen=True)
class TwistModel:
    """The parameters being calibrated: the chain (twists, inertias) and drive parameters.

    ``chain`` is ``nominal.with_eta(eta)`` with its own inertias; ``eta``
    None means the chain is the nominal itself (eta = 0). Steps add to eta
    (not to the current chain's twists), so that a fit restricted to fixed
    eta directions stays in their span.
    """

    chain: Chain
    drive: Array  # drive parameters, in Drives.names order (friction by default)
    eta: Array | None = None
    nominal: Chain | None = None


@dataclass(frozen=True)
class TwistProblem:
    """Logged joint states and torques; ``inertial`` also fits phi.

    ``rows`` selects equation samples (after decimation) for the fit; None
    takes all. ``drives`` defaults to viscous and Coulomb friction.
    """

    log: Log
    inertial: bool = False
    drives: Drives | None = None
    rows: np.ndarray | None = None

    @property
    def terms(self) -> Drives:
        return self.drives or Drives(self.log.q.shape[1])

    def _equations(self, rows: Callable[[int, int], Array]) -> Array:
        """Decimated and trimmed per-sample arrays (M, n, k) at the selected equation samples."""
        log = self.log
        Z, _ = signals.decimate_segments(rows, log.spans(), log.decimation, log.border)
        return Z if self.rows is None else Z[self.rows]

    def _moving(self) -> np.ndarray:
        """(M, n) joint rows that enter fits (at or above the log's min_speed)."""
        log = self.log
        dq = log.dq[log.equation_samples()]
        dq = dq if self.rows is None else dq[self.rows]
        return (
            np.ones(dq.shape, dtype=bool) if log.min_speed is None else np.abs(dq) >= log.min_speed
        )

    def _torques(self, chain: Chain, x: Array, s: slice) -> Array:
        log = self.log
        tau = inverse_dynamics(chain, log.q[s], log.dq[s], log.ddq[s])
        return tau + np.einsum("snk,k->sn", self.terms.columns(log.dq[s], log.ddq[s]), x)

    def predict(self, model: TwistModel) -> Array:
        """Model torques at the equation samples (decimated when the log says so)."""
        return self._equations(lambda a, b: self._torques(model.chain, model.drive, slice(a, b)))

    def measured(self) -> Array:
        """Measured torques at the equation samples."""
        return self._equations(lambda a, b: self.log.tau[a:b])

    def evaluate(self, model: TwistModel) -> tuple[Array, Array]:
        """Residuals and d r / d [eta, (phi), drive parameters], fit rows only.

        The eta columns are derivatives along ``eta + delta`` from the
        nominal: the derivatives at eta = 0 of the current chain
        (:meth:`linearise`) times the left Jacobian of SE(3) at each block
        of eta (``exp(eta + d) = exp(J_l(eta) d) exp(eta)`` to first order).
        """
        r, J = self.linearise(model)
        if model.eta is not None:
            blocks = model.eta.reshape(-1, 6)
            p = blocks.size
            J = J.copy()
            J[:, :p] = J[:, :p] @ block_diag(*left_jacobian_se3(blocks))
        return r, J

    def linearise(self, model: TwistModel) -> tuple[Array, Array]:
        """Residuals and d r / d [eta, (phi), drive parameters] at eta = 0 of the current chain."""
        log = self.log

        def rows(a: int, b: int) -> Array:
            q, dq, ddq = log.q[a:b], log.dq[a:b], log.ddq[a:b]
            d = twist_derivatives(model.chain, q, dq, ddq)
            C = self.terms.columns(dq, ddq)
            r = d.tau + np.einsum("snk,k->sn", C, model.drive) - log.tau[a:b]
            blocks = [r[:, :, None], d.dtau_deta]
            if self.inertial:
                blocks.append(torque_regressor(model.chain, q, dq, ddq))
            blocks.append(C)
            return np.concatenate(blocks, axis=2)

        Z = self._equations(rows)[self._moving()]
        return Z[:, 0], Z[:, 1:]

    def row_joints(self) -> np.ndarray:
        """The joint of each fitted residual row of :meth:`evaluate`."""
        return np.nonzero(self._moving())[1]

    def prior(self, chain: Chain, eta: Array | None = None) -> Array:
        """Candidate directions: the twist-changing eta of ``chain`` (or the fixed eta
        directions ``eta`` (6 (n + 1), k)), then all of phi and the drive parameters.

        Fixed directions stay the same vectors from one iterate to the next
        (the twist-changing basis of a chain is only defined up to a rotation
        within each joint's block, so coordinates in it would not).
        """
        n = chain.n
        blocks = [self.eta_basis(chain) if eta is None else eta]
        if self.inertial:
            blocks.append(np.eye(10 * n))
        blocks.append(np.eye(len(self.terms.names)))
        return block_diag(*blocks)

    def eta_basis(self, chain: Chain) -> Array:
        """The eta directions that change a twist (``identifiable_eta_basis``)."""
        return identifiable_eta_basis(chain)

    def phi(self, chain: Chain) -> Array:
        """The links' inertial parameters (n, 10)."""
        return chain.phi

    def with_inertias(self, chain: Chain, inertias: Array) -> Chain:
        return replace(chain, inertias=inertias)

    def retract(self, model: TwistModel, delta: Array) -> TwistModel:
        """Apply a step: eta, phi and drive parameters additively (the chain by ``with_eta``)."""
        n = model.chain.n
        p = 6 * (n + 1)
        nominal = model.chain if model.nominal is None else model.nominal
        eta = delta[:p] if model.eta is None else model.eta + delta[:p]
        phi = self.phi(model.chain)
        if self.inertial:
            phi = phi + delta[p : p + 10 * n].reshape(n, 10)
        chain = self.with_inertias(nominal.with_eta(eta), inertia.matrix_from_phi(phi))
        drive = model.drive + delta[p + (10 * n if self.inertial else 0) :]
        return TwistModel(chain, drive, eta, nominal)


@dataclass(frozen=True)
class Observability:
    """How well the log determines the twists, at the nominal model.

    ``std`` (m,): standard deviations along the principal eta directions
    ``directions`` (columns, in ``identifiable_eta_basis`` coordinates) once
    inertial and drive parameters are fitted too (the Schur complement of
    their columns), for the per-joint noise left by Gauss-Newton steps in
    all parameters; the first ``kept`` directions (std <= ``max_std``) are
    calibrated.
    """

    std: Array
    directions: Array
    kept: int
    max_std: float


def observability(
    problem: TwistProblem, model: TwistModel, max_std: float, steps: int = 3
) -> Observability:
    """Principal eta directions and their standard deviations (see :class:`Observability`).

    The per-joint noise is the residual after up to ``steps`` Gauss-Newton
    steps in all parameters (numerically identifiable directions), so that
    a model far from the data (a synthetic perturbation) is not mistaken for
    noise; the directions and their information are those at ``model``.
    """
    chain = model.chain
    p = 6 * (chain.n + 1)
    r0, J0 = problem.evaluate(model)
    joint = problem.row_joints()
    residual, current = r0, model
    for _ in range(steps):
        r, J = problem.evaluate(current)
        S = identifiable_subspace(J, problem.prior(current.chain)).basis
        step = -S @ np.linalg.lstsq(J @ S, r, rcond=None)[0]
        trial = problem.retract(current, step)
        try:
            r_trial, _ = problem.evaluate(trial)
        except WorkbenchError:  # a step the model cannot take (a chain that will not close)
            break
        if r_trial @ r_trial >= residual @ residual:
            break
        residual, current = r_trial, trial
    counts = np.maximum(np.bincount(joint, minlength=chain.n), 1)
    sigma = np.sqrt(np.bincount(joint, residual**2, minlength=chain.n) / counts)
    sigma = np.maximum(sigma, 1e-12 * max(float(np.abs(r0).max()), 1e-300))
    E = J0[:, :p] @ problem.eta_basis(chain) / sigma[joint, None]
    L = J0[:, p:] / sigma[joint, None]
    Q, _ = np.linalg.qr(L)
    marginal = E - Q @ (Q.T @ E)
    values, vectors = np.linalg.eigh(marginal.T @ marginal)
    std = 1.0 / np.sqrt(np.maximum(values, 1e-300))
    order = np.argsort(std)
    std, vectors = std[order], vectors[:, order]
    return Observability(std, vectors, int(np.sum(std <= max_std)), max_std)


@dataclass(frozen=True)
class TwistFit:
    """A twist calibration: calibrated model, eta from the nominal and statistics."""

    model: TwistModel
    eta: Array
    covariance: Array  # of [eta, (phi), drive parameter] steps at the solution (local)
    subspace: Subspace  # identifiable directions at the nominal
    solution: Solution
    observability: Observability

    @property
    def chain(self) -> Chain:
        return self.model.chain


def calibrate_twist(
    chain: Chain,
    log: Log | TwistProblem,
    *,
    inertial: bool = False,
    drives: Drives | None = None,
    start: Array | None = None,
    loss: str = "linear",
    f_scale: float = 1.0,
    rtol: float = 1e-8,
    max_std: float = 1e-3,
    max_iterations: int = 50,
    progress: bool = False,
    directions: Array | None = None,
) -> TwistFit:
    """Estimate eta (and phi with ``inertial``) and the drive parameters from logged torques.

    ``log`` is a log or a prepared :class:`TwistProblem`; ``start`` the
    initial drive parameters (zero by default). Only the eta directions the
    log determines to ``max_std`` (rad and m, :func:`observability`) are
    calibrated; the others stay at the nominal, and the fit reports them.
    ``directions`` (6 (n + 1), k), orthonormal twist-changing eta directions,
    replaces that selection (e.g. the directions an experiment was designed for).
    """
    problem = log if isinstance(log, TwistProblem) else TwistProblem(log, inertial, drives)
    if problem.log.tau is None:
        raise WorkbenchError(f"{problem.log.source}: twist calibration needs joint torques")
    x0 = np.zeros(len(problem.terms.names)) if start is None else start
    model = TwistModel(chain, x0)
    _, J0 = problem.evaluate(model)
    if J0.shape[0] < J0.shape[1] // 4:
        raise WorkbenchError(
            f"{problem.log.source}: {J0.shape[0]} torque equations are too few to calibrate "
            "joint twists"
        )
    seen = observability(problem, model, max_std)
    eta = seen.directions[:, : seen.kept]
    eta = problem.eta_basis(chain) @ eta  # fixed directions in eta space
    if directions is not None:
        eta = np.asarray(directions, dtype=float)
    nominal_subspace = identifiable_subspace(J0, problem.prior(chain, eta), rtol=rtol)
    rank = nominal_subspace.basis.shape[1]

    def subspace(model: TwistModel, J: Array) -> Array:
        prior = problem.prior(model.chain, eta)
        return identifiable_subspace(J, prior, rank=rank, rtol=rtol).basis

    solution = lm(
        model,
        problem.evaluate,
        problem.retract,
        subspace,
        loss=loss,
        f_scale=f_scale,
        max_iterations=max_iterations,
        progress=progress,
        label="twist calibration",
    )
    p = 6 * (chain.n + 1)
    eta_fit = np.zeros(p) if solution.model.eta is None else solution.model.eta
    # from steps of eta to steps at the solution: d(local) = J_l(eta) d(eta) per block
    G = np.eye(solution.covariance.shape[0])
    G[:p, :p] = block_diag(*left_jacobian_se3(eta_fit.reshape(-1, 6)))
    return TwistFit(
        model=solution.model,
        eta=eta_fit,
        covariance=G @ solution.covariance @ G.T,
        subspace=nominal_subspace,
        solution=solution,
        observability=seen,
    )
