"""State derivatives of d tau / d eta, by algorithmic differentiation of a CasADi SX recursion.

The twist information matrix has rows ``d tau / d eta`` (from the compiled
:func:`workbench.dynamics.derivatives.twist_derivatives`); its gradient with
respect to the trajectory needs how those rows change with the state,
second derivatives ``d^2 tau / d eta d(q, dq, ddq)`` that no kernel
computes. They come here from CasADi's algorithmic differentiation (exact to
rounding) of inverse dynamics written in SX, in the world frame of
:mod:`workbench.dynamics.kernels`:

    T_i = T_parent exp([A_i] q_i),   S_i = Ad_{T_parent} A_i,
    V_i = V_parent + S_i dq_i,       a_i = a_parent + S_i ddq_i + ad_{V_i} S_i dq_i,
    f_i = I_i a_i - ad_{V_i}^T I_i V_i,  I_i = Ad_{T_i}^{-T} G_i Ad_{T_i}^{-1},
    tau_i = S_i^T sum_{k in subtree(i)} f_k,        a_base = (0, -g),

with joint twists ``A_i(eta) = A_i + ad_{eta_i} A_i``, the first-order part of
``Ad_{exp(eta_i)} A_i`` ([Kwon] eq. 6 and 8; only derivatives at eta = 0
are taken, for which the two agree; the Rodrigues formula of ``exp`` is
exact on unit rotation axes and its derivative along ``ad_eta A``, which is
tangent to them, is exact too).

What the design needs per sample is the *contracted* derivative: for
directions ``D`` (6n, n), one per torque row a,

    h(s) = sum_a (d tau_a / d eta) D[:, a],    grad_s h  (3n,),  s = (q, dq, ddq),

i.e. ``sum_{a,m} G[a,m] d J[a,m] / d s`` for ``J = d tau / d eta U`` and
``D = U G^T``: n forward directional derivatives (``jtimes``) and one
reverse sweep. :func:`contracted_gradient` maps it over samples.
"""

from __future__ import annotations

import functools

import casadi as ca
import numpy as np

from workbench.chain import Chain
from workbench.lie import Array


def _hat3(w):
    return ca.vertcat(
        ca.horzcat(0, -w[2], w[1]), ca.horzcat(w[2], 0, -w[0]), ca.horzcat(-w[1], w[0], 0)
    )


def _ad(V):
    W, U = _hat3(V[:3]), _hat3(V[3:])
    return ca.vertcat(ca.horzcat(W, ca.SX.zeros(3, 3)), ca.horzcat(U, W))


def _Ad(R, p):
    return ca.vertcat(ca.horzcat(R, ca.SX.zeros(3, 3)), ca.horzcat(_hat3(p) @ R, R))


def exp_joint(A, theta, prismatic: bool):
    """(R, p) of exp([A] theta): Rodrigues for a revolute twist (unit omega), a slide otherwise."""
    w, v = A[:3], A[3:]
    if prismatic:
        return ca.SX.eye(3), v * theta
    W = _hat3(w)
    s, c = ca.sin(theta), 1 - ca.cos(theta)
    R = ca.SX.eye(3) + s * W + c * W @ W
    p = (theta * ca.SX.eye(3) + c * W + (theta - s) * W @ W) @ v
    return R, p


def torque_expression(chain: Chain, eta, q, dq, ddq, inertias=None):
    """tau (n,) as an SX expression of eta (6n,) and the state (module docstring).

    ``inertias``: the links' spatial inertias G_i (SX 6x6 each), default the chain's.
    """
    n = chain.n
    prismatic = [k == "prismatic" for k in chain.joint_kinds]
    R = [None] * n
    P = [None] * n
    S = [None] * n
    V = [None] * n
    a = [None] * n
    f = [None] * n
    base_a = ca.vertcat(ca.SX.zeros(3), -ca.DM(chain.gravity))
    for i in range(n):
        A0 = ca.DM(chain.twists[i])
        A = A0 + _ad(eta[6 * i : 6 * i + 6]) @ A0
        p = chain.parents[i]
        Rp, Pp = (ca.SX.eye(3), ca.SX.zeros(3)) if p < 0 else (R[p], P[p])
        Vp, ap = (ca.SX.zeros(6), base_a) if p < 0 else (V[p], a[p])
        S[i] = _Ad(Rp, Pp) @ A
        Re, pe = exp_joint(A, q[i], prismatic[i])
        R[i], P[i] = Rp @ Re, Rp @ pe + Pp
        V[i] = Vp + S[i] * dq[i]
        a[i] = ap + S[i] * ddq[i] + _ad(V[i]) @ S[i] * dq[i]
        Xinv = _Ad(R[i].T, -R[i].T @ P[i])  # Ad_{T_i}^{-1}
        G = ca.DM(chain.inertias[i]) if inertias is None else inertias[i]
        I = Xinv.T @ G @ Xinv
        f[i] = I @ a[i] - _ad(V[i]).T @ I @ V[i]
    F = list(f)
    tau = [None] * n
    for i in reversed(range(n)):
        tau[i] = S[i].T @ F[i]
        p = chain.parents[i]
        if p >= 0:
            F[p] = F[p] + F[i]
    return ca.vertcat(*tau)


@functools.lru_cache(maxsize=16)
def _functions(chain: Chain) -> tuple[ca.Function, ca.Function]:
    """(contracted gradient (q, dq, ddq, D) -> (h, grad_s h), Jacobian (q, dq, ddq) -> J)."""
    n = chain.n
    eta = ca.SX.sym("eta", 6 * n)
    q, dq, ddq = (ca.SX.sym(name, n) for name in ("q", "dq", "ddq"))
    D = ca.SX.sym("D", 6 * n, n)
    tau = torque_expression(chain, eta, q, dq, ddq)
    zero = ca.DM.zeros(6 * n)
    JD = ca.substitute(ca.jtimes(tau, eta, D), eta, zero)  # (n, n): column a = J D[:, a]
    h = ca.trace(JD)
    s = ca.vertcat(q, dq, ddq)
    grad = ca.gradient(h, s)
    contracted = ca.Function("eta_state_gradient", [q, dq, ddq, D], [h, grad])
    J = ca.substitute(ca.jacobian(tau, eta), eta, zero)
    jacobian = ca.Function("dtau_deta", [q, dq, ddq], [J])
    return contracted, jacobian


def contracted_gradient(chain: Chain, q: Array, dq: Array, ddq: Array, D: Array) -> Array:
    """grad_s of ``sum_a (d tau_a / d eta) D[k, :, a]`` per sample: (K, 3n) as [q, dq, ddq].

    ``q, dq, ddq`` (K, n); ``D`` (K, 6n, n) joint-eta directions per torque row.
    """
    K, n = q.shape
    contracted, _ = _functions(chain)
    mapped = contracted.map(K, "thread", 2)
    Dflat = np.ascontiguousarray(np.transpose(D, (1, 0, 2)).reshape(6 * n, K * n))
    _, grad = mapped(q.T, dq.T, ddq.T, Dflat)
    return np.asarray(grad).T  # (K, 3n)


def eta_jacobian(chain: Chain, q: Array, dq: Array, ddq: Array) -> Array:
    """d tau / d eta_joints (K, n, 6n) from the SX recursion (for checks against the kernel)."""
    K, n = q.shape
    _, jacobian = _functions(chain)
    out = np.asarray(jacobian.map(K)(q.T, dq.T, ddq.T))  # (n, 6n K)
    return out.reshape(n, K, 6 * n).transpose(1, 0, 2)
