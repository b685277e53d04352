"""Inverse dynamics written in CasADi SX, independent of the project's kernels.

Seed 000 eq. 1-6 in *body* frames (the project's kernels use the world
frame): T_{p,i} = exp([A_i] q_i) in the zero-reference normal form, body
twists V_i = Ad_{T_{p,i}^{-1}} V_p + A_i dq_i, accelerations with
ad_{V_i} A_i dq_i, wrenches G_i dV_i - ad_{V_i}^T G_i V_i plus the
children's wrenches carried back by Ad^T, tau_i = A_i^T F_i. Joint twists
are A_i(eta) = Ad_{exp([eta_i])} A_i with the matrix exponential written as
a power series (exact to machine precision for the small eta used in
tests), the tool frame exp([eta_tool]) M_tool. Only the Chain's numbers
(twists, inertias, tool frame, gravity, parents) are read.
"""

from __future__ import annotations

import casadi as ca

import workbench as wb


def hat3(w):
    return ca.vertcat(
        ca.horzcat(0, -w[2], w[1]), ca.horzcat(w[2], 0, -w[0]), ca.horzcat(-w[1], w[0], 0)
    )


def ad(V):
    W, U = hat3(V[:3]), hat3(V[3:])
    return ca.vertcat(ca.horzcat(W, ca.SX.zeros(3, 3)), ca.horzcat(U, W))


def Ad(T):
    R, p = T[:3, :3], T[:3, 3]
    return ca.vertcat(ca.horzcat(R, ca.SX.zeros(3, 3)), ca.horzcat(hat3(p) @ R, R))


def inverse(T):
    R, p = T[:3, :3], T[:3, 3]
    return ca.vertcat(ca.horzcat(R.T, -R.T @ p), ca.horzcat(ca.SX.zeros(1, 3), 1))


def exp_series(V, terms: int = 12):
    X = ca.vertcat(ca.horzcat(hat3(V[:3]), V[3:]), ca.SX.zeros(1, 4))
    out, term = ca.SX.eye(4), ca.SX.eye(4)
    for k in range(1, terms):
        term = term @ X / k
        out = out + term
    return out


def exp_joint(A, theta):
    """exp([A] theta) for a unit revolute twist or a prismatic one (Rodrigues)."""
    w, v = A[:3], A[3:]
    W = hat3(w)
    s, c = ca.sin(theta), 1 - ca.cos(theta)
    R = ca.SX.eye(3) + s * W + c * W @ W
    p = (theta * ca.SX.eye(3) + c * W + (theta - s) * W @ W) @ v
    return ca.vertcat(ca.horzcat(R, p), ca.horzcat(ca.SX.zeros(1, 3), 1))


def inverse_dynamics_function(chain: wb.Chain, with_tool: bool = False) -> ca.Function:
    """CasADi Function (eta, q, dq, ddq[, f_tool]) -> tau for ``chain`` (see module docstring)."""
    n = chain.n
    eta = ca.SX.sym("eta", 6 * (n + 1))
    q, dq, ddq = (ca.SX.sym(s, n) for s in ("q", "dq", "ddq"))
    f_tool = ca.SX.sym("f_tool", 6)
    A = [Ad(exp_series(eta[6 * i : 6 * i + 6])) @ ca.DM(chain.twists[i]) for i in range(n)]
    prismatic = [k == "prismatic" for k in chain.joint_kinds]
    G = [ca.DM(chain.inertias[i]) for i in range(n)]
    T = [None] * n
    V = [None] * n
    dV = [None] * n
    for i in range(n):
        p = chain.parents[i]
        if prismatic[i]:
            T[i] = ca.vertcat(
                ca.horzcat(ca.SX.eye(3), A[i][3:] * q[i]), ca.horzcat(ca.SX.zeros(1, 3), 1)
            )
        else:
            T[i] = exp_joint(A[i], q[i])
        X = Ad(inverse(T[i]))
        Vp = ca.SX.zeros(6) if p < 0 else V[p]
        dVp = ca.vertcat(ca.SX.zeros(3), -ca.DM(chain.gravity)) if p < 0 else dV[p]
        V[i] = X @ Vp + A[i] * dq[i]
        dV[i] = X @ dVp + A[i] * ddq[i] + ad(V[i]) @ A[i] * dq[i]
    F = [G[i] @ dV[i] - ad(V[i]).T @ G[i] @ V[i] for i in range(n)]
    if with_tool and chain.tool_parent >= 0:
        M_tool = exp_series(eta[6 * n :]) @ ca.DM(chain.tool_frame)
        F[chain.tool_parent] = F[chain.tool_parent] - Ad(inverse(M_tool)).T @ f_tool
    tau = [None] * n
    for i in reversed(range(n)):
        tau[i] = A[i].T @ F[i]
        p = chain.parents[i]
        if p >= 0:
            F[p] = F[p] + Ad(inverse(T[i])).T @ F[i]
    inputs = [eta, q, dq, ddq] + ([f_tool] if with_tool else [])
    return ca.Function("tau", inputs, [ca.vertcat(*tau)])
