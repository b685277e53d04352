"""Joint-twist (and inertial) calibration of closed chains from motor-torque logs.

On a parallel robot only the motors are measured: the log holds the
actuated joints' values, velocities, accelerations and torques. The model
torques are the closed chain's motor torques
(:func:`workbench.closed_chains.dynamics.motor_torques`) at the tree state
that the closures give for the logged motor values; their derivatives in
eta (and phi) are the closed-chain derivatives with the passive joints
following (:func:`workbench.closed_chains.derivatives.closed_chain_derivatives`):
a change of a twist moves the passive joints of every sample. Everything
else is the tree's twist calibration (:mod:`workbench.calibration.fitting.twist`):
the same residual with drive terms on the motors, the same observability
selection and Levenberg-Marquardt iterations.

:func:`simulate_closed_log` writes such a log from a perturbed ground truth.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from workbench.calibration.fitting.twist import TwistModel, TwistProblem
from workbench.calibration.simulation.trajectories import exciting_trajectory
from workbench.closed_chains.derivatives import closed_chain_derivatives
from workbench.closed_chains.dynamics import motor_torques, torque_regressor
from workbench.closed_chains.kinematics import accelerations, solve_passive, velocities
from workbench.closed_chains.model import ClosedChain
from workbench.errors import WorkbenchError
from workbench.eta import identifiable_eta_basis
from workbench.lie import Array
from workbench.recordings.log import Log


@dataclass(frozen=True)
class ClosedChainTwistProblem(TwistProblem):
    """A :class:`TwistProblem` whose log holds the motors of a closed chain."""

    _states: dict = field(default_factory=dict, compare=False, repr=False)

    def tree_states(self, model: ClosedChain) -> tuple[Array, Array, Array]:
        """Tree q, dq, ddq (N, n) of every log sample under ``model`` (cached per model)."""
        key = id(model)
        if key not in self._states:
            log = self.log
            last = self._states.get("last")
            try:  # from the last model's configurations: one Newton solve each
                q = solve_passive(model, log.q, guess=model.home if last is None else last)
            except WorkbenchError:  # a long step: follow the motors from home instead
                q = solve_passive(model, log.q, guess=model.home)
            dq = velocities(model, q, log.dq)
            ddq = accelerations(model, q, dq, log.ddq)
            self._states.clear()
            self._states.update({key: (q, dq, ddq), "last": q, "model": model})
        return self._states[key]

    def _torques(self, chain: ClosedChain, x: Array, s: slice) -> Array:
        q, dq, ddq = (a[s] for a in self.tree_states(chain))
        log = self.log
        tau = motor_torques(chain, q, dq, ddq)
        return tau + np.einsum("snk,k->sn", self.terms.columns(log.dq[s], log.ddq[s]), x)

    def linearise(self, model: TwistModel) -> tuple[Array, Array]:
        """Residuals and d r / d [eta, (phi), drive parameters], passive joints following."""
        log, chain = self.log, model.chain
        q, dq, ddq = self.tree_states(chain)

        def rows(a: int, b: int) -> Array:
            d = closed_chain_derivatives(chain, q[a:b], dq[a:b], ddq[a:b])
            C = self.terms.columns(log.dq[a:b], log.ddq[a:b])
            r = d.tau + np.einsum("snk,k->sn", C, model.drive) - log.tau[a:b]
            blocks = [r[:, :, None], d.dtau_deta]
            if self.inertial:
                blocks.append(torque_regressor(chain, q[a:b], dq[a:b], ddq[a:b]))
            blocks.append(C)
            return np.concatenate(blocks, axis=2)

        Z = self._equations(rows)[self._moving()]
        return Z[:, 0], Z[:, 1:]

    def eta_basis(self, chain: ClosedChain) -> Array:
        return identifiable_eta_basis(chain.tree)

    def phi(self, chain: ClosedChain) -> Array:
        return chain.tree.phi

    def with_inertias(self, chain: ClosedChain, inertias: Array) -> ClosedChain:
        return chain.with_inertias(inertias)


def require_motor_coordinates(model: ClosedChain) -> None:
    """Refuse a closed chain whose motors do not fix its configuration (idle motions).

    With idle motions (a rod spinning between two ball joints) a motor log
    leaves the idle joints unknown at every sample, so neither the tree
    state of a sample nor its torques follow from the log: such a chain is
    neither simulated into a motor log nor calibrated from one.
    """
    if model.idle:
        raise WorkbenchError(
            f"{model.where}: its closures leave idle motions (idle joints "
            f"{', '.join(model.idle)} move with the motors still), so a log of the motors "
            f"({', '.join(model.actuated)}) does not fix its configuration: it is not "
            "simulated into a motor log or calibrated from one (reach, info and export take it)"
        )


def motor_trajectory(
    model: ClosedChain, samples: int, dt: float, seed: int
) -> tuple[Array, Array, Array, Array, Array]:
    """t, q_a, dq_a, ddq_a and the tree q of an exciting motor motion that stays assembled.

    Sums of sines about the home motor values, in a band around home that
    shrinks until the passive solve succeeds along the whole motion.
    """
    motors = model.motors
    home = model.home[model.motor_indices]
    for scale in (0.5, 0.3, 0.15, 0.07):
        half = scale * np.minimum(motors.upper - motors.lower, 2.0) / 2
        band = replace(motors, lower=home - half, upper=home + half)
        t, qa, dqa, ddqa = exciting_trajectory(band, samples, dt, seed=seed)
        try:
            return t, qa, dqa, ddqa, solve_passive(model, qa)
        except WorkbenchError:
            continue
    raise WorkbenchError(f"{model.name}: no exciting motor motion stays assembled near home")


def simulate_closed_log(
    model: ClosedChain,
    *,
    samples: int = 2000,
    perturb: float = 1e-2,
    noise: float = 0.0,
    friction: float = 0.0,
    dt: float = 0.01,
    seed: int = 0,
    directions: Array | None = None,
) -> tuple[Log, ClosedChain, Array, Array, Array]:
    """A motor-torque log of a perturbed ground truth of ``model``.

    The truth is ``model.with_eta(eta)``, eta drawn in ``directions``
    (6 (n + 1), k) orthonormal columns (default: every twist-changing
    direction) with standard deviation ``perturb``; viscous and Coulomb
    friction on the motors (``friction`` scale) and Gaussian torque noise.
    Returns the log, the truth, eta and the viscous and Coulomb frictions.
    """
    rng = np.random.default_rng(seed + 1)
    basis = identifiable_eta_basis(model.tree) if directions is None else directions
    eta = basis @ rng.normal(scale=perturb, size=basis.shape[1])
    truth = model.with_eta(eta)
    t, qa, dqa, ddqa, q_nominal = motor_trajectory(model, samples, dt, seed)
    q = solve_passive(truth, qa, guess=q_nominal)
    dq = velocities(truth, q, dqa)
    ddq = accelerations(truth, q, dq, ddqa)
    a = len(model.actuated)
    viscous = friction * rng.uniform(0.5, 1.5, size=a)
    coulomb = friction * rng.uniform(0.5, 1.5, size=a)
    tau = motor_torques(truth, q, dq, ddq) + viscous * dqa + coulomb * np.sign(dqa)
    tau += np.random.default_rng(seed + 2).normal(scale=noise, size=tau.shape)
    log = Log(
        t=t, q=qa, dq=dqa, ddq=ddqa, tau=tau, joint_names=model.actuated,
        source=f"<simulated {model.name}>",
    )  # fmt: skip
    return log, truth, eta, viscous, coulomb
