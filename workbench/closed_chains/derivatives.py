"""Derivatives of closed-chain motor torques: full-state and along the closed chain.

Motor torques ``tau_a = S(q, eta)^T tau_tree(q, dq, ddq, eta)``
(:mod:`workbench.closed_chains.dynamics`, eq. 1). ``S`` depends on q and
eta through ``K S = 0`` (``S_a = I``), so along any direction w of (q, eta)

    dS_p[w] = -K_p^+ (dK[w] S),   (dK[w] S)_k = c''[w, S_k],               (1)

with ``c''`` the second derivative of the closure residual
(:class:`workbench.closed_chains.kinematics.Closures`).

*Full-state partials* (:func:`torque_derivatives`) hold q, dq, ddq fixed and
differentiate (1) column by column: ``d tau_a / d q_i = dS[e_i]^T tau +
S^T d tau / d q_i``, ``d tau_a / d dq = S^T d tau / d dq``, ``d tau_a / d ddq
= S^T M``, and ``d tau_a / d eta_l = dS[eta_l]^T tau + S^T d tau / d eta_l``.
These are the derivatives an optimiser over the tree state needs.

*Closed-chain derivatives* (:func:`closed_chain_derivatives`) let the passive
joints follow: with the independent quantities (eta, q_a, dq_a, ddq_a), the
state is ``q(q_a, eta)``, ``dq = S dq_a``, ``ddq = S ddq_a + sigma`` with
``sigma_p = -K_p^+ c''[dq, dq]``. A change of q_a or eta moves the state
along ``w = (S_k, 0)`` or ``w = (Q_l, e_l)``, ``Q_l = -K_p^+ dc/deta_l``
(passive rows), and then

    d dq[w]   = dS[w] dq_a,
    d sigma[w] = -K_p^+ (c''[w, sigma] + c'''[dq, dq, w] + 2 c''[d dq[w], dq]),
    d ddq[w]  = dS[w] ddq_a + d sigma[w],
    d tau_a[w] = dS[w]^T tau + S^T (tau_q w_q + tau_eta w_eta + tau_dq d dq[w]
                                    + M d ddq[w]);

a change of dq_a along k moves ``dq`` by ``S_k`` and sigma by ``-K_p^+ 2
c''[S_k, dq]``, and ``d tau_a / d ddq_a = S^T M S``. Every term is
analytic: the closure derivatives are exact Taylor coefficients of the loop
products, the tree's partials those of :func:`workbench.twist_derivatives`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from workbench.arrays import as_samples
from workbench.closed_chains.kinematics import Closures, PassiveSolver
from workbench.closed_chains.model import ClosedChain
from workbench.dynamics.derivatives import rnea_derivatives, twist_derivatives
from workbench.dynamics.inverse_dynamics import inverse_dynamics
from workbench.lie import Array


@dataclass(frozen=True)
class TorqueDerivatives:
    """Forces tau (N, a) on the independent coordinates (the motors, then the idle joints:
    :func:`workbench.closed_chains.dynamics.coordinate_forces`) and their partials; eta
    (N, a, 6 (n + 1)) may be None."""

    tau: Array
    dtau_deta: Array | None
    dtau_dq: Array  # (N, a, n) full state / (N, a, a) along the closed chain
    dtau_dv: Array
    dtau_da: Array


def _states(model: ClosedChain, q, dq, ddq) -> tuple[Array, Array, Array]:
    names = model.tree.joint_names
    out = [as_samples(x, model.n, what, names)[0] for x, what in ((q, "q"), (dq, "dq"),
                                                                   (ddq, "ddq"))]  # fmt: skip
    N = max(len(x) for x in out)
    return tuple(np.ascontiguousarray(np.broadcast_to(x, (N, model.n))) for x in out)


def _multiplier(model: ClosedChain, solver: PassiveSolver, tau: Array) -> Array:
    """``mu = -K_p^{+T} tau_p`` (N, m): ``dS[w]^T tau = mu . (dK[w] S)`` by eq. (1)."""
    return -(np.swapaxes(solver.pinv, 1, 2) @ tau[:, model.passive, None])[..., 0]


def torque_derivatives(
    model: ClosedChain, q: ArrayLike, dq: ArrayLike, ddq: ArrayLike, with_eta: bool = True
) -> TorqueDerivatives:
    """Full-state partials of the motor torques at closed states (module docstring)."""
    q, dq, ddq = _states(model, q, dq, ddq)
    n = model.n
    closures = Closures(model, q, with_eta)
    solver = PassiveSolver(model, closures.jacobian())
    S = solver.velocity_map()
    St = np.swapaxes(S, 1, 2)
    if with_eta:
        tree = twist_derivatives(model.tree, q, dq, ddq)
        tau, tau_q, tau_v, M = tree.tau, tree.dtau_dq, tree.dtau_dv, tree.dtau_da
    else:
        tau = np.atleast_2d(inverse_dynamics(model.tree, q, dq, ddq))
        tau_q, tau_v, M = rnea_derivatives(model.tree, q, dq, ddq)
    J = closures.first_jacobian((St, None), with_eta)  # (N, a, m, X): c''[e_i, S_k]
    geometric = np.einsum("nm,nkmi->nki", _multiplier(model, solver, tau), J)
    return TorqueDerivatives(
        (St @ tau[..., None])[..., 0],
        geometric[:, :, n:] + St @ tree.dtau_deta if with_eta else None,
        geometric[:, :, :n] + St @ tau_q,
        St @ tau_v,
        St @ M,
    )


def closed_chain_derivatives(
    model: ClosedChain, q: ArrayLike, dq: ArrayLike, ddq: ArrayLike, with_eta: bool = True
) -> TorqueDerivatives:
    """``d tau_a / d [eta, q_a, dq_a, ddq_a]`` with the passive joints following.

    ``q, dq, ddq`` (N, n) are closed states (consistent with the closures
    at position, velocity and acceleration level); the partials are
    (N, a, 6 (n + 1)) and (N, a, a) (module docstring).
    """
    q, dq, ddq = _states(model, q, dq, ddq)
    N, n = q.shape
    a = len(model.active)
    closures = Closures(model, q, with_eta)
    K = closures.jacobian(with_eta)
    solver = PassiveSolver(model, K[:, :, :n])
    S = solver.velocity_map()
    St = np.swapaxes(S, 1, 2)
    dqa, ddqa = dq[:, model.active], ddq[:, model.active]
    sigma = ddq - (S @ ddqa[..., None])[..., 0]
    tree = twist_derivatives(model.tree, q, dq, ddq)
    tau, M = tree.tau, tree.dtau_da
    # the independent directions W (N, X, D) in (q, eta): the motors, then eta
    W = np.concatenate([S, np.zeros((N, K.shape[2] - n, a))], axis=1)
    if with_eta:
        Q = solver.lift(K[:, :, n:])  # (N, n, 6 (n + 1)) passive joints following eta
        W = np.concatenate(
            [
                W,
                np.concatenate(
                    [Q, np.broadcast_to(np.eye(6 * (n + 1)), (N, 6 * (n + 1), 6 * (n + 1)))], axis=1
                ),
            ],
            axis=2,
        )
    D = W.shape[2]
    JS = closures.first_jacobian((St, None), with_eta) @ W[:, None]  # (N, a, m, D)
    d_dq = solver.lift(np.einsum("nkmd,nk->nmd", JS, dqa))  # (N, n, D)
    J_dq = closures.first_jacobian((dq[:, None], None))[:, 0]  # (N, m, n): c''[e_i, dq]
    J_sigma = closures.first_jacobian((sigma[:, None], None), with_eta)[:, 0]  # (N, m, X)
    w_dirs = (np.swapaxes(W[:, :n], 1, 2), None if not with_eta else
              np.swapaxes(W[:, n:], 1, 2).reshape(N, D, n + 1, 6))  # fmt: skip
    third = closures.third((np.repeat(dq[:, None], D, axis=1), None), w_dirs)  # (N, D, m)
    d_sigma = solver.lift(J_sigma @ W + np.swapaxes(third, 1, 2) + 2.0 * J_dq @ d_dq)
    d_ddq = solver.lift(np.einsum("nkmd,nk->nmd", JS, ddqa)) + d_sigma
    tree_change = tree.dtau_dq @ W[:, :n] + tree.dtau_dv @ d_dq + M @ d_ddq  # (N, n, D)
    if with_eta:
        tree_change += tree.dtau_deta @ W[:, n:]
    mu = _multiplier(model, solver, tau)
    total = np.einsum("nm,nkmd->nkd", mu, JS) + St @ tree_change  # (N, a, D)
    # motor velocities: dq moves by S_k, sigma by -K_p^+ 2 c''[S_k, dq]
    d_sigma_v = solver.lift(2.0 * J_dq @ S)  # (N, n, a)
    return TorqueDerivatives(
        (St @ tau[..., None])[..., 0],
        total[:, :, a:] if with_eta else None,
        total[:, :, :a],
        St @ (tree.dtau_dv @ S + M @ d_sigma_v),
        St @ M @ S,
    )
