"""Joint-space and task-space dynamic matrices of a Chain, from Pinocchio.

``tau = M(q) ddq + C(q, dq) dq + g(q)`` with Pinocchio's Coriolis matrix
(computeCoriolisMatrix), for which ``M_dot - 2 C`` is skew-symmetric, so
``M_dot = C + C^T`` ([Mueller] §5, [Garofalo]). Task space ([MR] §9.6,
generalised to redundant chains): with the tool-frame body Jacobian J
(twists (omega, v) of the tool frame in its own coordinates),
``Lambda = (J M^-1 J^T)^-1`` and, with the dynamically consistent inverse
``J_bar = M^-1 J^T Lambda`` and ``dq = J_bar V``,
``eta = J_bar^T (C dq + g) - Lambda J_dot dq`` (eq. 9.98-9.99; for six joints
``J_bar = J^-1``). Lambda needs J of full row rank (six joints or more, away
from singularities).

Pinocchio orders twists (v, omega): J, J_dot and Lambda are converted at the
boundary with :func:`workbench.lie.pinocchio_vector` /
:func:`~workbench.lie.pinocchio_matrix`. Inputs are (n,) or (N, n); outputs
keep the batch. These functions loop over samples calling Pinocchio (one C++
call per sample), which is fine outside hot paths.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from workbench import lie
from workbench.arrays import as_samples, broadcast_samples, same_batch
from workbench.chain import Chain
from workbench.lie import Array
from workbench.models.pinocchio_conversion import shared_model
from workbench.models.placements import create_data


def _per_sample(chain: Chain, fn: Callable, **arrays: ArrayLike) -> Array | tuple[Array, ...]:
    """Evaluate ``fn(model, data, *rows)`` per sample of the checked (n,)/(N, n) ``arrays``."""
    checked = [as_samples(x, chain.n, what, chain.joint_names) for what, x in arrays.items()]
    N = same_batch(*((x, what) for (x, _), what in zip(checked, arrays, strict=True)))
    rows = [broadcast_samples(x, N) for x, _ in checked]
    batched = any(b for _, b in checked)
    model = shared_model(chain)
    data = create_data(model, f"chain '{chain.name}'")
    out = [fn(model, data, *(r[s] for r in rows)) for s in range(N)]
    if isinstance(out[0], tuple):
        stacked = tuple(np.array(x) for x in zip(*out, strict=True))
        return stacked if batched else tuple(x[0] for x in stacked)
    stacked = np.array(out)
    return stacked if batched else stacked[0]


def mass_matrix(chain: Chain, q: ArrayLike) -> Array:
    """M(q) (n, n) or (N, n, n) from pinocchio.crba (upper triangle mirrored)."""
    import pinocchio as pin

    def fn(model, data, q):
        M = pin.crba(model, data, q)
        return np.triu(M) + np.triu(M, 1).T

    return _per_sample(chain, fn, q=q)


def coriolis_matrix(chain: Chain, q: ArrayLike, dq: ArrayLike) -> Array:
    """Pinocchio's C(q, dq), (n, n) or (N, n, n): C dq are the velocity torques, M_dot = C + C^T."""
    import pinocchio as pin

    return _per_sample(
        chain, lambda m, d, q, dq: pin.computeCoriolisMatrix(m, d, q, dq).copy(), q=q, dq=dq
    )


def gravity_torques(chain: Chain, q: ArrayLike) -> Array:
    """g(q) (n,) or (N, n) from pinocchio.computeGeneralizedGravity."""
    import pinocchio as pin

    return _per_sample(chain, lambda m, d, q: pin.computeGeneralizedGravity(m, d, q).copy(), q=q)


def _tool_jacobians(model, data, frame: int, q: Array, dq: Array) -> tuple[Array, Array]:
    """Body Jacobian J and its time derivative J_dot (6, n) of a frame, (omega, v) rows."""
    import pinocchio as pin

    pin.computeJointJacobiansTimeVariation(model, data, q, dq)
    pin.updateFramePlacements(model, data)
    J = pin.getFrameJacobian(model, data, frame, pin.LOCAL)
    J_dot = pin.getFrameJacobianTimeVariation(model, data, frame, pin.LOCAL)
    return lie.pinocchio_vector(J.T).T, lie.pinocchio_vector(J_dot.T).T


def task_space_dynamics(chain: Chain, q: ArrayLike, V: ArrayLike) -> tuple[Array, Array]:
    """Lambda(q) (6, 6) and eta(q, V) (6,) of the tool frame ([MR] eq. 9.97-9.99).

    ``F = Lambda V_dot + eta`` for the tool-frame body twist V = (omega, v)
    and wrench F = (m, f), both in tool-frame coordinates (see the module
    docstring for the redundant case: ``dq = J_bar V``). ``q`` (n,) or
    (N, n), ``V`` (6,) or (N, 6); outputs (6, 6) and (6,) or batched.
    """
    import pinocchio as pin

    V, batched_V = as_samples(V, 6, "V", ("w_x", "w_y", "w_z", "v_x", "v_y", "v_z"))
    qs, batched_q = as_samples(q, chain.n, "q", chain.joint_names)
    N = same_batch((qs, "q"), (V, "V"))
    qs, V = broadcast_samples(qs, N), broadcast_samples(V, N)
    model = shared_model(chain)
    data = create_data(model, f"chain '{chain.name}'")
    frame = model.getFrameId(chain.tool_name)
    Lam, eta = np.empty((N, 6, 6)), np.empty((N, 6))
    for s in range(N):
        M = mass_matrix(chain, qs[s])
        J, _ = _tool_jacobians(model, data, frame, qs[s], np.zeros(chain.n))
        Lam[s] = np.linalg.inv(J @ np.linalg.solve(M, J.T))
        J_bar = np.linalg.solve(M, J.T) @ Lam[s]
        dq = J_bar @ V[s]
        _, J_dot = _tool_jacobians(model, data, frame, qs[s], dq)
        b = pin.rnea(model, data, qs[s], dq, np.zeros(chain.n))
        eta[s] = J_bar.T @ b - Lam[s] @ J_dot @ dq
    if batched_q or batched_V:
        return Lam, eta
    return Lam[0], eta[0]
