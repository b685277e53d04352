"""Inertial parameters phi, spatial inertias and their motion ([Kwon] §5).

Conventions (docs/conventions.md):

* ``phi = [m, h_x, h_y, h_z, I_xx, I_yy, I_zz, I_xy, I_xz, I_yz]`` with
  ``h = m c`` the first moment and ``I`` the rotational inertia about the
  frame origin as a tensor (``I_xy = -integral x y dm`` is the matrix entry).
* The spatial inertia in (omega, v) order is
  ``G = [[I, [h]], [[h]^T, m 1]]`` ([Kwon] eq. 31), so that the kinetic
  energy is ``V^T G V / 2``.
* Pinocchio's ``toDynamicParameters`` orders the same numbers as
  ``[m, h_x, h_y, h_z, I_xx, I_xy, I_yy, I_xz, I_yz, I_zz]``; the one
  converter is :func:`phi_to_pinocchio` / :func:`phi_from_pinocchio`.

All functions take a leading batch shape.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from workbench import lie
from workbench.lie import Array

# phi index -> (row, col) of the rotational inertia
_I_INDEX = ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))
# our phi order -> Pinocchio's dynamic-parameter order
_TO_PINOCCHIO = np.array([0, 1, 2, 3, 4, 7, 5, 8, 9, 6])
_FROM_PINOCCHIO = np.argsort(_TO_PINOCCHIO)


def phi_to_pinocchio(phi: ArrayLike) -> Array:
    """Reorder phi (project order) into Pinocchio's dynamic-parameter order."""
    return np.asarray(phi, dtype=float)[..., _TO_PINOCCHIO]


def phi_from_pinocchio(pi: ArrayLike) -> Array:
    """Reorder Pinocchio's dynamic parameters into the project's phi order."""
    return np.asarray(pi, dtype=float)[..., _FROM_PINOCCHIO]


def rotational_inertia(phi: ArrayLike) -> Array:
    """The 3x3 rotational inertia about the origin encoded in phi."""
    phi = np.asarray(phi, dtype=float)
    I = np.empty((*phi.shape[:-1], 3, 3))
    for k, (r, c) in enumerate(_I_INDEX):
        I[..., r, c] = phi[..., 4 + k]
        I[..., c, r] = phi[..., 4 + k]
    return I


def matrix_from_phi(phi: ArrayLike) -> Array:
    """Spatial inertia G (6x6, (omega, v) order) of phi; [Kwon] eq. 31."""
    phi = np.asarray(phi, dtype=float)
    G = np.zeros((*phi.shape[:-1], 6, 6))
    G[..., :3, :3] = rotational_inertia(phi)
    H = lie.hat3(phi[..., 1:4])
    G[..., :3, 3:] = H
    G[..., 3:, :3] = np.swapaxes(H, -1, -2)
    G[..., 3:, 3:] = phi[..., 0, None, None] * np.eye(3)
    return G


def phi_from_matrix(G: ArrayLike) -> Array:
    """Inverse of :func:`matrix_from_phi` (reads the symmetric blocks)."""
    G = np.asarray(G, dtype=float)
    phi = np.empty((*G.shape[:-2], 10))
    phi[..., 0] = np.trace(G[..., 3:, 3:], axis1=-2, axis2=-1) / 3.0
    phi[..., 1:4] = lie.vee3(G[..., :3, 3:])
    for k, (r, c) in enumerate(_I_INDEX):
        phi[..., 4 + k] = 0.5 * (G[..., r, c] + G[..., c, r])
    return phi


def moved_phi(phi: ArrayLike, T: ArrayLike) -> Array:
    """phi of the body moved by T: ``G = Ad_T^{-T} G_bar Ad_T^{-1}`` ([Kwon] eq. 29).

    ``phi`` is given in a frame that the rigid motion ``T`` (4x4) carries
    along; the result is expressed in the original frame.
    """
    Ad_inv = lie.Ad(lie.inverse(T))
    G = np.swapaxes(Ad_inv, -1, -2) @ matrix_from_phi(phi) @ Ad_inv
    return phi_from_matrix(G)


def dphi_deta(phi: ArrayLike) -> Array:
    """d phi / d eta (10x6) of a moved inertia under ``T <- exp([eta]) T`` at eta = 0.

    [Kwon] eq. 30-34: ``dG = -ad_eta^T G - G ad_eta``, i.e. with
    ``eta = (w, v)``: ``dm = 0``, ``dh = w x h + m v`` and
    ``dI = [w] I - I [w] - [v][h] - [h][v]``. The printed eq. 33 reads
    ``-[h] w``, which is the same vector; the tables that follow eq. 34
    are the entries of eq. 32 written out. ``phi`` is the inertia *after*
    the motion (the current one). For a non-zero eta use
    ``dphi_deta(phi) @ lie.left_jacobian_se3(eta)``.
    """
    phi = np.asarray(phi, dtype=float)
    m = phi[..., 0]
    h = phi[..., 1:4]
    I = rotational_inertia(phi)
    out = np.zeros((*phi.shape[:-1], 10, 6))
    eye = np.eye(3)
    for k in range(3):
        e = eye[k]
        # rotation w = e_k
        W = lie.hat3(e)
        dI_w = W @ I - I @ W
        out[..., 1:4, k] = np.cross(e, h)
        # translation v = e_k
        Vh = lie.hat3(e) @ lie.hat3(h)
        dI_v = -(Vh + np.swapaxes(Vh, -1, -2))
        out[..., 1:4, 3 + k] = m[..., None] * e
        for j, (r, c) in enumerate(_I_INDEX):
            out[..., 4 + j, k] = dI_w[..., r, c]
            out[..., 4 + j, 3 + k] = dI_v[..., r, c]
    return out


def phi_from_com(mass: ArrayLike, com: ArrayLike, inertia_com: ArrayLike) -> Array:
    """phi about the frame origin from mass, centre of mass and the inertia about the COM.

    ``h = m c`` and ``I_o = I_c + m [c]^T [c]`` (parallel axis theorem).
    """
    m = np.asarray(mass, dtype=float)
    c = np.asarray(com, dtype=float)
    C = lie.hat3(c)
    I_o = np.asarray(inertia_com, dtype=float) + m[..., None, None] * (np.swapaxes(C, -1, -2) @ C)
    phi = np.empty((*m.shape, 10))
    phi[..., 0] = m
    phi[..., 1:4] = m[..., None] * c
    for k, (r, col) in enumerate(_I_INDEX):
        phi[..., 4 + k] = I_o[..., r, col]
    return phi


def com_from_phi(phi: ArrayLike) -> tuple[Array, Array, Array]:
    """(mass, centre of mass, inertia about the COM) of phi; the COM of a massless body is 0."""
    phi = np.asarray(phi, dtype=float)
    m = phi[..., 0]
    safe = np.where(m > 0.0, m, 1.0)
    c = np.where((m > 0.0)[..., None], phi[..., 1:4] / safe[..., None], 0.0)
    C = lie.hat3(c)
    I_c = rotational_inertia(phi) - m[..., None, None] * (np.swapaxes(C, -1, -2) @ C)
    return m, c, I_c


def motion_matrix(T: ArrayLike) -> Array:
    """The 10x10 matrix L(T) with ``moved_phi(phi, T) == L(T) @ phi`` (eq. 29 is linear in phi)."""
    T = np.asarray(T, dtype=float)
    basis = np.broadcast_to(np.eye(10), (*T.shape[:-2], 10, 10))
    return np.swapaxes(moved_phi(np.swapaxes(basis, -1, -2), T[..., None, :, :]), -1, -2)


def pseudo_inertia(phi: Array) -> Array:
    """Pseudo-inertia matrices (..., 4, 4): [[tr(I)/2 1 - I, h], [h^T, m]].

    Wensing, Kim and Slotine: phi is physically consistent (a mass
    distribution exists) exactly when this matrix is positive definite; the
    test holds in any frame (a rigid motion acts by congruence).
    """
    I = rotational_inertia(phi)
    J = np.zeros((*phi.shape[:-1], 4, 4))
    J[..., :3, :3] = 0.5 * np.trace(I, axis1=-2, axis2=-1)[..., None, None] * np.eye(3) - I
    J[..., :3, 3] = J[..., 3, :3] = phi[..., 1:4]
    J[..., 3, 3] = phi[..., 0]
    return J


def phi_from_pseudo_inertia(J: ArrayLike) -> Array:
    """Inverse of :func:`pseudo_inertia`: phi (..., 10) of J (..., 4, 4)."""
    J = np.asarray(J, dtype=float)
    S = J[..., :3, :3]
    I = np.trace(S, axis1=-2, axis2=-1)[..., None, None] * np.eye(3) - S
    phi = np.empty((*J.shape[:-2], 10))
    phi[..., 0] = J[..., 3, 3]
    phi[..., 1:4] = J[..., :3, 3]
    for k, (r, c) in enumerate(_I_INDEX):
        phi[..., 4 + k] = I[..., r, c]
    return phi
