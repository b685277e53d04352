"""The reaching problem's model functions written in CasADi SX, for any closed chain.

Built on tests/closed_chain_reference.py (frame poses, closure residuals and
inverse dynamics written out in SX, independent of workbench.closed_chains):
per knot x = (q, dq, ddq) the motor torques ``S^T tau``, the closure's
independent rows at three levels ``(c, K dq, K ddq + d(K dq)/dq dq)`` by
CasADi's AD, and the tool's task vector (position, or the z axis for a
pointing task). :func:`sx_functions` maps them over the knots with the
signature of :func:`workbench.ocp.model_functions.model_callbacks`, so the
reaching NLP can be built on either.
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from workbench.testing.casadi_reference import inverse_dynamics_function
from workbench.testing.closed_chain_reference import closure_residual, frame_pose


def knot_functions(model, rows: np.ndarray) -> dict[str, ca.Function]:
    """Per-knot SX functions of x = [q, dq, ddq] (3 n) and of q (task)."""
    tree, n = model.tree, model.n
    active = [int(j) for j in model.active]
    passive = [int(j) for j in model.passive]
    eta = ca.DM.zeros(6 * (n + 1))
    x = ca.SX.sym("x", 3 * n)
    q, dq, ddq = x[:n], x[n : 2 * n], x[2 * n :]
    c = ca.vertcat(
        *[
            closure_residual(
                closure.kind,
                frame_pose(tree, closure.frames[0], eta, q),
                frame_pose(tree, closure.frames[1], eta, q),
            )
            for closure in model.closures
        ]
    )
    K = ca.jacobian(c, q)
    K_a, K_p = K[:, active], K[:, passive]
    S_p = -ca.solve(K_p.T @ K_p, K_p.T @ K_a)
    S = ca.SX.zeros(n, len(active))
    for k, j in enumerate(active):
        S[j, k] = 1
    for k, j in enumerate(passive):
        S[j, :] = S_p[k, :]
    tau = S.T @ inverse_dynamics_function(tree)(eta, q, dq, ddq)
    velocity = K @ dq
    acceleration = K @ ddq + ca.jtimes(velocity, q, dq)
    r = [int(i) for i in rows]
    closure = ca.vertcat(c[r], velocity[r], acceleration[r])
    T = frame_pose(tree, tree.tool_name, eta, q)
    task = T[:3, 3] if model.task == "position" else T[:3, 2]
    return {
        "torque": ca.Function("torque", [x], [tau]),
        "closure": ca.Function("closure", [x], [closure]),
        "task": ca.Function("task", [q], [task]),
    }


def sx_functions(model, knots: int, rows: np.ndarray, design=None) -> dict[str, ca.Function]:
    """Functions of vec(X) (3 n K,) -> vec(Y): the knot functions mapped over the knots."""
    if design is not None:
        raise NotImplementedError("the SX reference has no design variables")
    per_knot = knot_functions(model, rows)
    width = 3 * model.n
    mapped = {}
    for name in ("torque", "closure"):
        f = per_knot[name].map(knots)
        X = ca.SX.sym("X", width * knots)
        mapped[name] = ca.Function(name, [X], [ca.vec(f(ca.reshape(X, width, knots)))])
    mapped["task"] = per_knot["task"]
    return mapped
