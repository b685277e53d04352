"""Forward kinematics of frames on a tree and the motion of every link.

Zero-reference normal form ([Kwon] §2, footnote 1): a frame fixed to link k at
``M`` (its pose in the base frame at q = 0) is at

    T(q) = prod_{j on the path to k} exp([A_j] q_j) M.

The derivatives of such poses with respect to eta, as the kinematic
calibration needs them, are compiled with its residuals
(:mod:`workbench.calibration.fitting.kinematic`,
:mod:`workbench.calibration.fitting.kinematic_kernels`).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from workbench import lie
from workbench.arrays import as_samples
from workbench.chain import Chain
from workbench.lie import Array


def path_to(chain: Chain, link: int) -> np.ndarray:
    """Indices of the joints from the base to ``link`` (-1: the base), in order."""
    if link < 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(chain.ancestors[:, link])


def tool_path(chain: Chain) -> np.ndarray:
    """Indices of the joints from the base to the tool's link, in order."""
    return path_to(chain, chain.tool_parent)


def _partial_products(chain: Chain, q: Array, path: np.ndarray) -> Array:
    """P (N, k+1, 4, 4): ``P_a = E_1 ... E_a`` along ``path``."""
    E = lie.exp_se3(chain.twists[path][None] * q[:, path, None])  # (N, k, 4, 4)
    P = np.empty((q.shape[0], path.size + 1, 4, 4))
    P[:, 0] = np.eye(4)
    for a in range(path.size):
        P[:, a + 1] = P[:, a] @ E[:, a]
    return P


def forward_kinematics(chain: Chain, q: ArrayLike) -> Array:
    """Tool poses (N, 4, 4) in the base frame, or (4, 4) for one q."""
    qs, batched = as_samples(q, chain.n, "q", chain.joint_names)
    T = _partial_products(chain, qs, tool_path(chain))[:, -1] @ chain.tool_frame
    return T if batched else T[0]


def link_motion(chain: Chain, q: Array, dq: Array, ddq: Array) -> tuple[Array, Array, Array, Array]:
    """Poses, joint twists, twists and accelerations of every link, in the base frame.

    Returns ``T`` (N, n, 4, 4) the rigid displacement of each link from its
    pose at q = 0 (``T_k = T_parent exp([A_k] q_k)``), ``S`` (N, n, 6) the
    current joint twists ``Ad_{T_parent} A_k``, ``V`` (N, n, 6) the spatial
    velocities ``V_parent + S_k dq_k`` and ``a`` (N, n, 6) the spatial
    accelerations ``a_parent + S_k ddq_k + ad_{V_k} S_k dq_k`` with gravity
    as the base acceleration ``(0, -g)`` (Kwon, eq. 1-3; Lynch and Park,
    §8.3). ``q, dq, ddq`` are checked (N, n) arrays.
    """
    N, n = q.shape
    E = lie.exp_se3(chain.twists[None] * q[:, :, None])  # (N, n, 4, 4)
    T = np.empty((N, n, 4, 4))
    S, V, a = np.empty((N, n, 6)), np.empty((N, n, 6)), np.empty((N, n, 6))
    base = np.concatenate([np.zeros(3), -chain.gravity])
    for k in range(n):
        p = chain.parents[k]
        if p < 0:
            T[:, k] = E[:, k]
            S[:, k] = chain.twists[k]
            V_parent, a_parent = np.zeros((N, 6)), np.broadcast_to(base, (N, 6))
        else:
            T[:, k] = T[:, p] @ E[:, k]
            S[:, k] = np.einsum("sij,j->si", lie.Ad(T[:, p]), chain.twists[k])
            V_parent, a_parent = V[:, p], a[:, p]
        V[:, k] = V_parent + S[:, k] * dq[:, k, None]
        a[:, k] = (
            a_parent
            + S[:, k] * ddq[:, k, None]
            + np.einsum("sij,sj->si", lie.ad(V[:, k]), S[:, k]) * dq[:, k, None]
        )
    return T, S, V, a
