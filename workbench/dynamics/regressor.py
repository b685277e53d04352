"""The joint-torque regressor: ``tau = Y(q, dq, ddq) phi``, linear in the inertial parameters.

Inverse dynamics is linear in each link's ten inertial parameters (Garofalo,
Ott and Albu-Schaeffer, the dynamic-parameter regressor). In the world-frame
recursion of :mod:`workbench.dynamics.kernels`, link k's wrench is ``f_k =
I_k a_k - ad_{V_k}^T I_k V_k`` with ``I_k`` its inertia moved to its current
pose (Kwon, eq. 4 and 29), linear in the link's phi; joint i carries the
wrenches of its subtree, so

    Y[i, k, j] = S_i^T f_k(e_j)     for k in the subtree of i,

with ``e_j`` the unit parameter j. Columns follow the project's phi order
``[m, h, Ixx, Iyy, Izz, Ixy, Ixz, Iyz]`` with phi in the base frame at q = 0
(``chain.phi``), or in each link's joint frame (``phi_base = L(M_k)
phi_joint``, Kwon eq. 29). Compiled, batched over samples in blocks and
threads.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from workbench.chain import Chain
from workbench.dynamics import kernels as sk
from workbench.dynamics.inverse_dynamics import check_state, kernel_array, kernel_model
from workbench.inertia import motion_matrix, rotational_inertia
from workbench.lie import Array
from workbench.runtime import jit, run_batched

BLOCK = 4096  # samples per block: temporaries stay small, whatever the log's length


def torque_regressor(
    chain: Chain, q: ArrayLike, dq: ArrayLike, ddq: ArrayLike, frame: str = "base"
) -> Array:
    """Y (N, n, 10 n) with ``tau = Y phi`` (module docstring); (n, 10 n) for one sample.

    ``frame="base"``: phi = ``chain.phi`` (base frame at q = 0);
    ``frame="joint"``: each link's phi in its joint frame (of
    ``chain.local_inertias()``).
    """
    state = check_state(chain, q, dq, ddq)
    columns = np.arange(10 * chain.n)
    Y = regressor_columns(chain, state.q, state.dq, state.ddq, columns, frame)
    return Y if state.batched else Y[0]


def regressor_columns(
    chain: Chain, q: Array, dq: Array, ddq: Array, columns: np.ndarray, frame: str = "joint"
) -> Array:
    """The ``columns`` (k,) of the regressor in ``frame`` (project order), (N, n, k).

    Only the requested columns are computed, block by block; ``q``, ``dq``,
    ``ddq`` are checked (N, n) arrays (of any layout: the kernel gets them
    C-contiguous, so that it is compiled once). Column ``10 k + j`` is link
    k's parameter j; in the joint frame it is the base-frame body
    ``L(M_k) e_j``.
    """
    if frame not in ("base", "joint"):
        raise ValueError(f"frame must be 'base' or 'joint', not {frame!r}")
    columns = np.asarray(columns, dtype=np.int64)
    link, j = np.divmod(columns, 10)
    unit = np.eye(10)[j]  # (c, 10) base-frame phi of each column
    if frame == "joint":
        unit = np.einsum("crj,cj->cr", motion_matrix(chain.joint_frames)[link], np.eye(10)[j])
    km = kernel_model(chain)
    q, dq, ddq = kernel_array(q), kernel_array(dq), kernel_array(ddq)
    N, n = q.shape
    out = np.empty((N, n, columns.size))
    for start in range(0, N, BLOCK):
        stop = min(start + BLOCK, N)
        run_batched(
            _regressor_kernel, stop - start, km, q[start:stop], dq[start:stop],
            ddq[start:stop], link, np.ascontiguousarray(unit[:, 0]),
            np.ascontiguousarray(unit[:, 1:4]), np.ascontiguousarray(rotational_inertia(unit)),
            out[start:stop],
        )  # fmt: skip
    return out


@jit
def _regressor_kernel(km, q, dq, ddq, link, um, uh, uI, Y, start, stop):
    """Y[s] (n, c) for samples start..stop-1: column c is S_i^T f of the unit body (um, uh,
    uI)[c] on link[c], for the joints i on the path to that link (module docstring)."""
    n = km.parents.shape[0]
    R = np.empty((n + 1, 3, 3))
    P = np.empty((n + 1, 3))
    V = np.empty((n + 1, 6))
    A = np.empty((n + 1, 6))
    S = np.empty((n, 6))
    H = np.empty((n, 3))
    I = np.empty((n, 3, 3))
    f = np.empty((n, 6))
    tmp = np.empty((3, 6))
    Re = np.empty((3, 3))
    hw = np.empty(3)
    Iw = np.empty((3, 3))
    fw = np.empty(6)
    sk.init_base(km.gravity, R, P, V, A)
    for s in range(start, stop):
        sk.forward_pass(
            km.parents, km.twists, km.mass, km.h0, km.I0,
            q[s], dq[s], ddq[s], R, P, S, V, A, H, I, f, tmp, Re,
        )  # fmt: skip
        for c in range(link.shape[0]):
            k = link[c]
            sk.world_inertia(um[c], uh[c], uI[c], R[k], P[k], hw, Iw)
            sk.inertia_apply(um[c], hw, Iw, V[k], tmp[0])
            sk.ad_transpose_apply(V[k], tmp[0], tmp[1])
            sk.inertia_apply(um[c], hw, Iw, A[k], fw)
            for r in range(6):
                fw[r] -= tmp[1, r]
            for i in range(n):
                Y[s, i, c] = 0.0
            i = k
            while i >= 0:
                Y[s, i, c] = sk.dot6(S[i], fw)
                i = km.parents[i]
