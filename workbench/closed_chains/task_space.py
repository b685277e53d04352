"""The tool's task space on a closed chain: task vectors, their Jacobians, inverse kinematics.

A closed chain's task is the tool frame's position (``task = "position"``)
or its z axis (``"pointing"``, a unit direction), as the closure file says
(:mod:`workbench.closed_chains.model`). Along the closed chain the task
moves with the motors through ``d x / d q_a = (d x / d q) S``; inverse
kinematics is Gauss-Newton on the motors with the passive joints solved at
every step ([Nocedal], docs/references.md).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from workbench import lie
from workbench.closed_chains.kinematics import (
    Closures,
    PassiveSolver,
    _configurations,
    solve_passive,
)
from workbench.closed_chains.model import ClosedChain
from workbench.errors import WorkbenchError
from workbench.lie import Array


def task(model: ClosedChain, q: ArrayLike) -> tuple[Array, Array]:
    """The tool's task vector (N, 3) and its partials in the tree joints (N, 3, n).

    ``model.task == "position"``: the tool frame's origin p, ``dp/dq_j =
    omega_j x p + v_j``; ``"pointing"``: its z axis z, ``dz/dq_j = omega_j
    x z``; with ``(omega_j, v_j)`` the spatial (base-frame) twist of joint j
    at q, zero for joints off the tool's path.
    """
    q, _ = _configurations(model, q)
    chain = model.tree
    N = len(q)
    P = np.broadcast_to(np.eye(4), (N, 4, 4))
    twists = np.zeros((N, model.n, 6))
    for j in np.flatnonzero(chain.ancestors[:, chain.tool_parent]):
        twists[:, j] = lie.Ad(P) @ chain.twists[j]
        P = P @ lie.exp_se3(chain.twists[j] * q[:, j, None])
    T = P @ chain.tool_frame
    if model.task == "position":
        x = T[:, :3, 3]
        dx = np.cross(twists[:, :, :3], x[:, None]) + twists[:, :, 3:]
    else:
        x = T[:, :3, 2]
        dx = np.cross(twists[:, :, :3], x[:, None])
    return x, np.swapaxes(dx, 1, 2)


def reduced_task_jacobian(model: ClosedChain, q: Array) -> Array:
    """d task / d q_a (N, 3, a) along the closed chain."""
    S = PassiveSolver(model, Closures(model, q).jacobian()).velocity_map()
    return task(model, q)[1] @ S


def reach_configuration(model: ClosedChain, target: Array, guess: Array | None = None) -> Array:
    """A closed configuration (n,) whose task vector is ``target``.

    Gauss-Newton on the motor values (least-squares steps along the closed
    chain's task Jacobian) from ``guess`` (default home), then from a grid
    of motor values inside the joint limits. Raises WorkbenchError when none
    reaches the target to 1e-9: it is outside the workspace or reachable
    only through a singularity.
    """
    lower, upper = model.tree.lower[model.active], model.tree.upper[model.active]
    span = np.where(np.isfinite(upper - lower), upper - lower, 2 * np.pi)
    middle = np.where(np.isfinite(upper + lower), (upper + lower) / 2, 0.0)
    steps = 5 if len(model.active) <= 2 else 3
    axes = [m + 0.8 * s * np.linspace(-0.5, 0.5, steps) for m, s in zip(middle, span, strict=True)]
    grid = np.stack(np.meshgrid(*axes), -1).reshape(-1, len(model.active))
    first = model.home if guess is None else np.asarray(guess, dtype=float)
    for start in (first, *grid):
        q = _gauss_newton(model, target, start)
        if q is not None:
            return q
    what = "direction" if model.task == "pointing" else "position"
    raise WorkbenchError(
        f"the target {what} {np.round(target, 4).tolist()} is outside the workspace of "
        f"{model.name} (no closed configuration reaches it from {1 + len(grid)} starts)"
    )


def _gauss_newton(model: ClosedChain, target: Array, start: Array) -> Array | None:
    try:
        q = start if start.shape == (model.n,) else solve_passive(model, start)
        q = solve_passive(model, q[model.active], guess=q)
        for _ in range(60):
            error = target - task(model, q)[0][0]
            if np.linalg.norm(error) < 1e-13:
                break
            J = reduced_task_jacobian(model, q[None])[0]
            step = np.linalg.lstsq(J, error, rcond=None)[0]
            step /= max(1.0, np.abs(step).max() / 0.2)
            q = solve_passive(model, q[model.active] + step, guess=q)
    except WorkbenchError:  # singular or outside the workspace on the way
        return None
    lower, upper = model.tree.lower, model.tree.upper
    inside = np.all((q >= lower - 1e-9) & (q <= upper + 1e-9))
    reached = np.linalg.norm(target - task(model, q)[0][0]) <= 1e-9
    return q if inside and reached else None


def task_distance(model: ClosedChain, a: Array, b: Array) -> Array:
    """Angle between pointing directions (rad) or distance between positions (m), rows."""
    if model.task == "pointing":
        return np.arctan2(np.linalg.norm(lie.cross(a, b), axis=-1), np.sum(a * b, axis=-1))
    return np.linalg.norm(a - b, axis=-1)
