"""The joint-torque regressor: ``tau = Y(q, dq, ddq) phi``, linear in the inertial parameters.

Inverse dynamics is linear in each link's ten inertial parameters (seed 002,
the dynamic-parameter regressor). Pinocchio's
``computeJointTorqueRegressor`` evaluates Y for one sample with every link's
parameters in its joint frame, in Pinocchio's order ``[m, mx, my, mz, Ixx,
Ixy, Iyy, Ixz, Iyz, Izz]``; this module batches it over samples, block by
block, and returns the columns in the project's phi order (``[m, h, Ixx,
Iyy, Izz, Ixy, Ixz, Iyz]``), either in each joint's frame or in the base
frame at q = 0 (``Y_base = Y_local L(M_k)^{-1}``, seed 000 eq. 29), so that
``tau = Y @ chain.phi.ravel()``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from workbench import lie
from workbench.chain import Chain
from workbench.dynamics.inverse_dynamics import check_state, pinocchio_model
from workbench.inertia import motion_matrix, phi_from_pinocchio
from workbench.lie import Array

BLOCK = 4096  # samples per block: temporaries stay small, whatever the log's length

# project phi index -> Pinocchio dynamic-parameter index
_PROJECT_TO_PINOCCHIO = np.asarray(phi_from_pinocchio(np.arange(10)), dtype=np.int64)


def torque_regressor(
    chain: Chain, q: ArrayLike, dq: ArrayLike, ddq: ArrayLike, frame: str = "base"
) -> Array:
    """Y (N, n, 10 n) with ``tau = Y phi`` (module docstring); (n, 10 n) for one sample.

    ``frame="base"``: phi = ``chain.phi`` (base frame at q = 0);
    ``frame="joint"``: each link's phi in its joint frame (of
    ``chain.local_inertias()``). A Python loop over samples calls Pinocchio
    (about 5 us per sample for n = 7).
    """
    if frame not in ("base", "joint"):
        raise ValueError(f"frame must be 'base' or 'joint', not {frame!r}")
    state = check_state(chain, q, dq, ddq)
    n = chain.n
    Y = regressor_columns(chain, state.q, state.dq, state.ddq, np.arange(10 * n))
    if frame == "base":
        to_local = motion_matrix(lie.inverse(chain.joint_frames))  # phi_local = L^-1 phi_base
        Y = np.einsum("sikp,kpr->sikr", Y.reshape(-1, n, n, 10), to_local).reshape(-1, n, 10 * n)
    return Y if state.batched else Y[0]


def regressor_columns(chain: Chain, q: Array, dq: Array, ddq: Array, columns: np.ndarray) -> Array:
    """The ``columns`` (k,) of the joint-frame regressor (project order), (N, n, k).

    Built block by block, so that only the requested columns of all samples
    are ever held; ``q``, ``dq``, ``ddq`` are checked (N, n) arrays.
    """
    import pinocchio as pin  # the regressor is Pinocchio's

    model = pinocchio_model(chain)
    data = model.createData()
    columns = np.asarray(columns, dtype=np.int64)
    link, k = np.divmod(columns, 10)
    source = 10 * link + _PROJECT_TO_PINOCCHIO[k]
    N, n = q.shape
    out = np.empty((N, n, columns.size))
    block = np.empty((min(BLOCK, N), n, 10 * n))
    for start in range(0, N, BLOCK):
        stop = min(start + BLOCK, N)
        for s in range(start, stop):
            block[s - start] = pin.computeJointTorqueRegressor(model, data, q[s], dq[s], ddq[s])
        out[start:stop] = block[: stop - start][:, :, source]
    return out
