"""A closed chain's torque, closure and task maps as batched CasADi callbacks.

Per knot the decision variables are the tree's joint values, velocities
and accelerations ``x = (q, dq, ddq)`` (3 n). The callbacks
(:class:`workbench.ocp.bridge.BatchedCallback`, one batched evaluation for
all knots with the analytic Jacobian):

* ``torque``: the forces ``S^T tau_tree(q, dq, ddq)`` (a + i: the motors, then the
  idle joints, whose forces the transcription holds at zero) and their
  full-state partials (:func:`workbench.closed_chains.derivatives.torque_derivatives`);
  with a design space, the links' inertial parameters are a shared input
  (the torque is linear in them: the Jacobian is the closed chain's regressor);
* ``closure``: the independent rows I of the closure at position, velocity
  and acceleration level, ``(c_I, K_I dq, K_I ddq + c''_I[dq, dq])``, with
  Jacobian blocks ``d/dq = (K_I, c''_I[., dq], c''_I[., ddq] + c'''_I[dq, dq, .])``,
  ``d/d dq = (0, K_I, 2 c''_I[., dq])``, ``d/d ddq = (0, 0, K_I)``;
* ``task``: the tool's task vector at the last knot and its partials.

Second derivatives (IPOPT's Hessian of the Lagrangian) are exact (the project's own
closed chains up to ``SX_JOINTS`` joints; else central differences of the analytic
Jacobians, see :func:`model_callbacks`): CasADi AD
of the same functions in SX (:mod:`workbench.ocp.model_sx`; with a design
space the torque's by the state and the links' phi too); the design map
p -> phi keeps the bridge's central differences of its analytic Jacobian,
as do all callbacks with ``exact_hessian=False``.
"""

from __future__ import annotations

import numpy as np

from workbench.closed_chains.derivatives import torque_derivatives
from workbench.closed_chains.dynamics import coordinate_forces, coordinate_regressor
from workbench.closed_chains.kinematics import Closures, joint_directions
from workbench.closed_chains.model import ClosedChain
from workbench.closed_chains.robot_folder import is_robot_folder
from workbench.closed_chains.task_space import task
from workbench.inertia import matrix_from_phi
from workbench.lie import Array
from workbench.ocp import sx_compiler
from workbench.ocp.bridge import BatchedCallback
from workbench.ocp.model_sx import lagrangian_hessians

# Largest tree whose reaching second derivatives are compiled from SX (model_callbacks).
SX_JOINTS = 12


def closure_levels(model: ClosedChain, rows: np.ndarray, X: Array, jacobian: bool):
    """The closure at three levels (K, 3 r) for knots X (K, 3 n), and its Jacobian (K, 3 r, 3 n)."""
    n = model.n
    q, dq, ddq = X[:, :n], X[:, n : 2 * n], X[:, 2 * n :]
    closures = Closures(model, q)
    K = closures.jacobian()[:, rows]
    J_dq = closures.first_jacobian((dq[:, None], None))[:, 0][:, rows]  # c''[e_i, dq]
    c2 = np.einsum("nmi,ni->nm", J_dq, dq)  # c''[dq, dq]
    value = np.concatenate(
        [closures.residual()[:, rows], (K @ dq[..., None])[..., 0],
         (K @ ddq[..., None])[..., 0] + c2], axis=1,
    )  # fmt: skip
    if not jacobian:
        return (value,)
    N, r = len(q), len(rows)
    J_ddq = closures.first_jacobian((ddq[:, None], None))[:, 0][:, rows]
    third = closures.third(
        (np.repeat(dq[:, None], n, axis=1), None), joint_directions(N, n)
    )  # (N, n, m): c'''[dq, dq, e_i]
    D = np.zeros((N, 3 * r, 3 * n))
    D[:, :r, :n] = K
    D[:, r : 2 * r, :n] = J_dq
    D[:, r : 2 * r, n : 2 * n] = K
    D[:, 2 * r :, :n] = J_ddq + np.swapaxes(third, 1, 2)[:, rows]
    D[:, 2 * r :, n : 2 * n] = 2.0 * J_dq
    D[:, 2 * r :, 2 * n :] = K
    return value, D


def load_kernels(model: ClosedChain, rows: np.ndarray, q: Array, design=None) -> None:
    """Evaluate every model function of :func:`model_callbacks` once, at rest at ``q``.

    Their compiled kernels are compiled or loaded from numba's disk cache
    now, which the first evaluation in a solve would otherwise pay for, while
    the C compilations :func:`model_callbacks` started (first run only) go on;
    returns when those are done too.
    """
    X = np.concatenate([q, np.zeros_like(q), np.zeros_like(q)])[None]
    q1, zero = X[:, : model.n], X[:, model.n : 2 * model.n]
    coordinate_forces(model, q1, zero, zero)
    closure_levels(model, rows, X, True)
    task(model, q1)
    if design is not None:
        design.link_phi(np.zeros(design.size))
        coordinate_regressor(model, q1, zero, zero)
    torque_derivatives(model, q1, zero, zero, with_eta=False)  # last: a first run may
    sx_compiler.wait()  # compile its kernel in a second process (runtime.compile_beside)


def has_exact_hessians(model: ClosedChain) -> bool:
    """Whether :func:`model_callbacks` gives ``model`` exact second derivatives by default:
    the project's own closed chains (closure files, shipped names) of at most
    ``SX_JOINTS`` tree joints, not example-parallel-robots folders."""
    folder = model.source is not None and is_robot_folder(model.source)
    return model.n <= SX_JOINTS and not folder


def model_callbacks(
    model: ClosedChain,
    knots: int,
    rows: np.ndarray,
    design=None,
    finite_differences: bool = False,
    exact_hessian: bool | None = None,
) -> dict[str, BatchedCallback]:
    """Torque, closure and task callbacks (module docstring); "design" maps p to phi.

    ``exact_hessian`` None: the SX second derivatives for the project's own
    closed chains (closure files and shipped names) of at most ``SX_JOINTS``
    joints, whose compiled C the cache keeps; central differences of the
    analytic Jacobians for larger trees and for folders of example-parallel-robots
    (their weld closures' SX compiles in tens of minutes on a first run, and
    14 joints take the C compiler gigabytes).
    """
    n, a = model.n, len(model.active)
    if exact_hessian is None:
        exact_hessian = has_exact_hessians(model)

    def exact(name: str, design: bool = False):
        if not exact_hessian or finite_differences:
            return None
        return lagrangian_hessians(model, rows, name, design)

    phi_size = 10 * n

    def torque(X, P, jacobian):
        q, dq, ddq = X[:, :n], X[:, n : 2 * n], X[:, 2 * n :]
        chain = model if design is None else model.with_inertias(matrix_from_phi(P.reshape(n, 10)))
        if not jacobian:
            return (coordinate_forces(chain, q, dq, ddq),)
        d = torque_derivatives(chain, q, dq, ddq, with_eta=False)
        by_state = np.concatenate([d.dtau_dq, d.dtau_dv, d.dtau_da], axis=-1)
        if design is None:
            return d.tau, by_state
        return d.tau, by_state, coordinate_regressor(chain, q, dq, ddq)

    def closure(X, _P, jacobian):
        return closure_levels(model, rows, X, jacobian)

    def task_vector(X, _P, jacobian):
        x, dx = task(model, X)
        return (x, dx) if jacobian else (x,)

    def link_phi(X, _P, jacobian):
        phi, dphi = design.link_phi(X[0])
        flat = phi.reshape(1, phi_size)
        return (flat, dphi.reshape(1, phi_size, -1)) if jacobian else (flat,)

    fd = finite_differences
    accelerations = range(2 * n, 3 * n)  # torque and closure are affine in ddq
    rates = range(n, 3 * n)  # ... and at most quadratic in (dq, ddq)
    functions = {
        "torque": BatchedCallback(
            "torque", torque, knots, 3 * n, a, n_shared=0 if design is None else phi_size,
            finite_differences=fd, affine_inputs=accelerations, affine_shared=True,
            quadratic_inputs=rates, second_derivatives=exact("torque", design is not None),
        ),
        "closure": BatchedCallback(
            "closure", closure, knots, 3 * n, 3 * len(rows), finite_differences=fd,
            affine_inputs=accelerations, quadratic_inputs=rates,
            second_derivatives=exact("closure"),
        ),
        "task": BatchedCallback(
            "task", task_vector, 1, n, 3, finite_differences=fd, second_derivatives=exact("task")
        ),
    }  # fmt: skip
    if design is not None:
        functions["design"] = BatchedCallback(
            "design", link_phi, 1, design.size, phi_size, finite_differences=fd
        )
    return functions
