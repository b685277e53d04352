"""Time derivatives of the equations of motion (project issue 9; seeds 000 and 003).

``time_derivatives(chain, q, dq, ddq, dddq, ddddq)`` returns the joint torques
``tau`` of inverse dynamics along a trajectory together with ``tau_dot`` and
``tau_ddot`` (the "higher-order inverse dynamics" of seed 003), for trees and
serial chains, batched over samples with numpy (a loop over joints, never
over samples).

Method: the recursive Newton-Euler algorithm of seed 000 eq. 1-5 differentiated
in time. Every quantity x(t) of the
recursion is carried as its *jet* ``[x, x', x'', ...]`` (truncated Taylor
coefficients without the factorials); products follow the Leibniz rule
``(a b)^(k) = sum_j C(k, j) a^(j) b^(k-j)`` and a quantity that moves with a
link of spatial velocity ``V`` obeys ``x' = ad_V x`` (twists) or
``I' = -ad_V^T I - I ad_V`` (spatial inertias). :func:`time_derivatives` runs
the recursion in link coordinates (seed 000's body form, constant A_i and
G_i): ``v_i = X_i v_p + A_i dq_i`` with ``X_i = Ad_{exp(-[A_i] q_i)}``,
``a_i = v_i' + X_i a_p^0`` (gravity carried as a base acceleration),
``f_i = G_i a_i - ad_{v_i}^T G_i v_i``, ``F_i = f_i + sum_c X_c^T F_c``,
``tau_i = A_i^T F_i``; the jets of ``X_i(t)`` come from Faa di Bruno's
formula (:class:`_JointMotion`). :func:`mass_matrix_derivatives` uses the
same recursion in the base (world) frame, where with ``T_i = T_p exp([A_i] q_i)``
(normal form, all M_i = I):

* joint twist in the world frame   ``S_i = Ad_{T_i} A_i``, ``S_i' = ad_{V_p} S_i``,
* spatial velocity                 ``V_i = V_p + S_i dq_i``                (eq. 2),
* spatial acceleration             ``a_i = V_i' + a_0``, ``a_0 = (0, -g)`` (eq. 3),
* world inertia                    ``I_i = Ad_{T_i}^{-T} G_i Ad_{T_i}^{-1}``,
* link wrench                      ``f_i = I_i a_i - ad_{V_i}^T I_i V_i``  (eq. 4),
* joint torque                     ``tau_i = S_i^T F_i``, ``F_i = sum over the subtree of f_k``
                                   (eq. 5).

``tau^(k)`` needs ``V^(k+1)``, hence ``q`` up to its (k+2)-th derivative:
``tau_ddot`` takes ``ddddq``. Twists are (omega, v), wrenches (m, f)
(DESIGN.md "Conventions"). Gravity ``chain.gravity`` enters as the base
acceleration ``a_0``.

The same jets give the time derivatives of the mass matrix through the
composite-rigid-body form ``M_jk = S_j^T IC_k S_k`` (j an ancestor of k,
``IC_k`` the subtree inertia): :func:`mass_matrix_derivatives`.

:func:`flexible_joint_motor_trajectory` uses tau, tau_dot and tau_ddot for the
inverse dynamics of flexible (series-elastic) joints, seed 003 §1.
"""

from __future__ import annotations

from collections.abc import Callable
from math import comb
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from workbench import lie
from workbench.arrays import as_samples, broadcast_samples, same_batch
from workbench.chain import REVOLUTE, Chain
from workbench.dynamics.inverse_dynamics import check_state
from workbench.errors import WorkbenchError
from workbench.lie import Array

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


def _bell(qdots: list[Array], order: int) -> list[list[Array]]:
    """Coefficients b[j][m] (N,) with ``d^j/dt^j exp(D q(t)) = sum_m b[j][m] D^m exp(D q)``.

    Faa di Bruno for a constant matrix D: ``b[j][m]`` is the partial Bell
    polynomial B_{j,m}(q', q'', ...), from ``X' = q' D X`` and the Leibniz
    rule, ``b[j+1][m] = sum_i C(j, i) q^(i+1) b[j-i][m-1]``. ``qdots[k]`` is
    the (k+1)-th derivative of q (one joint, (N,)).
    """
    one = np.ones_like(qdots[0])
    b = [[one]]
    for j in range(order):
        row = [np.zeros_like(one)]
        for m in range(1, j + 2):
            row.append(sum(comb(j, i) * qdots[i] * b[j - i][m - 1] for i in range(j + 1 - (m - 1))))
        b.append(row)
    return b


class _JointMotion(NamedTuple):
    """Transport through one joint along q(t): ``X(t) = Ad_{exp(-[A] q(t))} = exp(D q(t))``.

    With ``D = -ad_A``, ``X = I + s D + c D^2``: ``s = sin q``, ``c = 1 - cos q``
    for a revolute joint (unit axis, zero pitch, so ``D^3 = -D``: Rodrigues)
    and ``s = q``, ``c = 0`` for a prismatic one (``D^2 = 0``). Faa di Bruno
    gives ``X^(j) = sum_m b[j][m] D^m X`` (:func:`_bell`), and the powers of D
    reduce to ``D`` and ``D^2``, so that for any jet x
    ``(X x)^(k) = x_k + D U_k + D^2 W_k`` with ``U_k = sum_l u[k, l] x_l`` and
    ``W_k = sum_l w[k, l] x_l``; the same coefficients give
    ``(X^T F)^(k) = F_k + D^T U_k + (D^T)^2 W_k``.
    """

    D: Array  # (6, 6)
    uw: dict[int, Array]  # jet length K -> (N, 2K, K): [u; w] for jets of that length


def _joint_motion(A: Array, revolute: bool, q: Array, qdots: Array) -> _JointMotion:
    """The :class:`_JointMotion` of a joint with twist A; q (N,), ``qdots`` (K, N)."""
    K = len(qdots)
    b = _bell(list(qdots), K - 1)
    if revolute:  # D X = cos D + sin D^2, D^2 X = -sin D + cos D^2
        s, c, cos = np.sin(q), 1.0 - np.cos(q), np.cos(q)
        DX = ((cos, s), (-s, cos))
        sign = [(-1.0) ** ((m - 1) // 2) for m in range(K)]  # D^m = sign D^(2 - m % 2)
    else:  # D^2 = 0: D X = D
        s, c = q, np.zeros_like(q)
        DX = ((np.ones_like(q), c), (c, c))
        sign = [float(m == 1) for m in range(K)]
    u = np.zeros((*q.shape, K, K))
    w = np.zeros_like(u)
    for k in range(K):
        u[:, k, k], w[:, k, k] = s, c
        for j in range(1, k + 1):
            alpha = sum(sign[m] * b[j][m] for m in range(1, j + 1, 2))  # coefficient of D X
            beta = sum(sign[m] * b[j][m] for m in range(2, j + 1, 2))  # coefficient of D^2 X
            u[:, k, k - j] = comb(k, j) * (alpha * DX[0][0] + beta * DX[1][0])
            w[:, k, k - j] = comb(k, j) * (alpha * DX[0][1] + beta * DX[1][1])
    uw = {L: np.concatenate([u[:, :L, :L], w[:, :L, :L]], axis=1) for L in (K, K - 1)}
    return _JointMotion(-lie.ad(A), uw)


def _transport(X: _JointMotion, x: Array, M: Array) -> Array:
    """``x + U @ M + W @ M^2`` for a jet x (N, K, 6): M = D^T moves twists, M = D wrenches."""
    N, K, _ = x.shape
    UW = (X.uw[K] @ x).reshape(N, 2, K, 6).transpose(0, 2, 1, 3).reshape(N, K, 12)
    return x + UW @ np.concatenate([M, M @ M])


def _cross(a: Array, b: Array) -> Array:
    """Cross products over the last axis (length 3)."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


_PAIRS = ((0, 0), (1, 0), (0, 1), (2, 0), (1, 1), (0, 2))  # (j, k - j) for k = 0, 1, 2


def _gyroscopic(v: Array, h: Array) -> Array:
    """Jet (N, 3, 6) of ``ad_v^T h = -(w x m + u x f, w x f)`` (v = (w, u), h = (m, f)), Leibniz."""
    V = v[:, [j for j, _ in _PAIRS]]
    H = h[:, [i for _, i in _PAIRS]]
    m = _cross(V[..., :3], H[..., :3]) + _cross(V[..., 3:], H[..., 3:])
    t = -np.concatenate([m, _cross(V[..., :3], H[..., 3:])], axis=-1)
    return np.stack([t[:, 0], t[:, 1] + t[:, 2], t[:, 3] + 2.0 * t[:, 4] + t[:, 5]], axis=1)


def time_derivatives(
    chain: Chain,
    q: ArrayLike,
    dq: ArrayLike,
    ddq: ArrayLike,
    dddq: ArrayLike,
    ddddq: ArrayLike,
) -> tuple[Array, Array, Array]:
    """Inverse dynamics tau and its first two time derivatives along a trajectory.

    Differentiates the RNEA of seed 000 eq. 1-5 twice in time (see the
    module docstring); this is the second-order inverse dynamics of seed 003
    (eq. 35 and 45 there, computed recursively instead of in closed form).
    ``q`` and its derivatives ``dq .. ddddq`` are (n,) or (N, n) (a single
    sample broadcasts against N). Returns ``(tau, tau_dot, tau_ddot)``, each
    (n,) for unbatched input, else (N, n). Gravity is included, no tool wrench.
    """
    (q, *qdots), batched = _check_trajectory(chain, q, dq, ddq, {"dddq": dddq, "ddddq": ddddq})
    N, n = q.shape
    A, G = chain.twists, chain.inertias
    base_v = np.zeros((N, 4, 6))
    base_g = np.zeros((N, 3, 6))
    base_g[:, 0, 3:] = -chain.gravity
    v, grav, F, motion = [None] * n, [None] * n, [None] * n, [None] * n
    for i in range(n):
        p = chain.parents[i]
        qjet = np.array([d[:, i] for d in qdots])  # (4, N)
        motion[i] = _joint_motion(A[i], chain.joint_kinds[i] == REVOLUTE, q[:, i], qjet)
        Dt = motion[i].D.T
        v_p, g_p = (base_v, base_g) if p < 0 else (v[p], grav[p])
        v[i] = _transport(motion[i], v_p, Dt) + qjet.T[:, :, None] * A[i]  # eq. 2, derivatives
        grav[i] = _transport(motion[i], g_p, Dt)
        a = v[i][:, 1:] + grav[i]  # eq. 3, gravity as the base acceleration
        F[i] = a @ G[i].T - _gyroscopic(v[i], v[i][:, :3] @ G[i].T)  # eq. 4
    tau = np.empty((3, N, n))
    for i in range(n - 1, -1, -1):
        tau[:, :, i] = (F[i] @ A[i]).T  # eq. 5
        p = chain.parents[i]
        if p >= 0:
            F[p] += _transport(motion[i], F[i], motion[i].D)
    return tuple(tau) if batched else tuple(tau[:, 0])


def mass_matrix_derivatives(
    chain: Chain, q: ArrayLike, dq: ArrayLike, ddq: ArrayLike
) -> tuple[Array, Array, Array]:
    """M(q), M_dot(q, dq) and M_ddot(q, dq, ddq) from the jets of S_i and I_i.

    Composite-rigid-body form in the world frame: ``M_jk = S_j^T IC_k S_k``
    for j an ancestor of k (``IC_k`` the sum of the world inertias of the
    subtree of k, seed 004 eq. 9.61 regrouped), differentiated with the
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
    """Inverse dynamics of flexible joints (Spong's model; seed 003 §1 motivation).

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
