"""Compiled derivatives of a loop's relative pose, per sample (eq. 2-4 of the loops module).

The loop at N configurations is given by its coordinates' twists ``T``
(N, C, 6), the factor each coordinate turns (``factor``, C), its global
coordinate (``index``, C) and the relative pose ``X`` (N, 4, 4)
(:class:`workbench.closed_chains.loops.LoopState`). A direction is a vector
of global coordinates per sample; factor l turns at ``zeta_l = sum_{c in l}
b[index[c]] T_c``. The kernels apply the closure's residual map (linear in
X, :mod:`workbench.closed_chains.closures`) to the derivatives of X:

* :func:`first`: ``c'[b]`` (N, D, m) for directions (N, D, width);
* :func:`second`: ``c''[a, b]`` (N, D, m) for paired directions;
* :func:`first_jacobian`: ``d c'[b] / d x_c`` (N, D, m, C) for every coordinate c;
* :func:`third`: ``c'''[a, a, w]`` (N, D, m).

One sample per loop iteration, compiled with numba and split across
threads by :func:`workbench.runtime.run_batched`.
"""

from __future__ import annotations

import numpy as np

from workbench.dynamics.inverse_dynamics import kernel_array
from workbench.runtime import jit, leaf, run_batched

KINDS = {"point": 0, "rotation": 1, "weld": 2, "revolute": 3, "planar": 4}


@leaf
def _residual(kind, Y, out):
    """The residual map of a closure of type ``kind`` applied to Y (4, 4) -> out (rows,)."""
    if kind == 0 or kind == 2 or kind == 3:
        out[0] = Y[0, 3]
        out[1] = Y[1, 3]
        out[2] = Y[2, 3]
    if kind == 1 or kind == 2:
        o = 3 if kind == 2 else 0
        out[o] = 0.5 * (Y[2, 1] - Y[1, 2])
        out[o + 1] = 0.5 * (Y[0, 2] - Y[2, 0])
        out[o + 2] = 0.5 * (Y[1, 0] - Y[0, 1])
    if kind == 3:
        out[3] = Y[0, 2]
        out[4] = Y[1, 2]
    if kind == 4:
        out[0] = Y[0, 3]
        out[1] = Y[1, 3]


@leaf
def _add_hat_product(x, y, scale, M):
    """M += scale [x][y] for twists x, y (6,): rotation [wx][wy], translation [wx] vy."""
    # [a][b] = b a^T - (a . b) I
    d = x[0] * y[0] + x[1] * y[1] + x[2] * y[2]
    for i in range(3):
        for j in range(3):
            M[i, j] += scale * y[i] * x[j]
        M[i, i] -= scale * d
    M[0, 3] += scale * (x[1] * y[5] - x[2] * y[4])
    M[1, 3] += scale * (x[2] * y[3] - x[0] * y[5])
    M[2, 3] += scale * (x[0] * y[4] - x[1] * y[3])


@leaf
def _add_hat(x, scale, M):
    """M += scale [x] for a twist x (6,)."""
    M[0, 1] -= scale * x[2]
    M[0, 2] += scale * x[1]
    M[1, 0] += scale * x[2]
    M[1, 2] -= scale * x[0]
    M[2, 0] -= scale * x[1]
    M[2, 1] += scale * x[0]
    M[0, 3] += scale * x[3]
    M[1, 3] += scale * x[4]
    M[2, 3] += scale * x[5]


@leaf
def _bracket(a, b, out):
    """out = ad_a b (Lie bracket of twists)."""
    out[0] = a[1] * b[2] - a[2] * b[1]
    out[1] = a[2] * b[0] - a[0] * b[2]
    out[2] = a[0] * b[1] - a[1] * b[0]
    out[3] = a[1] * b[5] - a[2] * b[4] - (b[1] * a[5] - b[2] * a[4])
    out[4] = a[2] * b[3] - a[0] * b[5] - (b[2] * a[3] - b[0] * a[5])
    out[5] = a[0] * b[4] - a[1] * b[3] - (b[0] * a[4] - b[1] * a[3])


@leaf
def _times_X(M, X, Y):
    """Y = M X for M with a zero bottom row (a sum of hat products)."""
    for i in range(3):
        for j in range(4):
            s = 0.0
            for k in range(4):
                s += M[i, k] * X[k, j]
            Y[i, j] = s
    for j in range(4):
        Y[3, j] = 0.0


@leaf
def _zeta(T, factor, index, b, z):
    """z (L, 6) = per factor the twist it turns at along coefficients b (width,)."""
    z[:] = 0.0
    for c in range(T.shape[0]):
        g = index[c]
        if g < b.shape[0]:
            coefficient = b[g]
            if coefficient != 0.0:
                for r in range(6):
                    z[factor[c], r] += coefficient * T[c, r]


@jit
def _first_kernel(kind, T, factor, index, X, B, out, start, stop):
    L = factor.max() + 1 if factor.shape[0] else 0
    z = np.zeros((L, 6))
    V = np.zeros(6)
    M = np.zeros((4, 4))
    Y = np.zeros((4, 4))
    for s in range(start, stop):
        for d in range(B.shape[1]):
            _zeta(T[s], factor, index, B[s, d], z)
            V[:] = 0.0
            for l in range(L):
                V += z[l]
            M[:] = 0.0
            _add_hat(V, 1.0, M)
            _times_X(M, X[s], Y)
            _residual(kind, Y, out[s, d])


@jit
def _second_kernel(kind, T, factor, index, X, A, B, out, start, stop):
    L = factor.max() + 1 if factor.shape[0] else 0
    za, zb = np.zeros((L, 6)), np.zeros((L, 6))
    pa, pb, x, y = np.zeros(6), np.zeros(6), np.zeros(6), np.zeros(6)
    M, Y = np.zeros((4, 4)), np.zeros((4, 4))
    for s in range(start, stop):
        for d in range(A.shape[1]):
            _zeta(T[s], factor, index, A[s, d], za)
            _zeta(T[s], factor, index, B[s, d], zb)
            M[:] = 0.0
            pa[:] = 0.0
            pb[:] = 0.0
            for l in range(L):
                for r in range(6):
                    x[r] = pa[r] + 0.5 * za[l, r]
                    y[r] = pb[r] + 0.5 * zb[l, r]
                _add_hat_product(x, zb[l], 1.0, M)
                _add_hat_product(y, za[l], 1.0, M)
                pa += za[l]
                pb += zb[l]
            _times_X(M, X[s], Y)
            _residual(kind, Y, out[s, d])


@jit
def _first_jacobian_kernel(kind, T, factor, index, X, B, out, start, stop):
    L = factor.max() + 1 if factor.shape[0] else 0
    C = factor.shape[0]
    z = np.zeros((L, 6))
    prefix, total = np.zeros((L, 6)), np.zeros(6)
    left, right = np.zeros(6), np.zeros(6)
    M, Y = np.zeros((4, 4)), np.zeros((4, 4))
    for s in range(start, stop):
        for d in range(B.shape[1]):
            _zeta(T[s], factor, index, B[s, d], z)
            total[:] = 0.0
            for l in range(L):
                prefix[l] = total
                total += z[l]
            for c in range(C):
                l = factor[c]
                for r in range(6):
                    left[r] = total[r] - prefix[l, r] - 0.5 * z[l, r]  # after l + half
                    right[r] = prefix[l, r] + 0.5 * z[l, r]
                M[:] = 0.0
                _add_hat_product(T[s, c], left, 1.0, M)
                _add_hat_product(right, T[s, c], 1.0, M)
                _times_X(M, X[s], Y)
                _residual(kind, Y, out[s, d, :, c])


@jit
def _third_kernel(kind, T, factor, index, X, A, W, out, start, stop):
    L = factor.max() + 1 if factor.shape[0] else 0
    za, zw, dza = np.zeros((L, 6)), np.zeros((L, 6)), np.zeros((L, 6))
    Zw, pa, dpa = np.zeros(6), np.zeros(6), np.zeros(6)
    inner, d_inner, V = np.zeros(6), np.zeros(6), np.zeros(6)
    H, dH, M = np.zeros((4, 4)), np.zeros((4, 4)), np.zeros((4, 4))
    Y, hat_V = np.zeros((4, 4)), np.zeros((4, 4))
    for s in range(start, stop):
        for d in range(A.shape[1]):
            _zeta(T[s], factor, index, A[s, d], za)
            _zeta(T[s], factor, index, W[s, d], zw)
            Zw[:] = 0.0
            for l in range(L):
                _bracket(Zw, za[l], dza[l])  # d_w zeta_l(a) = ad_{Z_l(w)} zeta_l(a)
                Zw += zw[l]
            H[:] = 0.0
            dH[:] = 0.0
            pa[:] = 0.0
            dpa[:] = 0.0
            for l in range(L):
                for r in range(6):
                    inner[r] = 2.0 * pa[r] + za[l, r]
                    d_inner[r] = 2.0 * dpa[r] + dza[l, r]
                _add_hat_product(inner, za[l], 1.0, H)
                _add_hat_product(d_inner, za[l], 1.0, dH)
                _add_hat_product(inner, dza[l], 1.0, dH)
                pa += za[l]
                dpa += dza[l]
            V[:] = 0.0
            for l in range(L):
                V += zw[l]
            hat_V[:] = 0.0
            _add_hat(V, 1.0, hat_V)
            # (dH + H [V]) X
            for i in range(4):
                for j in range(4):
                    acc = dH[i, j]
                    for k in range(4):
                        acc += H[i, k] * hat_V[k, j]
                    M[i, j] = acc
            _times_X(M, X[s], Y)
            _residual(kind, Y, out[s, d])


def first(kind: str, T, factor, index, X, B, rows: int) -> np.ndarray:
    """``c'[b]`` (N, D, rows) for coefficient directions B (N, D, width)."""
    B = kernel_array(B)
    out = np.zeros((*B.shape[:2], rows))
    run_batched(_first_kernel, len(B), KINDS[kind], T, factor, index, X, B, out)
    return out


def second(kind: str, T, factor, index, X, A, B, rows: int) -> np.ndarray:
    """``c''[a, b]`` (N, D, rows) for paired coefficient directions."""
    A, B = kernel_array(A), kernel_array(B)
    out = np.zeros((*A.shape[:2], rows))
    run_batched(_second_kernel, len(A), KINDS[kind], T, factor, index, X, A, B, out)
    return out


def first_jacobian(kind: str, T, factor, index, X, B, rows: int) -> np.ndarray:
    """``d c'[b] / d x_c`` (N, D, rows, C) for every loop coordinate c."""
    B = kernel_array(B)
    out = np.zeros((*B.shape[:2], rows, len(factor)))
    run_batched(_first_jacobian_kernel, len(B), KINDS[kind], T, factor, index, X, B, out)
    return out


def third(kind: str, T, factor, index, X, A, W, rows: int) -> np.ndarray:
    """``c'''[a, a, w]`` (N, D, rows) for paired coefficient directions."""
    A, W = kernel_array(A), kernel_array(W)
    out = np.zeros((*A.shape[:2], rows))
    run_batched(_third_kernel, len(A), KINDS[kind], T, factor, index, X, A, W, out)
    return out


@leaf
def _exp_twist(w, v, R, p):
    """R (3, 3), p (3,) of exp([xi]) for the twist xi = (w, v)."""
    theta = np.sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2])
    if theta < 1e-12:
        for i in range(3):
            for j in range(3):
                R[i, j] = 1.0 if i == j else 0.0
            p[i] = v[i]
        return
    k0, k1, k2 = w[0] / theta, w[1] / theta, w[2] / theta
    s, c = np.sin(theta), np.cos(theta)
    K = np.empty((3, 3))
    K[0, 0], K[0, 1], K[0, 2] = 0.0, -k2, k1
    K[1, 0], K[1, 1], K[1, 2] = k2, 0.0, -k0
    K[2, 0], K[2, 1], K[2, 2] = -k1, k0, 0.0
    K2 = K @ K
    for i in range(3):
        for j in range(3):
            eye = 1.0 if i == j else 0.0
            R[i, j] = eye + s * K[i, j] + (1.0 - c) * K2[i, j]
    # p = (I theta + (1 - cos) K + (theta - sin) K^2) v / theta
    for i in range(3):
        acc = 0.0
        for j in range(3):
            eye = 1.0 if i == j else 0.0
            acc += (eye * theta + (1.0 - c) * K[i, j] + (theta - s) * K2[i, j]) * v[j]
        p[i] = acc / theta


@leaf
def _Ad_apply(P, x, out):
    """out = Ad_P x for a pose P (4, 4) and a twist x (6,): (R w, p x R w + R v)."""
    for i in range(3):
        out[i] = P[i, 0] * x[0] + P[i, 1] * x[1] + P[i, 2] * x[2]
        out[3 + i] = P[i, 0] * x[3] + P[i, 1] * x[4] + P[i, 2] * x[5]
    out[3] += P[1, 3] * out[2] - P[2, 3] * out[1]
    out[4] += P[2, 3] * out[0] - P[0, 3] * out[2]
    out[5] += P[0, 3] * out[1] - P[1, 3] * out[0]


@jit
def _pose_kernel(twists, joint, sign, M_b_inverse, M_a, q, T, X, start, stop):
    L = joint.shape[0]
    P, E, Q = np.empty((4, 4)), np.eye(4), np.empty((4, 4))
    R, p, w, v, unit = np.empty((3, 3)), np.empty(3), np.empty(3), np.empty(3), np.zeros(6)
    for s in range(start, stop):
        P[:] = M_b_inverse
        c = 0
        for l in range(L):
            if joint[l] >= 0:
                for r in range(6):
                    unit[r] = sign[l] * twists[joint[l], r]
                _Ad_apply(P, unit, T[s, c])
                c += 1
                theta = q[s, joint[l]]
                for r in range(3):
                    w[r] = unit[r] * theta
                    v[r] = unit[3 + r] * theta
                _exp_twist(w, v, R, p)
                E[:3, :3] = R
                E[:3, 3] = p
                Q[:] = P @ E
                P[:] = Q
            else:
                for k in range(6):
                    unit[:] = 0.0
                    unit[k] = sign[l]
                    _Ad_apply(P, unit, T[s, c])
                    c += 1
        X[s] = P @ M_a


def loop_pose(twists, joint, sign, M_b_inverse, M_a, q) -> tuple[np.ndarray, np.ndarray]:
    """The loop's coordinate twists T (N, C, 6) and relative pose X (N, 4, 4) (loops module).

    ``joint`` (L,) the tree joint of each factor (-1: an eta factor with six
    coordinates), ``sign`` (L,) its sign, ``twists`` the tree's joint twists.
    """
    C = int(np.sum(np.where(joint >= 0, 1, 6)))
    N = len(q)
    T, X = np.empty((N, C, 6)), np.empty((N, 4, 4))
    run_batched(
        _pose_kernel, N, kernel_array(twists), joint, sign, kernel_array(M_b_inverse),
        kernel_array(M_a), kernel_array(q), T, X,
    )  # fmt: skip
    return T, X
