"""Forward kinematics of frames on a tree and their Jacobians with respect to eta.

Zero-reference normal form (Kwon §2, footnote 1): a frame fixed to link k at
``M`` (its pose in the base frame at q = 0) is at

    T(q) = prod_{j on the path to k} exp([A_j] q_j) M.

Its spatial (base-frame) twist under eta, at eta = 0: with ``E_j =
exp([A_j] q_j)`` and the partial products ``P_a = E_1 ... E_a`` (P_0 = I)
along the path, perturbing eta_j conjugates ``E_j <- exp(d eta_j) E_j
exp(-d eta_j)``, so the frame moves by

    d xi = (Ad_{P_{a-1}} - Ad_{P_a}) d eta_j      (joint j at path position a),
    d xi = Ad_{P_k} d eta_frame                   (the frame itself, k joints on the path),

which is Kwon's eq. 8 (``dA_j = -ad_{A_j} d eta_j``) integrated along the
chain. A point p of the frame moves by ``dp = [-[p], I] d xi``.
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


def frame_jacobian(
    chain: Chain, q: Array, link: int, placement: Array
) -> tuple[Array, Array, Array]:
    """Poses T (N, 4, 4) of a frame on ``link``, d xi / d eta_joints (N, 6, 6 n), d xi / d_frame.

    Spatial (base-frame) twists at the current chain (module docstring);
    joints off the path give zeros. The last array is (N, 6, 6).
    """
    path = path_to(chain, link)
    P = _partial_products(chain, q, path)
    T = P[:, -1] @ placement
    AdP = lie.Ad(P)  # (N, k+1, 6, 6)
    J = np.zeros((q.shape[0], 6, chain.n, 6))
    J[:, :, path, :] = np.swapaxes(AdP[:, :-1] - AdP[:, 1:], 1, 2)
    return T, J.reshape(q.shape[0], 6, 6 * chain.n), AdP[:, -1]


def tool_jacobian(chain: Chain, q: ArrayLike) -> tuple[Array, Array]:
    """Tool poses T (N, 4, 4) and the spatial twist Jacobian d xi / d eta (N, 6, 6(n+1))."""
    qs, _ = as_samples(q, chain.n, "q", chain.joint_names)
    T, J, J_tool = frame_jacobian(chain, qs, chain.tool_parent, chain.tool_frame)
    return T, np.concatenate([J, J_tool], axis=2)


def point_jacobian(T: Array, J_twist: Array) -> Array:
    """d p / d params (N, 3, p) of a frame's origin p from its spatial twist Jacobian."""
    G = np.concatenate([-lie.hat3(T[:, :3, 3]), np.broadcast_to(np.eye(3), T[:, :3, :3].shape)], 2)
    return np.einsum("nij,njk->nik", G, J_twist)


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
