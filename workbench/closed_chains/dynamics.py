"""Motor torques, regressor, reduced inertia, forward dynamics, simulation of closed chains.

With the tree's inverse dynamics ``tau_tree(q, dq, ddq)`` at a closed state
and ``S = dq / dq_a`` (:mod:`workbench.closed_chains.kinematics`), the
motors' torques follow from the virtual work of the closed chain (the
passive joints and the closures do no work):

    tau_a = S^T tau_tree(q, dq, ddq),                         (1)

and since tau_tree is linear in the links' inertial parameters phi, so is
``tau_a = S^T Y(q, dq, ddq) phi`` (the closed chain's regressor). Forward
dynamics reduces (1) to the actuated coordinates with ``dq = S dq_a``,
``ddq = S ddq_a + sigma``:

    S^T M S ddq_a = tau_a - S^T tau_tree(q, dq, sigma).       (2)

Arrays carry the sample axis first; q, dq, ddq are (N, n) tree joint
values, motor quantities (N, a) in the order of ``model.actuated``.

Idle motions (motions the closures leave with the motors still,
``model.idle``) get coordinates of their own: ``S`` then has a column per
independent coordinate (the motors, then the idle joints), and (1) gives a
force per column. :func:`coordinate_forces` and :func:`coordinate_regressor`
return all of them (what a planner constrains: the idle forces must be
zero); :func:`motor_torques` and :func:`torque_regressor` the motors' alone
(what a motor delivers and a calibration fits), the same columns of the same
products. Without idle motions both pairs are equal.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from workbench.arrays import as_samples
from workbench.closed_chains.kinematics import (
    Closures,
    PassiveSolver,
    acceleration_bias,
    closed_configurations,
    coordinates,
    solve_passive,
)
from workbench.closed_chains.model import ClosedChain
from workbench.dynamics.inverse_dynamics import inverse_dynamics
from workbench.dynamics.matrices import mass_matrix
from workbench.dynamics.regressor import torque_regressor as tree_regressor
from workbench.errors import WorkbenchError
from workbench.lie import Array


def _state(model: ClosedChain, **arrays: ArrayLike) -> tuple[list[Array], bool]:
    out, batched = [], False
    for name, x in arrays.items():
        a, b = as_samples(x, model.n, name, model.tree.joint_names)
        out.append(a)
        batched |= b
    N = max(len(a) for a in out)
    return [np.broadcast_to(a, (N, model.n)) for a in out], batched


def coordinate_forces(
    model: ClosedChain, q: ArrayLike, dq: ArrayLike, ddq: ArrayLike,
    f_tool: ArrayLike | None = None,
) -> Array:  # fmt: skip
    """Forces (N, a + i) of eq. (1) on the independent coordinates (``model.active``: the
    motors, then the idle joints) at closed states; ``f_tool`` as in inverse_dynamics.

    The idle joints' forces vanish on every motion the closed chain's dynamics allows
    (idle motions are driven by no force).
    """
    (q, dq, ddq), batched = _state(model, q=q, dq=dq, ddq=ddq)
    S = PassiveSolver(model, Closures(model, q).jacobian()).velocity_map()
    tau = inverse_dynamics(model.tree, q, dq, ddq, f_tool)
    out = (np.swapaxes(S, 1, 2) @ np.atleast_2d(tau)[..., None])[..., 0]
    return out if batched else out[0]


def motor_torques(
    model: ClosedChain, q: ArrayLike, dq: ArrayLike, ddq: ArrayLike,
    f_tool: ArrayLike | None = None,
) -> Array:  # fmt: skip
    """Motor torques (N, a) of eq. (1) at closed states (N, n) in ``model.joint_names``
    order, motors in ``model.actuated`` order; ``f_tool`` as in inverse_dynamics."""
    return coordinate_forces(model, q, dq, ddq, f_tool)[..., : len(model.actuated)]


def reduced_inertia(model: ClosedChain, q: ArrayLike) -> Array:
    """The closed chain's inertia ``S^T M(q) S`` (N, a + i, a + i) on its independent
    coordinates (``model.active``) at closed configurations ``q`` (N, n): ``M`` the tree's
    joint-space inertia, ``S`` the velocity map of the closures."""
    (q,), batched = _state(model, q=q)
    S = PassiveSolver(model, Closures(model, q).jacobian()).velocity_map()
    M = np.swapaxes(S, 1, 2) @ mass_matrix(model.tree, q) @ S
    return M if batched else M[0]


def coordinate_regressor(model: ClosedChain, q: ArrayLike, dq: ArrayLike, ddq: ArrayLike) -> Array:
    """``d Q / d phi`` (N, a + i, 10 n) of the forces Q of :func:`coordinate_forces`:
    eq. (1) with phi = ``model.tree.phi.ravel()``."""
    (q, dq, ddq), batched = _state(model, q=q, dq=dq, ddq=ddq)
    S = PassiveSolver(model, Closures(model, q).jacobian()).velocity_map()
    Y = np.swapaxes(S, 1, 2) @ tree_regressor(model.tree, q, dq, ddq)
    return Y if batched else Y[0]


def torque_regressor(model: ClosedChain, q: ArrayLike, dq: ArrayLike, ddq: ArrayLike) -> Array:
    """``d tau_a / d phi`` (N, a, 10 n) of :func:`motor_torques` (the motors' rows of
    :func:`coordinate_regressor`)."""
    return coordinate_regressor(model, q, dq, ddq)[..., : len(model.actuated), :]


def forward_dynamics(
    model: ClosedChain, q: ArrayLike, dqa: ArrayLike, tau: ArrayLike
) -> tuple[Array, Array]:
    """Accelerations of the independent coordinates (N, a + i) and of the joints (N, n)
    under motor torques, eq. (2).

    ``q`` (N, n) closed configurations, ``dqa`` and ``tau`` (N, a + i) the
    velocities and forces of the independent coordinates (``model.active``),
    or (N, a) those of the motors alone (idle joints at rest, and free: zero
    force). The
    columns of ``M S`` are inverse dynamics at rest at the unit motor
    accelerations minus the gravity torques (inverse dynamics at rest is
    ``M ddq + g(q)``); one batched call of N (a + 2) samples gives them, the
    gravity torques and the bias.
    """
    (q,), batched = _state(model, q=q)
    ddqa, ddq = _accelerations(model, Closures(model, q), dqa, tau)
    return (ddqa, ddq) if batched else (ddqa[0], ddq[0])


def _accelerations(
    model: ClosedChain, closures: Closures, dqa: ArrayLike, tau: ArrayLike
) -> tuple[Array, Array]:
    """:func:`forward_dynamics` (batched) at the configurations of ``closures``."""
    q = closures.q
    a = len(model.active)
    dqa = coordinates(model, dqa, "dqa")
    tau = coordinates(model, tau, "tau")
    N = len(q)
    solver = PassiveSolver(model, closures.jacobian())
    S = solver.velocity_map()
    St = np.swapaxes(S, 1, 2)
    dq = (S @ dqa[..., None])[..., 0]
    sigma = acceleration_bias(closures, dq, solver)
    zero = np.zeros((N, 1, model.n))
    rest = np.concatenate([zero, zero, np.swapaxes(S, 1, 2)], axis=1)  # (N, a + 2, n)
    velocity = np.zeros_like(rest)
    velocity[:, 0] = dq
    rest[:, 0] = sigma
    tau_tree = inverse_dynamics(
        model.tree, np.repeat(q, a + 2, axis=0), velocity.reshape(-1, model.n),
        rest.reshape(-1, model.n),
    ).reshape(N, a + 2, model.n)  # fmt: skip
    bias = (St @ tau_tree[:, 0, :, None])[..., 0]
    M_r = St @ np.swapaxes(tau_tree[:, 2:] - tau_tree[:, 1:2], 1, 2)
    try:
        ddqa = np.linalg.solve(M_r, (tau - bias)[..., None])[..., 0]
    except np.linalg.LinAlgError:
        raise WorkbenchError(f"{model.name}: the reduced mass matrix S^T M S is singular") from None
    ddq = (S @ ddqa[..., None])[..., 0] + sigma
    return ddqa, ddq


def simulate(
    model: ClosedChain, t: ArrayLike, tau: ArrayLike, q0: ArrayLike, dqa0: ArrayLike,
    substeps: int = 4,
) -> tuple[Array, Array]:  # fmt: skip
    """Integrate the closed chain under motor torques (classical Runge-Kutta 4).

    ``t`` (K,) times, ``tau`` (K, a) motor torques interpolated linearly
    between them, ``q0`` (n,) a closed configuration, ``dqa0`` (a,) motor
    velocities (or, with idle joints, (K, a + i) and (a + i,) for every
    independent coordinate: forces on idle joints are zero, and idle joints
    start at rest unless given). The state is (q_a, dq_a); the passive joints are solved at
    every stage from the last closed configuration, so the closure never
    drifts. Returns q (K, n) and dq (K, n) at the times t.
    """
    t = np.asarray(t, dtype=float)
    a = len(model.active)
    tau = coordinates(model, tau, "tau")
    (q0,), _ = _state(model, q0=q0)
    dqa = coordinates(model, dqa0, "dqa0")[0]
    if len(tau) != len(t):
        raise WorkbenchError(f"tau has {len(tau)} samples for {len(t)} times")
    last, closures = q0[0].copy(), None

    def rhs(time: float, x: Array) -> Array:
        nonlocal last, closures
        torque = np.array([np.interp(time, t, tau[:, k]) for k in range(a)])
        q, closures = closed_configurations(model, x[None, :a], last, closures)
        last = q[0]
        return np.concatenate([x[a:], _accelerations(model, closures, x[a:], torque)[0][0]])

    x = np.concatenate([q0[0, model.active], dqa])
    qs, motor_velocities = [q0[0].copy()], [dqa]
    for k in range(len(t) - 1):
        h = (t[k + 1] - t[k]) / substeps
        for m in range(substeps):
            time = t[k] + m * h
            k1 = rhs(time, x)
            k2 = rhs(time + h / 2, x + h / 2 * k1)
            k3 = rhs(time + h / 2, x + h / 2 * k2)
            k4 = rhs(time + h, x + h * k3)
            x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        qs.append(solve_passive(model, x[:a], guess=qs[-1]))
        motor_velocities.append(x[a:])
    q = np.array(qs)
    S = PassiveSolver(model, Closures(model, q).jacobian()).velocity_map()
    return q, (S @ np.array(motor_velocities)[..., None])[..., 0]
