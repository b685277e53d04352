"""Batched inverse dynamics of a Chain ([Kwon] eq. 1-5).

``inverse_dynamics`` evaluates the recursive Newton-Euler algorithm for N
samples at once in compiled code (a loop over joints inside a loop over
samples, split across threads), for trees, with gravity as a base
acceleration and an optional external wrench on the tool frame.

The tool wrench ``f_tool = (m, f)`` is the wrench that the environment
exerts on the tool, expressed in the tool frame (Pinocchio's ``fext``
convention): ``tau = ID(q, dq, ddq) - J_tool^T f_tool``.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from workbench.arrays import as_samples, broadcast_samples, same_batch
from workbench.chain import Chain, check_chain
from workbench.dynamics import kernels as sk
from workbench.inertia import rotational_inertia
from workbench.lie import Array
from workbench.runtime import jit, leaf, run_batched


class KernelModel(NamedTuple):
    """The arrays of a Chain that the compiled kernels read."""

    parents: np.ndarray  # (n,) int64
    twists: Array  # (n, 6) A_i, base frame at q = 0
    mass: Array  # (n,)
    h0: Array  # (n, 3) first moments, base frame at q = 0
    I0: Array  # (n, 3, 3) rotational inertias about the base origin at q = 0
    tool_parent: int
    tool_R: Array  # (3, 3) tool frame at q = 0
    tool_p: Array  # (3,)
    gravity: Array  # (3,)


@functools.lru_cache(maxsize=64)
def kernel_model(chain: Chain) -> KernelModel:
    """Arrays of ``chain`` laid out for the kernels (cached per chain object)."""
    phi = chain.phi
    return KernelModel(
        parents=np.ascontiguousarray(chain.parents, dtype=np.int64),
        twists=np.ascontiguousarray(chain.twists),
        mass=np.ascontiguousarray(phi[:, 0]),
        h0=np.ascontiguousarray(phi[:, 1:4]),
        I0=np.ascontiguousarray(rotational_inertia(phi)),
        tool_parent=int(chain.tool_parent),
        tool_R=np.ascontiguousarray(chain.tool_frame[:3, :3]),
        tool_p=np.ascontiguousarray(chain.tool_frame[:3, 3]),
        gravity=np.ascontiguousarray(chain.gravity),
    )


class State(NamedTuple):
    """Checked joint state: (N, n) arrays and whether the input was batched."""

    q: Array
    dq: Array
    ddq: Array
    f_tool: Array | None
    batched: bool


def check_state(chain: Chain, q: ArrayLike, dq: ArrayLike, ddq: ArrayLike, f_tool=None) -> State:
    """Validate and broadcast a joint state for ``chain`` (see :func:`inverse_dynamics`)."""
    check_chain(chain)
    names = chain.joint_names
    q, bq = as_samples(q, chain.n, "q", names)
    dq, bv = as_samples(dq, chain.n, "dq", names)
    ddq, ba = as_samples(ddq, chain.n, "ddq", names)
    arrays = [(q, "q"), (dq, "dq"), (ddq, "ddq")]
    batched = bq or bv or ba
    if f_tool is not None:
        f_tool, bf = as_samples(f_tool, 6, "f_tool", ("m_x", "m_y", "m_z", "f_x", "f_y", "f_z"))
        arrays.append((f_tool, "f_tool"))
        batched = batched or bf
    N = same_batch(*arrays)
    return State(
        kernel_array(broadcast_samples(q, N)),
        kernel_array(broadcast_samples(dq, N)),
        kernel_array(broadcast_samples(ddq, N)),
        None if f_tool is None else kernel_array(broadcast_samples(f_tool, N)),
        batched,
    )


def kernel_array(x: ArrayLike) -> Array:
    """``x`` as a writeable C-contiguous float array (a copy only when it is not): read-only
    or strided arrays are other numba types, which would compile the kernels again."""
    return np.require(x, dtype=np.float64, requirements=("C", "W"))


@leaf
def add_tool_wrench(km, R, P, f_tool, f, Rt, pt, fw):
    """Subtract the tool wrench (given in the tool frame) in world coordinates from its link."""
    k = km.tool_parent
    if k < 0:
        return
    sk.compose(R[k], P[k], km.tool_R, km.tool_p, Rt, pt)
    sk.wrench_to_world(Rt, pt, f_tool, fw)
    for r in range(6):
        f[k, r] -= fw[r]


@jit
def _rnea_kernel(km, q, dq, ddq, f_tool, tau, start, stop):
    """tau[s] for samples start..stop-1: forward pass, tool wrench, backward sums (eq. 4-5)."""
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
    Rt = np.empty((3, 3))
    sk.init_base(km.gravity, R, P, V, A)
    for s in range(start, stop):
        sk.forward_pass(
            km.parents, km.twists, km.mass, km.h0, km.I0,
            q[s], dq[s], ddq[s], R, P, S, V, A, H, I, f, tmp, Re,
        )  # fmt: skip
        if f_tool.shape[0] > 0:
            add_tool_wrench(km, R, P, f_tool[s], f, Rt, tmp[0, :3], tmp[1])
        for i in range(n - 1, -1, -1):
            tau[s, i] = sk.dot6(S[i], f[i])
            k = km.parents[i]
            if k >= 0:
                for r in range(6):
                    f[k, r] += f[i, r]


def inverse_dynamics(
    chain: Chain,
    q: ArrayLike,
    dq: ArrayLike,
    ddq: ArrayLike,
    f_tool: ArrayLike | None = None,
) -> Array:
    """Joint torques tau = ID(q, dq, ddq) ([Kwon] eq. 1-5), batched over samples.

    ``q``, ``dq``, ``ddq`` are (n,) or (N, n); ``f_tool`` is (6,) or (N, 6),
    the wrench (m, f) the environment exerts on the tool, in the tool frame.
    A single sample broadcasts against N. Returns (n,) for unbatched input,
    else (N, n). Gravity ``chain.gravity`` enters as the base acceleration
    ``(0, -g)``.
    """
    state = check_state(chain, q, dq, ddq, f_tool)
    tau = np.empty_like(state.q)
    f = np.zeros((0, 6)) if state.f_tool is None else state.f_tool
    run_batched(
        _rnea_kernel, state.q.shape[0], kernel_model(chain), state.q, state.dq, state.ddq, f, tau
    )
    return tau if state.batched else tau[0]
