"""Derivatives of joint torques with respect to joint twists and state ([Kwon] §2).

``twist_derivatives(chain, q, dq, ddq, f_tool)`` returns, for every sample,
``d tau / d lambda`` with ``lambda = [eta, q, dq, ddq]`` (6(n+1) + 3n
columns; [Kwon] eq. 9): the torques of ``chain.with_eta(eta)`` (joint
twists ``A_i <- Ad_{exp(eta_i)} A_i`` in the base frame at q = 0, tool frame
``M_tool <- exp(eta_tool) M_tool``) differentiated at ``eta = 0``.

What is computed, and how it departs from the printed Algorithm 1
-----------------------------------------------------------------
Algorithm 1 propagates the full 6 x (9n+6) derivative blocks P_i, Q_i, R_i
of body twists, accelerations and wrenches through the chain, which costs
O(n) 6x6 products per column and link. The code here computes the same
numbers from one observation that also covers the state partials: every
column of lambda perturbs the motion of one *subtree* in a structured way.
Written in the base (world) frame, where S_i = Ad_{T_parent} A_i is joint
i's current twist, V_i and a_i the link's spatial velocity and acceleration
(gravity included as a_base = (0, -g)), I_i its world inertia, and F_i the
wrench transmitted by joint i (sum of f_k = I_k a_k - ad_{V_k}^T I_k V_k
over the subtree, minus the tool wrench), a perturbation of joint j is
described by four twists:

* ``xi``: a rigid displacement of the subtree of j (links and the joint
  twists of its descendants, tool frame included),
* ``dS``: the change of S_j itself,
* ``u``, ``w``: a uniform change of the subtree's velocities and
  accelerations on top of the rigid motion, so that for every link k in
  the subtree ``dV_k = ad_xi V_k + u`` and ``da_k = ad_xi a_k + ad_u V_k + w``.

Then, with the composite inertia ``IC_i``, the subtree momentum
``h_i = sum I_k V_k`` and ``B_i = sum (I_k ad_{V_k} + ad_{V_k}^T I_k)``
(symmetric, ``= -d IC_i / dt``), the wrench of the subtree changes by
``dF_j = -ad_xi^T F_j + IC_j w - (B_j + ad*_{h_j}) u`` and

* ancestors i of j:    ``d tau_i = S_i^T dF_j``,
* i = j:               ``d tau_j = dS^T F_j + S_j^T dF_j``,
* descendants i of j:  ``d tau_i = S_i^T (IC_i w - (B_i + ad*_{h_i}) u)``
  (the rigid part cancels: S_i and F_i move together).

The generators are (``p`` the parent of j; ``eps_p = Ad_{T_p} e``,
``eps_c = Ad_{T_j} e`` for a unit direction e of eta_j):

=========  ===================  ==============  ==============================
column     xi                   dS              u
=========  ===================  ==============  ==============================
ddq_j      0                    0               0
dq_j       0                    0               S_j
q_j        S_j                  0               ad_{V_j} S_j
eta_j      eps_p - eps_c        ad_{eps_p} S_j  dS dq_j - ad_xi V_j
=========  ===================  ==============  ==============================

and in every case ``w = dS ddq_j + S_j dddq_j + ad_{dV_j} S_j dq_j
+ ad_{V_j} (dS dq_j + S_j ddq_j') - ad_xi a_j - ad_u V_j`` with
``dV_j = ad_xi V_j + u`` (``ddq_j'``/``dddq_j`` are the unit perturbations
of the column's own velocity/acceleration). The ddq_j columns give the mass
matrix. A tool-frame change eta_tool moves only the tool wrench:
``d tau_i = S_i^T ad*_{f_w} Ad_{T_p} e`` for the joints i on the path to the
tool, with f_w the tool wrench in world coordinates. (Algorithm 1 states
its eta columns through ``Ad_i^{-1} ad (I - Ad_i)`` factors in body
coordinates; the ``eps_p - eps_c`` displacement above is the world-frame
image of those factors. Its lines 21 and 30 differ in the sign of the
``ad*_{G V}`` term; the derivation here needs no such term per link
because B and h are accumulated over the subtree.)

The state part equals Pinocchio's ``computeRNEADerivatives``;
:func:`rnea_derivatives_pinocchio` offers that path too. Forward-dynamics
partials follow [IDSVA] eq. 5: ``d ddq / d x = -M^{-1} d tau / d x``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from workbench.arrays import as_samples
from workbench.chain import Chain
from workbench.dynamics import kernels as sk
from workbench.dynamics.inverse_dynamics import (
    add_tool_wrench,
    check_state,
    kernel_model,
)
from workbench.lie import Array, pinocchio_vector
from workbench.models.pinocchio_conversion import shared_model
from workbench.models.placements import create_data
from workbench.runtime import jit, leaf, run_batched


@dataclass(frozen=True)
class TwistDerivatives:
    """d tau / d [eta, q, dq, ddq] for N samples (N = 1 for unbatched input).

    ``dtau_deta`` is (N, n, 6(n+1)): columns 6j..6j+5 are the (omega, v)
    block of joint j, the last six the tool frame. ``dtau_da`` is the mass
    matrix M(q).
    """

    tau: Array  # (N, n)
    dtau_deta: Array  # (N, n, 6(n+1))
    dtau_dq: Array  # (N, n, n)
    dtau_dv: Array  # (N, n, n)
    dtau_da: Array  # (N, n, n)

    @property
    def dtau_dlambda(self) -> Array:
        """All columns, lambda = [eta, q, dq, ddq]: (N, n, 6(n+1) + 3n)."""
        return np.concatenate([self.dtau_deta, self.dtau_dq, self.dtau_dv, self.dtau_da], axis=-1)


@leaf
def _spatial_matrix(m, h, I, G):
    """G (6x6) of the inertia (m, h, I_o): [[I_o, [h]], [[h]^T, m 1]]."""
    for r in range(3):
        for c in range(3):
            G[r, c] = I[r, c]
            G[3 + r, 3 + c] = m if r == c else 0.0
    G[0, 3], G[0, 4], G[0, 5] = 0.0, -h[2], h[1]
    G[1, 3], G[1, 4], G[1, 5] = h[2], 0.0, -h[0]
    G[2, 3], G[2, 4], G[2, 5] = -h[1], h[0], 0.0
    for r in range(3):
        for c in range(3):
            G[3 + c, r] = G[r, 3 + c]


@leaf
def _ad_matrix(V, X):
    """X = ad_V (6x6)."""
    w0, w1, w2, v0, v1, v2 = V[0], V[1], V[2], V[3], V[4], V[5]
    X[:, :] = 0.0
    X[0, 1], X[0, 2], X[1, 0], X[1, 2], X[2, 0], X[2, 1] = -w2, w1, w2, -w0, -w1, w0
    X[3, 4], X[3, 5], X[4, 3], X[4, 5], X[5, 3], X[5, 4] = -w2, w1, w2, -w0, -w1, w0
    X[3, 1], X[3, 2], X[4, 0], X[4, 2], X[5, 0], X[5, 1] = -v2, v1, v2, -v0, -v1, v0


@leaf
def _ad_star_apply(F, A, out):
    """out = ad*_F A = (m x w_A + f x v_A, f x w_A) ([Kwon] eq. 10)."""
    sk.cross(F[:3], A[:3], out[:3])
    sk.add_cross(F[3:], A[3:], out[:3])
    sk.cross(F[3:], A[:3], out[3:])


@leaf
def _matvec6(M, x, out):
    for r in range(6):
        acc = 0.0
        for c in range(6):
            acc += M[r, c] * x[c]
        out[r] = acc


@leaf
def _column(j, xi, dS, u, w, km, S, F, IC, Bh, alpha, beta, anc, col_out, t6):
    """Fill d tau / d(column) for the generator (xi, dS, u, w) of joint j.

    ``Bh[j]`` holds B_j, ``alpha[i] = IC_i S_i``, ``beta[i] = (B_i - ad*_{h_i}) S_i``;
    ``t6`` is (3, 6) scratch. ``col_out`` is the (n,) output column.
    """
    n = S.shape[0]
    # dF = -ad_xi^T F_j + IC_j w - B_j u - ad*_{h_j} u  (t6[0])
    sk.ad_transpose_apply(xi, F[j], t6[1])
    _matvec6(IC[j], w, t6[0])
    _matvec6(Bh[j], u, t6[2])
    for r in range(6):
        t6[0, r] -= t6[1, r] + t6[2, r]
    _ad_star_apply(Bh[n + j, 0], u, t6[1])  # h_j stored in Bh[n + j, 0]
    for r in range(6):
        t6[0, r] -= t6[1, r]
    col_out[j] = sk.dot6(dS, F[j]) + sk.dot6(S[j], t6[0])
    k = km.parents[j]
    while k >= 0:
        col_out[k] = sk.dot6(S[k], t6[0])
        k = km.parents[k]
    for i in range(j + 1, n):
        if anc[j, i]:
            col_out[i] = sk.dot6(alpha[i], w) - sk.dot6(beta[i], u)


@leaf
def _generator(xi, dS, unit_dq, unit_ddq, dq_j, ddq_j, S_j, V_j, a_j, t6, u, w):
    """u and w of a column from its xi, dS and unit velocity/acceleration perturbation.

    ``u = dS dq + S unit_dq - ad_xi V`` and ``w = dS ddq + S unit_ddq +
    ad_{dV} S dq + ad_V (dS dq + S unit_dq) - ad_xi a - ad_u V`` with
    ``dV = ad_xi V + u`` (see the module docstring).
    """
    sk.ad_apply(xi, V_j, t6[0])
    for r in range(6):
        t6[1, r] = dS[r] * dq_j + S_j[r] * unit_dq  # d(S_j dq_j)
        u[r] = t6[1, r] - t6[0, r]
        t6[0, r] += u[r]  # dV_j
        w[r] = dS[r] * ddq_j + S_j[r] * unit_ddq
    sk.ad_apply(t6[0], S_j, t6[2])
    for r in range(6):
        w[r] += t6[2, r] * dq_j
    sk.ad_apply(V_j, t6[1], t6[2])
    for r in range(6):
        w[r] += t6[2, r]
    sk.ad_apply(xi, a_j, t6[2])
    for r in range(6):
        w[r] -= t6[2, r]
    sk.ad_apply(u, V_j, t6[2])
    for r in range(6):
        w[r] -= t6[2, r]


@jit
def _derivatives_kernel(
    km, anc, q, dq, ddq, f_tool, tau, deta, dq_out, dv_out, da_out, start, stop
):
    n = km.parents.shape[0]
    R = np.empty((n + 1, 3, 3))
    P = np.empty((n + 1, 3))
    V = np.empty((n + 1, 6))
    A = np.empty((n + 1, 6))
    S = np.empty((n, 6))
    H = np.empty((n, 3))
    I = np.empty((n, 3, 3))
    F = np.empty((n, 6))
    IC = np.empty((n, 6, 6))
    Bh = np.empty((2 * n, 6, 6))  # B_i in rows < n; momentum h_i in Bh[n + i, 0]
    alpha = np.empty((n, 6))
    beta = np.empty((n, 6))
    G = np.empty((6, 6))
    X = np.empty((6, 6))
    tmp = np.empty((3, 6))
    t6 = np.empty((3, 6))
    gen = np.empty((4, 6))  # xi, dS, u, w
    eps = np.empty((2, 6))
    Re = np.empty((3, 3))
    Rt = np.empty((3, 3))
    fw = np.zeros(6)
    col = np.empty(n)
    e = np.zeros(6)
    sk.init_base(km.gravity, R, P, V, A)
    for s in range(start, stop):
        sk.forward_pass(
            km.parents, km.twists, km.mass, km.h0, km.I0,
            q[s], dq[s], ddq[s], R, P, S, V, A, H, I, F, tmp, Re,
        )  # fmt: skip
        has_tool = f_tool.shape[0] > 0 and km.tool_parent >= 0
        if has_tool:
            add_tool_wrench(km, R, P, f_tool[s], F, Rt, tmp[0, :3], fw)
        # composite quantities, leaves first
        for i in range(n):
            _spatial_matrix(km.mass[i], H[i], I[i], G)
            _ad_matrix(V[i], X)
            for r in range(6):
                for cc in range(6):
                    acc = 0.0
                    for k in range(6):
                        acc += G[r, k] * X[k, cc]
                    tmp[0, cc] = acc  # (G ad_V)[r, :]
                for cc in range(6):
                    IC[i, r, cc] = G[r, cc]
                    Bh[i, r, cc] = tmp[0, cc]
            for r in range(6):
                for cc in range(r, 6):
                    b = Bh[i, r, cc] + Bh[i, cc, r]
                    Bh[i, r, cc] = b
                    Bh[i, cc, r] = b
            sk.inertia_apply(km.mass[i], H[i], I[i], V[i], Bh[n + i, 0])
        for i in range(n - 1, -1, -1):
            tau[s, i] = sk.dot6(S[i], F[i])
            k = km.parents[i]
            if k >= 0:
                for r in range(6):
                    F[k, r] += F[i, r]
                    Bh[n + k, 0, r] += Bh[n + i, 0, r]
                    for cc in range(6):
                        IC[k, r, cc] += IC[i, r, cc]
                        Bh[k, r, cc] += Bh[i, r, cc]
        for i in range(n):
            _matvec6(IC[i], S[i], alpha[i])
            _matvec6(Bh[i], S[i], beta[i])
            _ad_star_apply(Bh[n + i, 0], S[i], tmp[0])
            for r in range(6):
                beta[i, r] -= tmp[0, r]
        # state and eta columns, joint by joint: each column is a generator
        # (xi, dS, unit dq, unit ddq) -> (u, w) -> d tau (module docstring)
        xi, dS, u, w = gen[0], gen[1], gen[2], gen[3]
        for j in range(n):
            p = km.parents[j]
            for kind in range(3 + (6 if deta.shape[2] > 0 else 0)):
                xi[:] = 0.0
                dS[:] = 0.0
                unit_dq = 1.0 if kind == 1 else 0.0
                unit_ddq = 1.0 if kind == 0 else 0.0
                if kind == 2:  # q_j: the subtree turns about S_j
                    xi[:] = S[j]
                elif kind >= 3:  # eta_j along the unit direction kind - 3
                    e[:] = 0.0
                    e[kind - 3] = 1.0
                    sk.Ad_apply(R[p], P[p], e, eps[0])
                    sk.Ad_apply(R[j], P[j], e, eps[1])
                    for r in range(6):
                        xi[r] = eps[0, r] - eps[1, r]
                    sk.ad_apply(eps[0], S[j], dS)
                _generator(xi, dS, unit_dq, unit_ddq, dq[s, j], ddq[s, j],
                           S[j], V[j], A[j], t6, u, w)  # fmt: skip
                col[:] = 0.0
                _column(j, xi, dS, u, w, km, S, F, IC, Bh, alpha, beta, anc, col, t6)
                if kind == 0:
                    da_out[s, :, j] = col
                elif kind == 1:
                    dv_out[s, :, j] = col
                elif kind == 2:
                    dq_out[s, :, j] = col
                else:
                    deta[s, :, 6 * j + kind - 3] = col
        # tool frame: d tau_i = S_i^T ad*_{f_w} Ad_{T_p} e on the path to the tool
        deta[s, :, 6 * n :] = 0.0
        if has_tool and deta.shape[2] > 0:
            k = km.tool_parent
            for d in range(6):
                e[:] = 0.0
                e[d] = 1.0
                sk.Ad_apply(R[k], P[k], e, eps[0])
                _ad_star_apply(fw, eps[0], tmp[0])
                i = k
                while i >= 0:
                    deta[s, i, 6 * n + d] = sk.dot6(S[i], tmp[0])
                    i = km.parents[i]


def twist_derivatives(
    chain: Chain,
    q: ArrayLike,
    dq: ArrayLike,
    ddq: ArrayLike,
    f_tool: ArrayLike | None = None,
) -> TwistDerivatives:
    """d tau / d [eta, q, dq, ddq] at eta = 0 for N samples (see the module docstring).

    Inputs as in :func:`workbench.dynamics.inverse_dynamics`; outputs always
    carry the sample axis (N = 1 for unbatched input).
    """
    state = check_state(chain, q, dq, ddq, f_tool)
    N, n = state.q.shape
    tau = np.empty((N, n))
    deta = np.empty((N, n, 6 * (n + 1)))
    dtau_dq, dtau_dv, dtau_da = (np.empty((N, n, n)) for _ in range(3))
    f = np.zeros((0, 6)) if state.f_tool is None else state.f_tool
    run_batched(
        _derivatives_kernel, N, kernel_model(chain), chain.ancestors,
        state.q, state.dq, state.ddq, f, tau, deta, dtau_dq, dtau_dv, dtau_da,
    )  # fmt: skip
    return TwistDerivatives(tau, deta, dtau_dq, dtau_dv, dtau_da)


@dataclass(frozen=True)
class ForwardDynamicsDerivatives:
    """d ddq / d [eta, q, dq, tau] for N samples ([IDSVA] eq. 5), and ddq itself."""

    ddq: Array  # (N, n)
    dddq_deta: Array  # (N, n, 6(n+1))
    dddq_dq: Array  # (N, n, n)
    dddq_dv: Array  # (N, n, n)
    dddq_dtau: Array  # (N, n, n) = M^{-1}


def rnea_derivatives(
    chain: Chain,
    q: ArrayLike,
    dq: ArrayLike,
    ddq: ArrayLike,
    f_tool: ArrayLike | None = None,
) -> tuple[Array, Array, Array]:
    """State partials only, (d tau/dq, d tau/d dq, M), each (N, n, n).

    The kernel of :func:`twist_derivatives` without its eta columns (a
    third of the work); the same numbers as Pinocchio's
    ``computeRNEADerivatives`` (see :func:`rnea_derivatives_pinocchio`).
    """
    state = check_state(chain, q, dq, ddq, f_tool)
    N, n = state.q.shape
    out = np.empty((3, N, n, n))
    f = np.zeros((0, 6)) if state.f_tool is None else state.f_tool
    run_batched(
        _derivatives_kernel, N, kernel_model(chain), chain.ancestors,
        state.q, state.dq, state.ddq, f, np.empty((N, n)), np.empty((N, n, 0)),
        out[0], out[1], out[2],
    )  # fmt: skip
    return out[0], out[1], out[2]


def forward_dynamics_derivatives(
    chain: Chain,
    q: ArrayLike,
    dq: ArrayLike,
    tau: ArrayLike,
    f_tool: ArrayLike | None = None,
) -> ForwardDynamicsDerivatives:
    """Forward dynamics ddq = M^{-1} (tau - b) and its partials ``-M^{-1} d tau / d x``.

    [IDSVA] eq. 5: at the forward-dynamics solution, the partials of ddq
    with respect to eta, q and dq are ``-M^{-1}`` times those of inverse
    dynamics, and ``d ddq / d tau = M^{-1}``. M^{-1} is applied by batched
    LAPACK solves (LU), never formed and multiplied. Outputs carry the
    sample axis (N = 1 for one sample).
    """
    state = check_state(chain, q, dq, np.zeros_like(np.asarray(q, dtype=float)), f_tool)
    tau, _ = as_samples(tau, chain.n, "tau", chain.joint_names)
    rest = twist_derivatives(chain, state.q, state.dq, state.ddq, state.f_tool)
    M = rest.dtau_da
    ddq = np.linalg.solve(M, (tau - rest.tau)[..., None])[..., 0]
    d = twist_derivatives(chain, state.q, state.dq, ddq, state.f_tool)
    n = chain.n
    minus_identity = np.broadcast_to(-np.eye(n), d.dtau_da.shape)
    rhs = np.concatenate([d.dtau_deta, d.dtau_dq, d.dtau_dv, minus_identity], axis=-1)
    sol = -np.linalg.solve(M, rhs)
    m = 6 * (n + 1)
    return ForwardDynamicsDerivatives(
        ddq, sol[..., :m], sol[..., m : m + n], sol[..., m + n : m + 2 * n], sol[..., m + 2 * n :]
    )


def rnea_derivatives_pinocchio(
    chain: Chain,
    q: ArrayLike,
    dq: ArrayLike,
    ddq: ArrayLike,
    f_tool: ArrayLike | None = None,
) -> tuple[Array, Array, Array]:
    """State partials (d tau/dq, d tau/d dq, M) from Pinocchio's ``computeRNEADerivatives``.

    A Python loop over samples calls Pinocchio on ``shared_model(chain)``;
    BENCHMARKS.md compares it with :func:`twist_derivatives`. Each output is (N, n, n).
    """
    import pinocchio as pin

    state = check_state(chain, q, dq, ddq, f_tool)
    model = shared_model(chain)
    data = create_data(model, f"chain '{chain.name}'")
    N, n = state.q.shape
    out = np.empty((3, N, n, n))
    fext = None
    if state.f_tool is not None:
        tool = model.frames[model.getFrameId(chain.tool_name)]
        fext = [pin.Force.Zero() for _ in range(model.njoints)]
    for s in range(N):
        if fext is None:
            pin.computeRNEADerivatives(model, data, state.q[s], state.dq[s], state.ddq[s])
        else:
            wrench = pin.Force(pinocchio_vector(state.f_tool[s]))
            fext[tool.parentJoint] = tool.placement.act(wrench)
            pin.computeRNEADerivatives(model, data, state.q[s], state.dq[s], state.ddq[s], fext)
        out[0, s] = data.dtau_dq
        out[1, s] = data.dtau_dv
        out[2, s] = data.M
    M = np.triu(out[2]) + np.swapaxes(np.triu(out[2], 1), -1, -2)
    return out[0], out[1], M
