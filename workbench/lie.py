"""Batched SE(3) / se(3) in (omega, v) order.

Conventions ([Kwon], [MR]):

* A twist is ``V = (omega, v)`` and a wrench ``F = (m, f)``; both are arrays
  whose last axis has length 6. Every function accepts any leading batch
  shape ``(..., 6)`` (or ``(..., 4, 4)`` for transforms) and keeps it.
* ``hat(V)`` is the 4x4 matrix ``[[hat3(omega), v], [0, 0]]``.
* ``Ad(T) = [[R, 0], [[p] R, R]]``, ``ad(V) = [[[omega], 0], [[v], [omega]]]``.
* ``ad_star(F)`` is [Kwon] eq. 10, ``[[[m], [f]], [[f], 0]]``, so that
  ``ad(A).T @ F == ad_star(F) @ A``.

Pinocchio orders motions and forces linear part first, ``(v, omega)``; the
one conversion lives in :func:`pinocchio_vector` and
:func:`pinocchio_matrix` and is used at the Pinocchio boundary only.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

Array = NDArray[np.float64]

# Below this rotation angle the trigonometric coefficients are evaluated by
# their Taylor series to t^6 (truncation error < 1e-20 there); above it the
# closed forms lose at most eps / t^2 ~ 1e-12 relative to cancellation.
_SMALL_ANGLE = 1e-2

_PINOCCHIO_ORDER = np.array([3, 4, 5, 0, 1, 2])


def pinocchio_vector(x: ArrayLike) -> Array:
    """Swap the halves of 6-vectors: (omega, v) <-> Pinocchio's (v, omega).

    The swap is its own inverse, so it converts in both directions.
    """
    return np.asarray(x, dtype=float)[..., _PINOCCHIO_ORDER]


def pinocchio_matrix(M: ArrayLike) -> Array:
    """Swap both row and column halves of 6x6 matrices (an involution)."""
    M = np.asarray(M, dtype=float)
    return M[..., _PINOCCHIO_ORDER, :][..., :, _PINOCCHIO_ORDER]


def hat3(w: ArrayLike) -> Array:
    """Skew-symmetric matrix ``[w]`` with ``[w] @ x == cross(w, x)``; (..., 3) -> (..., 3, 3)."""
    w = np.asarray(w, dtype=float)
    S = np.zeros((*w.shape[:-1], 3, 3))
    S[..., 0, 1], S[..., 0, 2] = -w[..., 2], w[..., 1]
    S[..., 1, 0], S[..., 1, 2] = w[..., 2], -w[..., 0]
    S[..., 2, 0], S[..., 2, 1] = -w[..., 1], w[..., 0]
    return S


def vee3(S: ArrayLike) -> Array:
    """Inverse of :func:`hat3` (uses the skew part of ``S``)."""
    S = np.asarray(S, dtype=float)
    return 0.5 * np.stack(
        [S[..., 2, 1] - S[..., 1, 2], S[..., 0, 2] - S[..., 2, 0], S[..., 1, 0] - S[..., 0, 1]],
        axis=-1,
    )


def hat(V: ArrayLike) -> Array:
    """se(3) matrix of a twist (omega, v); (..., 6) -> (..., 4, 4)."""
    V = np.asarray(V, dtype=float)
    X = np.zeros((*V.shape[:-1], 4, 4))
    X[..., :3, :3] = hat3(V[..., :3])
    X[..., :3, 3] = V[..., 3:]
    return X


def vee(X: ArrayLike) -> Array:
    """Inverse of :func:`hat`; (..., 4, 4) -> (..., 6)."""
    X = np.asarray(X, dtype=float)
    return np.concatenate([vee3(X[..., :3, :3]), X[..., :3, 3]], axis=-1)


def cross(a: ArrayLike, b: ArrayLike) -> Array:
    """a x b over the last axis with broadcasting (np.cross without its per-call overhead)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def _rotation_coefficients(theta: Array) -> tuple[Array, Array, Array]:
    """a = sin(t)/t, b = (1 - cos t)/t^2, c = (t - sin t)/t^3, with Taylor series near 0."""
    small = theta < _SMALL_ANGLE
    t = np.where(small, 1.0, theta)
    t2 = theta * theta
    t4 = t2 * t2
    t6 = t4 * t2
    sin = np.sin(t)
    a = np.where(small, 1.0 - t2 / 6.0 + t4 / 120.0 - t6 / 5040.0, sin / t)
    b = np.where(small, 0.5 - t2 / 24.0 + t4 / 720.0 - t6 / 40320.0, (1.0 - np.cos(t)) / (t * t))
    c = np.where(small, 1.0 / 6.0 - t2 / 120.0 + t4 / 5040.0 - t6 / 362880.0, (t - sin) / t**3)
    return a, b, c


def exp_so3(w: ArrayLike) -> Array:
    """Rotation matrix exp([w]) (Rodrigues); (..., 3) -> (..., 3, 3)."""
    w = np.asarray(w, dtype=float)
    a, b, _ = _rotation_coefficients(np.linalg.norm(w, axis=-1))
    W = hat3(w)
    return np.eye(3) + a[..., None, None] * W + b[..., None, None] * (W @ W)


def log_so3(R: ArrayLike) -> Array:
    """Rotation vector w with exp([w]) = R, |w| in [0, pi]; (..., 3, 3) -> (..., 3).

    Uses the skew part away from pi and the symmetric part near pi, where
    the skew part loses precision.
    """
    R = np.asarray(R, dtype=float)
    cos_t = (np.trace(R, axis1=-2, axis2=-1) - 1.0) / 2.0
    skew = vee3(R)  # = sin(theta) * axis
    theta = np.arctan2(np.linalg.norm(skew, axis=-1), cos_t)
    a, _, _ = _rotation_coefficients(theta)
    w = skew / np.where(theta < 3.0, a, 1.0)[..., None]
    near_pi = theta >= 3.0
    if np.any(near_pi):
        # R + R^T = 2 cos(t) I + 2 (1 - cos t) u u^T: take the largest column.
        Rn = R[near_pi]
        B = (Rn + np.swapaxes(Rn, -1, -2)) / 2.0 - cos_t[near_pi, None, None] * np.eye(3)
        col = np.argmax(np.diagonal(B, axis1=-2, axis2=-1), axis=-1)
        u = np.take_along_axis(B, col[:, None, None], axis=-1)[..., 0]
        u /= np.linalg.norm(u, axis=-1, keepdims=True)
        # Fix the sign of u with the skew part (sin(theta) u).
        sign = np.where(np.sum(u * skew[near_pi], axis=-1) < 0.0, -1.0, 1.0)
        w[near_pi] = (sign * theta[near_pi])[:, None] * u
    return w


def left_jacobian_so3(w: ArrayLike) -> Array:
    """Left Jacobian of SO(3), I + b [w] + c [w]^2; (..., 3) -> (..., 3, 3)."""
    w = np.asarray(w, dtype=float)
    _, b, c = _rotation_coefficients(np.linalg.norm(w, axis=-1))
    W = hat3(w)
    return np.eye(3) + b[..., None, None] * W + c[..., None, None] * (W @ W)


def left_jacobian_inverse_so3(w: ArrayLike) -> Array:
    """Inverse of :func:`left_jacobian_so3`: I - [w]/2 + k [w]^2, k = (1 - a / (2 b)) / t^2.

    It maps a left perturbation of R = exp([w]) back to a change of w:
    ``log(exp([d]) R) = w + J_l^{-1}(w) d`` to first order; (..., 3) -> (..., 3, 3).
    """
    w = np.asarray(w, dtype=float)
    theta = np.linalg.norm(w, axis=-1)
    a, b, _ = _rotation_coefficients(theta)
    small = theta < _SMALL_ANGLE
    t2 = theta * theta
    series = 1.0 / 12.0 + t2 / 720.0 + t2 * t2 / 30240.0 + t2**3 / 1209600.0
    k = np.where(small, series, (1.0 - a / (2.0 * b)) / np.where(small, 1.0, t2))
    W = hat3(w)
    return np.eye(3) - 0.5 * W + k[..., None, None] * (W @ W)


def quaternion_to_matrix(quat: ArrayLike) -> Array:
    """Rotation matrices of unit quaternions (qx, qy, qz, qw); (..., 4) -> (..., 3, 3)."""
    x, y, z, w = np.moveaxis(np.asarray(quat, dtype=float), -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
            np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
            np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def matrix_to_quaternion(R: ArrayLike) -> Array:
    """Unit quaternions (qx, qy, qz, qw), qw >= 0, of rotations; (..., 3, 3) -> (..., 4)."""
    w = log_so3(R)
    angle = np.linalg.norm(w, axis=-1, keepdims=True)
    axis = np.divide(w, angle, out=np.zeros_like(w), where=angle > 0)
    return np.concatenate([axis * np.sin(angle / 2), np.cos(angle / 2)], axis=-1)


def rpy_to_matrix(rpy: ArrayLike) -> Array:
    """``Rz(yaw) Ry(pitch) Rx(roll)`` of (roll, pitch, yaw) as in URDF; (..., 3) -> (..., 3, 3)."""
    rpy = np.asarray(rpy, dtype=float)
    e = np.eye(3)
    return (
        exp_so3(rpy[..., 2, None] * e[2])
        @ exp_so3(rpy[..., 1, None] * e[1])
        @ exp_so3(rpy[..., 0, None] * e[0])
    )


def matrix_to_rpy(R: ArrayLike) -> Array:
    """(roll, pitch, yaw) with ``R = Rz(yaw) Ry(pitch) Rx(roll)`` (URDF), pitch in [-pi/2, pi/2];
    (..., 3, 3) -> (..., 3). The inverse of :func:`rpy_to_matrix` away from pitch = +-pi/2."""
    R = np.asarray(R, dtype=float)
    roll = np.arctan2(R[..., 2, 1], R[..., 2, 2])
    pitch = np.arctan2(-R[..., 2, 0], np.hypot(R[..., 2, 1], R[..., 2, 2]))
    yaw = np.arctan2(R[..., 1, 0], R[..., 0, 0])
    return np.stack([roll, pitch, yaw], axis=-1)


def exp_se3(V: ArrayLike) -> Array:
    """Homogeneous transform exp([V]); (..., 6) -> (..., 4, 4)."""
    V = np.asarray(V, dtype=float)
    w = V[..., :3]
    a, b, c = _rotation_coefficients(np.linalg.norm(w, axis=-1))
    W = hat3(w)
    W2 = W @ W
    T = np.zeros((*V.shape[:-1], 4, 4))
    T[..., :3, :3] = np.eye(3) + a[..., None, None] * W + b[..., None, None] * W2  # exp_so3
    J = np.eye(3) + b[..., None, None] * W + c[..., None, None] * W2  # left_jacobian_so3
    T[..., :3, 3] = np.einsum("...ij,...j->...i", J, V[..., 3:])
    T[..., 3, 3] = 1.0
    return T


def log_se3(T: ArrayLike) -> Array:
    """Twist V with exp([V]) = T, rotation angle in [0, pi]; (..., 4, 4) -> (..., 6)."""
    T = np.asarray(T, dtype=float)
    w = log_so3(T[..., :3, :3])
    v = np.einsum("...ij,...j->...i", left_jacobian_inverse_so3(w), T[..., :3, 3])
    return np.concatenate([w, v], axis=-1)


def inverse(T: ArrayLike) -> Array:
    """Inverse of homogeneous transforms; (..., 4, 4) -> (..., 4, 4)."""
    T = np.asarray(T, dtype=float)
    Rt = np.swapaxes(T[..., :3, :3], -1, -2)
    Ti = np.zeros_like(T)
    Ti[..., :3, :3] = Rt
    Ti[..., :3, 3] = -np.einsum("...ij,...j->...i", Rt, T[..., :3, 3])
    Ti[..., 3, 3] = 1.0
    return Ti


def Ad(T: ArrayLike) -> Array:
    """Adjoint of a transform, [[R, 0], [[p] R, R]]; (..., 4, 4) -> (..., 6, 6)."""
    T = np.asarray(T, dtype=float)
    R = T[..., :3, :3]
    X = np.zeros((*T.shape[:-2], 6, 6))
    X[..., :3, :3] = R
    X[..., 3:, 3:] = R
    X[..., 3:, :3] = hat3(T[..., :3, 3]) @ R
    return X


def ad(V: ArrayLike) -> Array:
    """Small adjoint (Lie bracket) of a twist, [[[w], 0], [[v], [w]]]; (..., 6) -> (..., 6, 6)."""
    V = np.asarray(V, dtype=float)
    X = np.zeros((*V.shape[:-1], 6, 6))
    W = hat3(V[..., :3])
    X[..., :3, :3] = W
    X[..., 3:, 3:] = W
    X[..., 3:, :3] = hat3(V[..., 3:])
    return X


def ad_star(F: ArrayLike) -> Array:
    """[Kwon] eq. 10: [[[m], [f]], [[f], 0]] for a wrench F = (m, f).

    It swaps the roles in the dual adjoint: ``ad(A).T @ F == ad_star(F) @ A``.
    """
    F = np.asarray(F, dtype=float)
    X = np.zeros((*F.shape[:-1], 6, 6))
    Fm, Ff = hat3(F[..., :3]), hat3(F[..., 3:])
    X[..., :3, :3] = Fm
    X[..., :3, 3:] = Ff
    X[..., 3:, :3] = Ff
    return X


def left_jacobian_se3(V: ArrayLike) -> Array:
    """Left Jacobian of SE(3): exp([V + dV]) = exp([J(V) dV]) exp([V]) to first order.

    ``J = sum_k ad(V)^k / (k+1)!``, evaluated in closed form from the powers
    of ``ad(V)`` (the quartic annihilating polynomial of ad on se(3)) away
    from zero and by its series near zero; (..., 6) -> (..., 6, 6).
    """
    V = np.asarray(V, dtype=float)
    X = ad(V)
    X2 = X @ X
    X3 = X2 @ X
    X4 = X3 @ X
    t = np.linalg.norm(V[..., :3], axis=-1)
    small = t < 1e-2
    s = np.where(small, 1.0, t)
    sin, cos = np.sin(s), np.cos(s)
    c1 = np.where(small, 0.5 - t**4 / 720.0, (4.0 - s * sin - 4.0 * cos) / (2 * s**2))
    c2 = np.where(small, 1.0 / 6.0 - t**4 / 5040.0, (4.0 * s - 5.0 * sin + s * cos) / (2 * s**3))
    c3 = np.where(
        small, 1.0 / 24.0 - t**2 / 360.0 + t**4 / 13440.0, (2.0 - s * sin - 2.0 * cos) / (2 * s**4)
    )
    c4 = np.where(
        small,
        1.0 / 120.0 - t**2 / 2520.0 + t**4 / 120960.0,
        (2.0 * s - 3.0 * sin + s * cos) / (2 * s**5),
    )
    return (
        np.eye(6)
        + c1[..., None, None] * X
        + c2[..., None, None] * X2
        + c3[..., None, None] * X3
        + c4[..., None, None] * X4
    )
