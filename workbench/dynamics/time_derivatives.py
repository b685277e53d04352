"""Time derivatives of the equations of motion ([Kwon], [Mueller]).

``time_derivatives(chain, q, dq, ddq, dddq, ddddq)`` returns the joint torques
``tau`` of inverse dynamics along a trajectory together with ``tau_dot`` and
``tau_ddot`` (the "higher-order inverse dynamics" of [Mueller]), for trees and
serial chains, batched over samples in compiled code (numba: a loop over
joints inside a loop over samples, split across threads like
:func:`workbench.dynamics.inverse_dynamics`).

Method: the recursive Newton-Euler algorithm of [Kwon] eq. 1-5 differentiated
in time. Every quantity x(t) of the recursion is carried as its *jet*
``[x, x', x'']`` (derivatives, no factorials); products follow the Leibniz
rule ``(a b)^(k) = sum_j C(k, j) a^(j) b^(k-j)``. :func:`time_derivatives`
runs the recursion in link coordinates ([Kwon]'s body form, constant A_i
and G_i, link frame = base frame at q = 0):

* ``v_i = X_i v_p + A_i dq_i`` with ``X_i = Ad_{exp(-[A_i] q_i)}``  (eq. 2),
* ``a_i = X_i a_p + A_i ddq_i + ad_{v_i} A_i dq_i``, ``a_0 = (0, -g)``
  (eq. 3, gravity carried as a base acceleration),
* ``f_i = G_i a_i - ad_{v_i}^T G_i v_i``                              (eq. 4),
* ``F_i = f_i + sum_c X_c^T F_c``, ``tau_i = A_i^T F_i``               (eq. 5).

The jets of the transported terms come from ``X = exp(q D)`` with
``D = -ad_A``: X commutes with D, so ``(X u)' = X (u' + dq D u)`` and
``(X^T u)' = X^T (u' + dq D^T u)``; with ``L u = u' + dq D u``

    (X u)^(k) = X (L^k u),   L^0 u = u,   L^1 u = u' + dq D u,
    L^2 u = u'' + ddq D u + dq D u' + dq D (L^1 u)

(likewise with D^T for wrenches), so each jet entry costs one rigid
transform and a few ``ad_A`` products, with no derivative of X itself.
``tau^(k)`` needs ``a^(k)`` and ``v^(k)``, hence ``q`` up to its (k+2)-th
derivative: ``tau_ddot`` takes ``ddddq``. Twists are (omega, v), wrenches
(m, f) (docs/conventions.md).

:func:`mass_matrix_derivatives` uses the same recursion in numpy in the base
(world) frame, where with ``T_i = T_p exp([A_i] q_i)`` (normal form, all M_i = I):

* joint twist in the world frame   ``S_i = Ad_{T_i} A_i``, ``S_i' = ad_{V_p} S_i``,
* spatial velocity                 ``V_i = V_p + S_i dq_i``                (eq. 2),
* world inertia                    ``I_i = Ad_{T_i}^{-T} G_i Ad_{T_i}^{-1}``,
  ``I_i' = -ad_{V_i}^T I_i - I_i ad_{V_i}``,

and the composite-rigid-body form ``M_jk = S_j^T IC_k S_k`` (j an ancestor
of k, ``IC_k`` the subtree inertia), differentiated with the Leibniz rule.

:func:`flexible_joint_motor_trajectory` uses tau, tau_dot and tau_ddot for the
inverse dynamics of flexible (series-elastic) joints, [Mueller] §1.
"""

from __future__ import annotations

from collections.abc import Callable
from math import comb
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from workbench import lie
from workbench.arrays import as_samples, broadcast_samples, same_batch
from workbench.chain import Chain
from workbench.dynamics import kernels as sk
from workbench.dynamics.inverse_dynamics import check_state, kernel_model
from workbench.errors import WorkbenchError
from workbench.lie import Array
from workbench.runtime import jit, leaf, run_batched

Jet = list[Array]  # [x, x', x'', ...], each with a leading sample axis


# ----------------------------------------------------------------- jet algebra
def _leibniz(product: Callable[[Array, Array], Array], a: Jet, b: Jet, order: int) -> Jet:
    """Jet of ``product(a, b)`` for a bilinear ``product``: sum_j C(k, j) a^(j) b^(k-j)."""
    return [
        sum(comb(k, j) * product(a[j], b[k - j]) for j in range(k + 1)) for k in range(order + 1)
    ]


def _ad(V: Array, X: Array) -> Array:
    """ad_V X = (w x w_X, w x v_X + v x w_X) for twists (N, 6)."""
    w, v = V[:, :3], V[:, 3:]
    return np.concatenate(
        [np.cross(w, X[:, :3]), np.cross(w, X[:, 3:]) + np.cross(v, X[:, :3])], axis=1
    )


def _matvec(I: Array, x: Array) -> Array:
    """Batched (N, 6, 6) @ (N, 6) -> (N, 6)."""
    return np.einsum("nij,nj->ni", I, x)


def _scale(x: Array, s: Array) -> Array:
    """Twists (N, 6) times scalars (N,)."""
    return x * s[:, None]


def _dot(x: Array, y: Array) -> Array:
    """Row-wise dot products of (N, 6) arrays."""
    return np.einsum("ni,ni->n", x, y)


def _transported_twist(x0: Array, V: Jet, order: int) -> Jet:
    """Jet of a twist fixed in a body of velocity jet V: x' = ad_V x (so x^(k+1) = (ad_V x)^(k))."""
    x = [x0]
    for k in range(order):
        x.append(sum(comb(k, j) * _ad(V[j], x[k - j]) for j in range(k + 1)))
    return x


def _transported_inertia(I0: Array, V: Jet, order: int) -> Jet:
    """Jet of a world inertia carried by a body of velocity jet V: I' = -ad_V^T I - I ad_V."""
    I = [I0]
    for k in range(order):
        terms = []
        for j in range(k + 1):
            adV = lie.ad(V[j])
            terms.append(comb(k, j) * (np.swapaxes(adV, 1, 2) @ I[k - j] + I[k - j] @ adV))
        I.append(-sum(terms))
    return I


# -------------------------------------------------------------- forward pass
class _Link(NamedTuple):
    """Jets of one link: joint twist S, spatial velocity V and world inertia I."""

    S: Jet
    V: Jet
    I: Jet


def _forward_jets(
    chain: Chain, q: Array, qdots: list[Array], twist_order: int, inertia_order: int
) -> list[_Link]:
    """Jets of S_i (order ``twist_order``), V_i and I_i (order ``inertia_order``).

    ``qdots = [dq, ddq, ...]`` (each (N, n)) sets the order of the V jets,
    ``len(qdots) - 1``; ``S^(k)`` needs ``V_p^(k-1)`` and ``I^(k)`` needs
    ``V^(k-1)``. Loops over joints; every step is vectorised over the N samples.
    """
    N = q.shape[0]
    base_V = [np.zeros((N, 6))] * len(qdots)
    T = [None] * chain.n
    links: list[_Link] = []
    for i in range(chain.n):
        p = chain.parents[i]
        step = lie.exp_se3(chain.twists[i] * q[:, i, None])
        T[i] = step if p < 0 else T[p] @ step
        V_p = base_V if p < 0 else links[p].V
        S = _transported_twist(lie.Ad(T[i]) @ chain.twists[i], V_p, twist_order)
        joint_V = _leibniz(_scale, S, [d[:, i] for d in qdots], len(qdots) - 1)
        V = [vp + sv for vp, sv in zip(V_p, joint_V, strict=True)]
        Ad_inv = lie.Ad(lie.inverse(T[i]))
        I0 = np.swapaxes(Ad_inv, 1, 2) @ chain.inertias[i] @ Ad_inv
        links.append(_Link(S, V, _transported_inertia(I0, V, inertia_order)))
    return links


# ------------------------------------------------------------ public functions
def _check_trajectory(chain: Chain, q, dq, ddq, derivatives: dict[str, ArrayLike]):
    """Checked (N, n) arrays [q, dq, ddq, *derivatives] and whether the input was batched."""
    state = check_state(chain, q, dq, ddq)
    arrays = [(state.q, "q")]
    batched = state.batched
    for what, x in derivatives.items():
        arr, b = as_samples(x, chain.n, what, chain.joint_names)
        arrays.append((arr, what))
        batched = batched or b
    N = same_batch(*arrays)
    extra = [broadcast_samples(a, N) for a, _ in arrays[1:]]
    base = [broadcast_samples(x, N) for x in (state.q, state.dq, state.ddq)]
    return [*base, *extra], batched


# ------------------------------------------- compiled tau, tau_dot, tau_ddot (body form)
@leaf
def _inverse_Ad_apply(R, p, x, out):
    """out = Ad_{T^-1} x = (R^T w, R^T (v - p x w)) for T = (R, p)."""
    for r in range(3):
        out[r] = R[0, r] * x[0] + R[1, r] * x[1] + R[2, r] * x[2]
    u0 = x[3] - (p[1] * x[2] - p[2] * x[1])
    u1 = x[4] - (p[2] * x[0] - p[0] * x[2])
    u2 = x[5] - (p[0] * x[1] - p[1] * x[0])
    for r in range(3):
        out[3 + r] = R[0, r] * u0 + R[1, r] * u1 + R[2, r] * u2


@leaf
def _add_scaled_ad(A, x, scale, out):
    """out += scale ad_A x."""
    w0, w1, w2 = A[0], A[1], A[2]
    u0, u1, u2 = A[3], A[4], A[5]
    out[0] += scale * (w1 * x[2] - w2 * x[1])
    out[1] += scale * (w2 * x[0] - w0 * x[2])
    out[2] += scale * (w0 * x[1] - w1 * x[0])
    out[3] += scale * (w1 * x[5] - w2 * x[4] + u1 * x[2] - u2 * x[1])
    out[4] += scale * (w2 * x[3] - w0 * x[5] + u2 * x[0] - u0 * x[2])
    out[5] += scale * (w0 * x[4] - w1 * x[3] + u0 * x[1] - u1 * x[0])


@leaf
def _add_scaled_ad_transpose(A, F, scale, out):
    """out += scale ad_A^T F = scale (-(w x m) - u x f, -(w x f)) for A = (w, u), F = (m, f)."""
    w0, w1, w2 = A[0], A[1], A[2]
    u0, u1, u2 = A[3], A[4], A[5]
    out[0] += scale * (F[1] * w2 - F[2] * w1 + F[4] * u2 - F[5] * u1)
    out[1] += scale * (F[2] * w0 - F[0] * w2 + F[5] * u0 - F[3] * u2)
    out[2] += scale * (F[0] * w1 - F[1] * w0 + F[3] * u1 - F[4] * u0)
    out[3] += scale * (F[4] * w2 - F[5] * w1)
    out[4] += scale * (F[5] * w0 - F[3] * w2)
    out[5] += scale * (F[3] * w1 - F[4] * w0)


@leaf
def _operator_jet(A, x, d1, d2, transpose, L):
    """L[k] = L^k x (k = 0, 1, 2) for a jet x (3, 6): ``L u = u' + dq D u`` (module docstring).

    ``D = -ad_A`` (twists) or ``D^T = -ad_A^T`` (``transpose``, wrenches);
    ``d1``, ``d2`` are the joint's dq and ddq.
    """
    for r in range(6):
        L[0, r] = x[0, r]
        L[1, r] = x[1, r]
        L[2, r] = x[2, r]
    if transpose:
        _add_scaled_ad_transpose(A, x[0], -d1, L[1])
        _add_scaled_ad_transpose(A, x[0], -d2, L[2])
        _add_scaled_ad_transpose(A, x[1], -d1, L[2])
        _add_scaled_ad_transpose(A, L[1], -d1, L[2])
    else:
        _add_scaled_ad(A, x[0], -d1, L[1])
        _add_scaled_ad(A, x[0], -d2, L[2])
        _add_scaled_ad(A, x[1], -d1, L[2])
        _add_scaled_ad(A, L[1], -d1, L[2])


@jit
def _time_derivatives_kernel(km, q, dq, ddq, dddq, ddddq, out, start, stop):
    """out[k, s] = tau^(k) (k = 0, 1, 2) for samples start..stop-1 (module docstring)."""
    n = km.parents.shape[0]
    v = np.zeros((n + 1, 3, 6))  # jets; row n (index -1) is the base
    a = np.zeros((n + 1, 3, 6))
    F = np.empty((n, 3, 6))
    R = np.empty((n, 3, 3))
    P = np.empty((n, 3))
    L = np.empty((3, 6))
    Gv = np.empty((3, 6))
    c = np.empty((3, 6))
    t = np.empty(6)
    a[-1, 0, 3:] = -km.gravity
    for s in range(start, stop):
        for i in range(n):
            A = km.twists[i]
            k = km.parents[i]
            d1, d2, d3, d4 = dq[s, i], ddq[s, i], dddq[s, i], ddddq[s, i]
            sk.joint_transform(A, q[s, i], R[i], P[i])
            _operator_jet(A, v[k], d1, d2, False, L)
            for j in range(3):
                _inverse_Ad_apply(R[i], P[i], L[j], v[i, j])
            for r in range(6):
                v[i, 0, r] += A[r] * d1
                v[i, 1, r] += A[r] * d2
                v[i, 2, r] += A[r] * d3
            _operator_jet(A, a[k], d1, d2, False, L)
            for j in range(3):
                _inverse_Ad_apply(R[i], P[i], L[j], a[i, j])
                sk.ad_apply(v[i, j], A, c[j])  # c_j = ad_{v^(j)} A
            for r in range(6):  # + A q^(k+2) + (ad_v A dq)^(k)
                a[i, 0, r] += A[r] * d2 + c[0, r] * d1
                a[i, 1, r] += A[r] * d3 + c[1, r] * d1 + c[0, r] * d2
                a[i, 2, r] += A[r] * d4 + c[2, r] * d1 + 2.0 * c[1, r] * d2 + c[0, r] * d3
            m, h, I = km.mass[i], km.h0[i], km.I0[i]
            for j in range(3):
                sk.inertia_apply(m, h, I, v[i, j], Gv[j])
                sk.inertia_apply(m, h, I, a[i, j], F[i, j])
            # f^(k) = G a^(k) - sum_j C(k, j) ad_{v^(j)}^T G v^(k-j)
            _add_scaled_ad_transpose(v[i, 0], Gv[0], -1.0, F[i, 0])
            _add_scaled_ad_transpose(v[i, 1], Gv[0], -1.0, F[i, 1])
            _add_scaled_ad_transpose(v[i, 0], Gv[1], -1.0, F[i, 1])
            _add_scaled_ad_transpose(v[i, 2], Gv[0], -1.0, F[i, 2])
            _add_scaled_ad_transpose(v[i, 1], Gv[1], -2.0, F[i, 2])
            _add_scaled_ad_transpose(v[i, 0], Gv[2], -1.0, F[i, 2])
        for i in range(n - 1, -1, -1):
            A = km.twists[i]
            for j in range(3):
                out[j, s, i] = sk.dot6(A, F[i, j])
            k = km.parents[i]
            if k >= 0:
                _operator_jet(A, F[i], dq[s, i], ddq[s, i], True, L)
                for j in range(3):
                    sk.wrench_to_world(R[i], P[i], L[j], t)
                    for r in range(6):
                        F[k, j, r] += t[r]


def time_derivatives(
    chain: Chain,
    q: ArrayLike,
    dq: ArrayLike,
    ddq: ArrayLike,
    dddq: ArrayLike,
    ddddq: ArrayLike,
) -> tuple[Array, Array, Array]:
    """Inverse dynamics tau and its first two time derivatives along a trajectory.

    Differentiates the RNEA of [Kwon] eq. 1-5 twice in time (see the
    module docstring); this is the second-order inverse dynamics of [Mueller]
    (eq. 35 and 45 there, computed recursively instead of in closed form).
    ``q`` and its derivatives ``dq .. ddddq`` are (n,) or (N, n) (a single
    sample broadcasts against N). Returns ``(tau, tau_dot, tau_ddot)``, each
    (n,) for unbatched input, else (N, n). Gravity is included, no tool wrench.
    """
    (q, dq, ddq, dddq, ddddq), batched = _check_trajectory(
        chain, q, dq, ddq, {"dddq": dddq, "ddddq": ddddq}
    )
    out = np.empty((3, *q.shape))
    run_batched(
        _time_derivatives_kernel, q.shape[0], kernel_model(chain), q, dq, ddq, dddq, ddddq, out
    )
    return tuple(out) if batched else tuple(out[:, 0])


def mass_matrix_derivatives(
    chain: Chain, q: ArrayLike, dq: ArrayLike, ddq: ArrayLike
) -> tuple[Array, Array, Array]:
    """M(q), M_dot(q, dq) and M_ddot(q, dq, ddq) from the jets of S_i and I_i.

    Composite-rigid-body form in the world frame: ``M_jk = S_j^T IC_k S_k``
    for j an ancestor of k (``IC_k`` the sum of the world inertias of the
    subtree of k, [MR] eq. 9.61 regrouped), differentiated with the
    Leibniz rule. Inputs (n,) or (N, n); outputs (n, n) or (N, n, n).
    """
    (q, dq, ddq), batched = _check_trajectory(chain, q, dq, ddq, {})
    links = _forward_jets(chain, q, [dq, ddq], twist_order=2, inertia_order=2)
    IC = [list(link.I) for link in links]
    for k in range(chain.n - 1, -1, -1):
        p = chain.parents[k]
        if p >= 0:
            IC[p] = [x + y for x, y in zip(IC[p], IC[k], strict=True)]
    M = np.zeros((3, q.shape[0], chain.n, chain.n))
    for k, link in enumerate(links):
        force = _leibniz(_matvec, IC[k], link.S, 2)  # IC_k S_k and its derivatives
        j = k
        while j >= 0:
            M[:, :, j, k] = M[:, :, k, j] = _leibniz(_dot, links[j].S, force, 2)
            j = chain.parents[j]
    return tuple(M) if batched else tuple(M[:, 0])


class FlexibleJointTrajectory(NamedTuple):
    """Motor side of a flexible-joint trajectory (all (n,) or (N, n))."""

    theta: Array  # motor position q + K^-1 tau
    dtheta: Array  # its velocity
    ddtheta: Array  # its acceleration
    u: Array  # motor torque B ddtheta + tau
    tau: Array  # elastic (link-side) torque K (theta - q)


def flexible_joint_motor_trajectory(
    chain: Chain,
    stiffness: ArrayLike,
    rotor_inertia: ArrayLike,
    q: ArrayLike,
    dq: ArrayLike,
    ddq: ArrayLike,
    dddq: ArrayLike,
    ddddq: ArrayLike,
) -> FlexibleJointTrajectory:
    """Inverse dynamics of flexible joints (Spong's model; [Mueller] §1 motivation).

    Link side ``M(q) ddq + c(q, dq) + g(q) = K (theta - q) = tau`` and motor
    side ``B ddtheta + K (theta - q) = u`` with diagonal joint stiffness K
    and rotor inertia B (``stiffness``, ``rotor_inertia``: scalars or (n,)).
    For a desired link trajectory q(t): ``theta = q + K^-1 tau``,
    ``dtheta = dq + K^-1 tau_dot``, ``ddtheta = ddq + K^-1 tau_ddot`` and
    ``u = B ddtheta + tau``, which is why u needs q up to its fourth derivative.
    """
    K = _positive_per_joint(chain, stiffness, "stiffness")
    B = _positive_per_joint(chain, rotor_inertia, "rotor_inertia", allow_zero=True)
    tau, tau_dot, tau_ddot = time_derivatives(chain, q, dq, ddq, dddq, ddddq)
    theta = np.asarray(q, dtype=float) + tau / K
    dtheta = np.asarray(dq, dtype=float) + tau_dot / K
    ddtheta = np.asarray(ddq, dtype=float) + tau_ddot / K
    return FlexibleJointTrajectory(theta, dtheta, ddtheta, B * ddtheta + tau, tau)


def _positive_per_joint(
    chain: Chain, value: ArrayLike, what: str, allow_zero: bool = False
) -> Array:
    """A scalar or (n,) per-joint constant, checked to be finite and positive (or >= 0)."""
    arr = np.asarray(value, dtype=float)
    arr = np.full(chain.n, arr) if arr.ndim == 0 else arr
    if arr.shape != (chain.n,):
        raise WorkbenchError(f"{what} has shape {arr.shape}; expected () or ({chain.n},)")
    ok = np.isfinite(arr) & ((arr >= 0.0) if allow_zero else (arr > 0.0))
    if not ok.all():
        i = int(np.argmin(ok))
        sign = "non-negative" if allow_zero else "positive"
        raise WorkbenchError(
            f"{what} of joint '{chain.joint_names[i]}' is {arr[i]}; it must be finite and {sign}"
        )
    return arr
