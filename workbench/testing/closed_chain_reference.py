"""Closed chains written in CasADi SX, independent of workbench.closed_chains.

Only the numbers of the spanning tree (a :class:`workbench.chain.Chain`:
twists, frame placements at q = 0, parents, inertias) and the closure list
(type and frame names) are read. Everything else is written here from the
definitions:

* forward kinematics of a frame on link k: ``T = prod_{j on the path to k}
  exp([A_j(eta)] q_j) M(eta)`` (zero-reference normal form), with
  ``A_j(eta) = Ad_{exp([eta_j])} A_j``, ``M(eta) = exp([eta_k]) M`` for a
  link's own frame and ``M`` for an attached frame (as ``Chain.with_eta``
  moves them); joint exponentials by Rodrigues' formula, the eta
  exponential as a power series (tests/casadi_reference.py);
* residuals from the closure definitions, with ``R = R_B^T R_A`` and
  ``p = R_B^T (p_A - p_B)``: point ``p``; rotation ``vee(R - R^T) / 2``;
  weld both; revolute ``p`` and ``R[0, 2], R[1, 2]`` (z_A normal to x_B and
  y_B); planar ``p[0], p[1]``;
* ``K = dc/dq`` by CasADi's AD; ``S_a = I``, ``S_p = -(K_p^T K_p)^{-1}
  K_p^T K_a`` (least squares, by QR: the stacked residual may have redundant rows);
* acceleration bias ``sigma_p = -(K_p^T K_p)^{-1} K_p^T (d(K dq)/dq) dq``
  (from ``d^2 c / dt^2 = 0``);
* motor torques ``S^T tau`` with tau from the SX inverse dynamics of
  tests/casadi_reference.py (virtual work: passive joints and closures do
  none);
* derivatives with the passive joints following by the implicit function
  theorem: ``dq/dq_a = S``, ``dq/deta = -[0; (K_p^T K_p)^{-1} K_p^T dc/deta]``.
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from workbench.testing.casadi_reference import Ad, exp_joint, exp_series, inverse_dynamics_function


def _joint_exp(A, kind: str, q):
    if kind == "prismatic":
        return ca.vertcat(ca.horzcat(ca.SX.eye(3), A[3:] * q), ca.horzcat(ca.SX.zeros(1, 3), 1))
    return exp_joint(A, q)


def frame_pose(chain, name: str, eta, q):
    """Pose (4x4 SX) of the tree frame ``name`` at joint values q with eta applied."""
    link = chain.parent_of(name)
    M = ca.DM(chain.placement_of(name))
    if name in chain.link_names:  # a link's own frame moves with its joint's eta block
        M = exp_series(eta[6 * link : 6 * link + 6]) @ M
    path = []
    j = link
    while j >= 0:
        path.append(j)
        j = chain.parents[j]
    T = ca.SX.eye(4)
    for j in reversed(path):
        A = Ad(exp_series(eta[6 * j : 6 * j + 6])) @ ca.DM(chain.twists[j])
        T = T @ _joint_exp(A, chain.joint_kinds[j], q[j])
    return T @ M


def closure_residual(kind: str, T_A, T_B):
    """Residual of one closure from the two frame poses (module docstring)."""
    R_A, R_B = T_A[:3, :3], T_B[:3, :3]
    R = R_B.T @ R_A
    p = R_B.T @ (T_A[:3, 3] - T_B[:3, 3])
    rotation = ca.vertcat(R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]) / 2
    return {
        "point": p,
        "rotation": rotation,
        "weld": ca.vertcat(p, rotation),
        "revolute": ca.vertcat(p, R[0, 2], R[1, 2]),
        "planar": p[:2],
    }[kind]


def _least_squares(K_p, rhs):
    """The least-squares solution of ``K_p x = rhs`` by the QR factorisation of ``K_p``
    (``x = R^-1 Q^T rhs``, refined once): the exact solution when the system is consistent.

    Not the normal equations: SX's symbolic solve does not pivot, and with
    ``cond(K_p^T K_p) = cond(K_p)^2`` it lost all but two digits on robot_delta (a
    0.04 kg delta, rows in m and rad, cond(K_p) 1e4).
    """
    Q, R = ca.qr(K_p)
    x = ca.solve(R, Q.T @ rhs)
    return x + ca.solve(R, Q.T @ (rhs - K_p @ x))  # one step of iterative refinement


def _lift(n: int, active, passive, passive_rows, active_rows=None):
    """Rows of a tree-joint matrix from its passive rows (active rows given or zero)."""
    cols = passive_rows.shape[1]
    rows = [None] * n
    for k, j in enumerate(passive):
        rows[j] = passive_rows[k, :]
    for k, j in enumerate(active):
        rows[j] = ca.SX.zeros(1, cols) if active_rows is None else active_rows[k, :]
    return ca.vertcat(*rows)


def closed_chain_functions(tree, closures, actuated) -> dict[str, ca.Function]:
    """CasADi Functions of a closed chain from its tree, closures and actuated joint names.

    ``closures`` is a sequence of (type, frame A, frame B). Returned, with
    eta (6 (n + 1)), q, dq, ddq (n), dqa, ddqa (a):

    * ``residual(eta, q) -> c``, ``K(eta, q) -> dc/dq``, ``K_eta(eta, q) -> dc/deta``,
      ``S(eta, q) -> S (n x a)``;
    * ``torque(eta, q, dq, ddq) -> tau_a`` and ``torque_jacobian`` with the
      blocks ``d tau_a / d eta, d q, d dq, d ddq`` (full state);
    * ``closed(eta, q, dqa, ddqa) -> (dq, ddq, tau_a)`` at a closed q and
      ``closed_jacobian(eta, q, dqa, ddqa) -> d tau_a / d [eta, q_a, dq_a, ddq_a]``
      with the passive joints following.
    """
    n = tree.n
    active = [tree.joint_index(j) for j in actuated]
    passive = [j for j in range(n) if j not in active]
    eta = ca.SX.sym("eta", 6 * (n + 1))
    q, dq, ddq = (ca.SX.sym(s, n) for s in ("q", "dq", "ddq"))
    dqa, ddqa = (ca.SX.sym(s, len(active)) for s in ("dqa", "ddqa"))
    c = ca.vertcat(
        *[
            closure_residual(kind, frame_pose(tree, a, eta, q), frame_pose(tree, b, eta, q))
            for kind, a, b in closures
        ]
    )
    K = ca.jacobian(c, q)
    K_a, K_p = K[:, active], K[:, passive]
    S = _lift(n, active, passive, -_least_squares(K_p, K_a), ca.SX.eye(len(active)))
    tau_tree = inverse_dynamics_function(tree)(eta, q, dq, ddq)
    tau = S.T @ tau_tree
    torque_jacobian = [ca.jacobian(tau, x) for x in (eta, q, dq, ddq)]
    # along the closed chain: dq = S dqa, ddq = S ddqa + sigma
    v = S @ dqa
    bias = ca.substitute(ca.jtimes(K @ dq, q, dq), dq, v)  # c''[v, v]
    sigma = _lift(n, active, passive, -_least_squares(K_p, bias))
    a = S @ ddqa + sigma
    closed = ca.substitute(tau, ca.vertcat(dq, ddq), ca.vertcat(v, a))
    Q = _lift(n, active, passive, -_least_squares(K_p, ca.jacobian(c, eta)))  # dq/deta
    d_q = ca.jacobian(closed, q)
    closed_jacobian = [
        ca.jacobian(closed, eta) + d_q @ Q,
        d_q @ S,
        ca.jacobian(closed, dqa),
        ca.jacobian(closed, ddqa),
    ]
    return {
        "residual": ca.Function("residual", [eta, q], [c]),
        "K": ca.Function("K", [eta, q], [K]),
        "K_eta": ca.Function("K_eta", [eta, q], [ca.jacobian(c, eta)]),
        "S": ca.Function("S", [eta, q], [S]),
        "torque": ca.Function("torque", [eta, q, dq, ddq], [tau]),
        "torque_jacobian": ca.Function("torque_jacobian", [eta, q, dq, ddq], torque_jacobian),
        "closed": ca.Function("closed", [eta, q, dqa, ddqa], [v, a, closed]),
        "closed_jacobian": ca.Function("closed_jacobian", [eta, q, dqa, ddqa], closed_jacobian),
    }


def evaluate(function: ca.Function, *args) -> list[np.ndarray]:
    """All outputs of ``function`` at numeric arguments, as numpy arrays."""
    out = function(*args)
    return [np.array(x) for x in (out if isinstance(out, tuple) else (out,))]
