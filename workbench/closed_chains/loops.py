"""Relative poses of closure frames as products of exponentials, and their derivatives.

A closure between frames A (on link a) and B (on link b) depends on the
relative pose ``X = T_B^{-1} T_A``. The joints both links share cancel, and
what remains is one serial product over the loop (Kwon's normal form with
eta, docs: seed 000 eq. 6):

    X = M_B(eta)^{-1} [prod_{j in b's branch, leaf first} E_j(eta)^{-1}]
                      [prod_{j in a's branch, root first} E_j(eta)] M_A(eta),
    E_j(eta) = exp([eta_j]) exp([A_j] q_j) exp(-[eta_j]),

with ``M(eta) = exp([eta_k]) M`` for a link's own frame (eta block k) and
``M`` fixed for an attached frame. Each factor is the exponential of a
coordinate (a joint value, or eta at eta = 0) times a twist, so moving the
coordinates by ``delta`` gives

    X(x + delta) = prod_l exp(delta_l [S_l]) X(x),   S_l = Ad_{P_l} xi_l,     (1)

``P_l`` the product of the factors before factor l and ``xi_l`` its twist.
Along a direction w (joint values u, eta e) factor l turns at the twist
``zeta_l(w)`` (``sign u_j S_l`` for a joint, ``sign Ad_{P_l} e_k`` for eta
block k). Differentiating (1), with ``Z_l(w) = sum_{k<l} zeta_k(w)``:

    dX[w]      = [V(w)] X,  V(w) = sum_l zeta_l(w),                         (2)
    d2X[a, b]  = sum_l ([Z_l(a) + zeta_l(a)/2][zeta_l(b)]
                        + [Z_l(b) + zeta_l(b)/2][zeta_l(a)]) X,              (3)
    d3X[a, a, w] = d_w of (3) at b = a, with d_w zeta_l(a) = ad_{Z_l(w)} zeta_l(a)
                   (the twists move with the factors before them) and
                   d_w X = [V(w)] X.                                         (4)

Eq. (3) is exact for joint factors and for one eta factor with joint
factors; second derivatives between two eta components are not needed
anywhere and not provided. Arrays: twists (N, D, L, 6) for N samples, D
directions, L factors; results (N, D, 4, 4).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench import lie
from workbench.chain import Chain
from workbench.lie import Array


@dataclass(frozen=True)
class Factor:
    """A factor of a loop product: ``exp(sign [A_joint] q_joint)`` or ``exp(sign [eta_block])``."""

    joint: int  # tree joint index, or -1 for an eta factor
    sign: float
    block: int  # eta block of an eta factor, or -1


def loop_factors(chain: Chain, link_a: int, block_a: int | None,
                 link_b: int, block_b: int | None) -> tuple[Factor, ...]:  # fmt: skip
    """The factors of ``T_B^{-1} T_A`` in product order (module docstring)."""
    path_a = np.flatnonzero(chain.ancestors[:, link_a]) if link_a >= 0 else np.zeros(0, int)
    path_b = np.flatnonzero(chain.ancestors[:, link_b]) if link_b >= 0 else np.zeros(0, int)
    only_a = [int(j) for j in path_a if j not in path_b]
    only_b = [int(j) for j in path_b if j not in path_a]
    factors = []
    if block_b is not None:
        factors.append(Factor(-1, -1.0, block_b))
    for sign, joints in ((-1.0, only_b[::-1]), (1.0, only_a)):
        for j in joints:
            factors += [Factor(-1, 1.0, j), Factor(j, sign, -1), Factor(-1, -1.0, j)]
    if block_a is not None:
        factors.append(Factor(-1, 1.0, block_a))
    return tuple(factors)


def bracket(a: Array, b: Array) -> Array:
    """Lie bracket ``ad_a b`` of twists (..., 6), (omega, v) order."""
    wa, va, wb, vb = a[..., :3], a[..., 3:], b[..., :3], b[..., 3:]
    return np.concatenate([np.cross(wa, wb), np.cross(wa, vb) - np.cross(wb, va)], axis=-1)


def hat_product(a: Array, b: Array) -> Array:
    """``[a][b]`` (..., 4, 4) for twists a, b (..., 6), broadcasting."""
    wa, wb, vb = a[..., :3], b[..., :3], b[..., 3:]
    wa, wb = np.broadcast_arrays(wa, wb)
    out = np.zeros((*wa.shape[:-1], 4, 4))
    # [x][y] = y x^T - (x . y) I for 3-vectors
    out[..., :3, :3] = wb[..., :, None] * wa[..., None, :]
    out[..., :3, :3] -= np.sum(wa * wb, axis=-1)[..., None, None] * np.eye(3)
    out[..., :3, 3] = np.cross(wa, vb)
    return out


def hat_products(a: Array, b: Array) -> Array:
    """``sum_l [a_l][b_l]`` (..., 4, 4) for twists (..., L, 6), summed over L."""
    wa, wb, vb = a[..., :3], b[..., :3], b[..., 3:]
    out = np.zeros((*a.shape[:-2], 4, 4))
    out[..., :3, :3] = np.einsum("...li,...lj->...ij", wb, wa)
    out[..., :3, :3] -= np.einsum("...li,...li->...", wa, wb)[..., None, None] * np.eye(3)
    out[..., :3, 3] = np.cross(wa, vb).sum(axis=-2)
    return out


def prefix(z: Array) -> Array:
    """``Z_l = sum_{k<l} z_k`` along the factor axis (-2)."""
    return np.cumsum(z, axis=-2) - z


class LoopState:
    """X and the loop's twists at N configurations, for one closure (module docstring).

    The loop's *coordinates* are its joint values and, for every eta
    factor, the six components of that eta block: coordinate c sits in
    factor ``factor[c]``, turns at the twist ``T[:, c]`` and is global
    coordinate ``index[c]`` (tree joint j, or ``n + 6 block + k`` for eta
    component k of a tree with n joints).
    """

    def __init__(self, chain: Chain, factors: tuple[Factor, ...], M_a: Array, M_b: Array,
                 q: Array):  # fmt: skip
        N, n = q.shape
        P = np.broadcast_to(lie.inverse(M_b), (N, 4, 4))
        twists = chain.twists
        T, factor, index = [], [], []
        for l, f in enumerate(factors):
            Ad = lie.Ad(P)
            if f.joint >= 0:
                A = f.sign * twists[f.joint]
                T.append((Ad @ A)[:, None])
                factor.append(l)
                index.append(f.joint)
                P = P @ lie.exp_se3(A * q[:, f.joint, None])
            else:
                T.append(np.swapaxes(f.sign * Ad, 1, 2))  # columns Ad e_k as rows
                factor += [l] * 6
                index += list(n + 6 * f.block + np.arange(6))
        self.X = P @ M_a
        self.T = np.concatenate(T, axis=1) if T else np.zeros((N, 0, 6))
        self.factor = np.array(factor, dtype=int)
        self.index = np.array(index, dtype=int)
        self.L = len(factors)
        self.joint_coordinates = self.index < n

    def zeta(self, u: Array, e: Array | None) -> Array:
        """Per factor the twist (N, D, L, 6) it turns at along the directions (u, e)."""
        N, D = u.shape[:2]
        x = u if e is None else np.concatenate([u, e.reshape(N, D, -1)], axis=2)
        keep = self.index < x.shape[2]
        coefficients = x[:, :, self.index[keep]]  # (N, D, C)
        z = np.zeros((N, D, self.L, 6))
        np.add.at(
            np.moveaxis(z, 2, 0), self.factor[keep],
            np.moveaxis(coefficients[..., None] * self.T[:, None, keep], 2, 0),
        )  # fmt: skip
        return z

    def first(self, za: Array) -> Array:
        """``dX`` (N, D, 4, 4) along directions with factor twists ``za``, eq. (2)."""
        return lie.hat(za.sum(axis=-2)) @ self.X[:, None]

    def first_jacobian(self, zb: Array, keep: np.ndarray) -> Array:
        """``d(dX[b]) / dx_c`` (N, D, C', 4, 4) for the loop coordinates c in ``keep``, eq. (3).

        A unit coordinate of factor l turns that factor alone, so eq. (3)
        with a = e_c reads ``[T_c][R_l + zeta_l(b)/2] + [Z_l(b) + zeta_l(b)/2][T_c]``
        with ``R_l`` the sum of the twists after factor l.
        """
        Z = prefix(zb)
        half = zb / 2
        after = zb.sum(axis=-2, keepdims=True) - Z - zb
        l = self.factor[keep]
        T = self.T[:, None, keep]
        G = hat_product(T, (after + half)[:, :, l]) + hat_product((Z + half)[:, :, l], T)
        return G @ self.X[:, None, None]

    def second(self, za: Array, zb: Array) -> Array:
        """``d2X[a, b]`` (N, D, 4, 4), eq. (3)."""
        H = hat_products(prefix(za) + za / 2, zb) + hat_products(prefix(zb) + zb / 2, za)
        return H @ self.X[:, None]

    def third(self, za: Array, zw: Array) -> Array:
        """``d3X[a, a, w]`` (N, D, 4, 4), eq. (4)."""
        Zw = prefix(zw)
        dza = bracket(Zw, za)
        inner = 2 * prefix(za) + za
        d_inner = 2 * prefix(dza) + dza
        H = hat_products(inner, za)  # d2X[a, a] X^{-1}
        dH = hat_products(d_inner, za) + hat_products(inner, dza)
        return (dH + H @ lie.hat(zw.sum(axis=-2))) @ self.X[:, None]
