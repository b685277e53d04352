"""The five-bar's torque map, loop closure and pointing written in CasADi SX.

Independent of :mod:`workbench.fivebar`: the tree's inverse dynamics is the
SX reference of tests/casadi_reference.py; J_p, the closure at position,
velocity and acceleration level and the pointing direction are written out
from seed 000 eq. 11-13 with SX rotations. Only the tree Chain's numbers
and the cut joint's axis are read. ``sx_functions`` returns CasADi
functions of the stacked knot variables with the same signatures as
:func:`workbench.ocp.reach.model_callbacks`, so the reaching NLP can be
built on either.
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from tests.casadi_reference import hat3, inverse_dynamics_function


def rotation(w, angle):
    W = hat3(w)
    return ca.SX.eye(3) + ca.sin(angle) * W + (1 - ca.cos(angle)) * W @ W


def log_so3(R):
    """vee(log R) near the identity: theta / sin(theta) * vee(R - R^T) / 2."""
    s = ca.vertcat(R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]) / 2
    s2 = ca.dot(s, s)
    c = (ca.trace(R) - 1) / 2
    safe = ca.sqrt(ca.fmax(s2, 1e-16))
    k = ca.if_else(s2 < 1e-8, 1 + s2 / 6 + 3 * s2**2 / 40, ca.atan2(safe, c) / safe)
    return k * s


def knot_functions(fivebar) -> dict[str, ca.Function]:
    """Per-knot SX functions of x = [q, dq, ddq] (15,)."""
    chain = fivebar.chain
    w = [ca.DM(a) for a in fivebar.axes]
    x = ca.SX.sym("x", 15)
    q, dq, ddq = x[:5], x[5:10], x[10:]
    R1 = rotation(w[0], q[0])
    R12 = R1 @ rotation(w[1], q[1])
    R123 = R12 @ rotation(w[2], q[2])
    R4 = rotation(w[3], q[3])
    R45 = R4 @ rotation(w[4], q[4])
    ws = [w[0], R1 @ w[1], R12 @ w[2], w[3], R4 @ w[4]]
    g_p = ca.horzcat(ws[1], ws[2], -ws[4])
    g_a = ca.horzcat(ws[0], -ws[3])
    J_p = -ca.solve(g_p, g_a)
    tree = inverse_dynamics_function(chain)
    eta = ca.DM.zeros(6 * (chain.n + 1))
    tau_tr = tree(eta, q[:4], dq[:4], ddq[:4])
    tau = ca.vertcat(tau_tr[0], tau_tr[3]) + J_p.T @ ca.vertcat(tau_tr[1], tau_tr[2], 0)
    G = ca.horzcat(ws[0], ws[1], ws[2], -ws[3], -ws[4])
    v1 = ws[0] * dq[0]
    v2 = v1 + ws[1] * dq[1]
    v4 = ws[3] * dq[3]
    b = ca.cross(v1, ws[1]) * dq[1] + ca.cross(v2, ws[2]) * dq[2] - ca.cross(v4, ws[4]) * dq[4]
    closure = ca.vertcat(log_so3(R45.T @ R123), G @ dq, G @ ddq + b)
    pointing = R123 @ ca.DM(chain.tool_frame[:3, 2])
    return {
        "torque": ca.Function("torque", [x], [tau]),
        "closure": ca.Function("closure", [x], [closure]),
        "pointing": ca.Function("pointing", [q], [pointing]),
    }


def sx_functions(fivebar, knots: int) -> dict[str, ca.Function]:
    """Functions of vec(X) (15 K,) -> vec(Y): the SX knot functions mapped over the knots."""
    per_knot = knot_functions(fivebar)
    mapped = {}
    for name in ("torque", "closure"):
        f = per_knot[name].map(knots)
        x = ca.SX.sym("X", 15 * knots)
        mapped[name] = ca.Function(name, [x], [ca.vec(f(ca.reshape(x, 15, knots)))])
    mapped["pointing"] = per_knot["pointing"]
    return mapped


def as_numpy(functions: dict[str, ca.Function], X: np.ndarray) -> dict[str, np.ndarray]:
    """Evaluate the mapped functions on knots X (K, 15); outputs (K, m)."""
    K = len(X)
    return {
        name: np.asarray(functions[name](X.ravel())).reshape(K, -1)
        for name in ("torque", "closure")
    }
