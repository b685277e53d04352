"""The tool's task space on a closed chain: task vectors, their Jacobians, inverse kinematics.

A closed chain's task is the tool frame's position (``task = "position"``)
or its z axis (``"pointing"``, a unit direction), as the closure file says
(:mod:`workbench.closed_chains.model`). Along the closed chain the task
moves with the motors through ``d x / d q_a = (d x / d q) S``; inverse
kinematics is Gauss-Newton on the motors with the passive joints solved at
every step ([Nocedal], docs/references.md). :func:`reach_bound` is a cheap
necessary condition for a target to be reachable at all.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from workbench import lie
from workbench.chain import PRISMATIC
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


@dataclass(frozen=True)
class ReachBound:
    """A ball (position task, m) or a cap (pointing task, rad) the tool never leaves.

    ``distance(target)`` is the target's distance (m) from ``centre`` or its
    angle (rad) from the unit direction ``centre``; every configuration of the
    tree, closed or not, within its prismatic joints' limits keeps the tool
    within ``radius`` of it (:func:`reach_bound`), so a target farther away is
    unreachable. ``around`` names the centre for messages.
    """

    task: str
    centre: Array
    radius: float
    around: str

    def distance(self, target: ArrayLike) -> float:
        target = np.asarray(target, dtype=float)
        if self.task == "pointing":
            target = target / np.linalg.norm(target)
        return float(task_distance_of(self.task, self.centre, target))

    def beyond(self, target: ArrayLike) -> str | None:
        """Why ``target`` is out of reach, or None when the bound cannot tell."""
        d = self.distance(target)
        if not d > self.radius * (1.0 + 1e-9) + 1e-12:
            return None
        unit = "rad" if self.task == "pointing" else "m"
        return (
            f"is {d:.4g} {unit} from {self.around}, beyond the {self.radius:.4g} {unit} the "
            f"tool can be from there (the joints on its path at their farthest)"
        )


def reach_bound(model: ClosedChain) -> ReachBound:
    """The ball or cap the tool stays in, from the joints on its path in the tree.

    The geometry is taken at the configuration with every revolute joint at
    0 and every prismatic joint at the middle of its limits. Position: a
    point on each revolute joint's axis is fixed in the links before and
    after it, so consecutive such points (and the tool) keep their distance,
    while a prismatic joint changes it by at most half its range; by the
    triangle inequality the tool stays within the sum of these distances of
    the first revolute joint's axis point (moved at most the half ranges of
    the prismatic joints before it). Pointing: the angles between
    consecutive revolute axes (and the tool's z axis) are fixed, and the tool
    stays within their sum of the first revolute joint's axis. The closures
    only remove configurations, so the bound holds for the closed chain; it
    ignores the revolute joints' limits (conservative). A prismatic joint
    without limits gives an infinite radius.
    """
    chain = model.tree
    path = np.flatnonzero(chain.ancestors[:, chain.tool_parent])
    prismatic = np.array([chain.joint_kinds[j] == PRISMATIC for j in path], dtype=bool)
    half = (chain.upper[path] - chain.lower[path]) / 2
    middle = np.zeros(len(path))  # revolute joints: 0 (their limits may be infinite)
    middle[prismatic] = (chain.upper[path][prismatic] + chain.lower[path][prismatic]) / 2
    P = np.eye(4)
    axes = []  # (name, spatial twist at the middle configuration) of the revolute joints
    for j, slide, value in zip(path, prismatic, middle, strict=True):
        if not slide:
            axes.append((chain.joint_names[j], lie.Ad(P) @ chain.twists[j]))
        P = P @ lie.exp_se3(chain.twists[j] * value)
    T = P @ chain.tool_frame
    slack = float(np.sum(half[prismatic]))
    if model.task == "pointing":
        if not axes:
            return ReachBound("pointing", T[:3, 2], 0.0, "the tool's fixed direction")
        directions = [w[:3] / np.linalg.norm(w[:3]) for _, w in axes] + [T[:3, 2]]
        steps = task_distance_of("pointing", np.array(directions[:-1]), np.array(directions[1:]))
        name = axes[0][0]
        return ReachBound("pointing", directions[0], float(np.sum(steps)), f"the axis of {name}")
    points = [lie.cross(w[:3], w[3:]) / float(w[:3] @ w[:3]) for _, w in axes] + [T[:3, 3]]
    steps = np.linalg.norm(np.diff(np.array(points), axis=0), axis=1)
    where = (np.round(points[0], 4) + 0.0).tolist()  # + 0.0: no -0.0
    around = (
        f"{where}, a point on the axis of {axes[0][0]}"
        if axes
        else f"{where} (the tool with its prismatic joints at mid-range)"
    )
    return ReachBound("position", points[0], float(np.sum(steps)) + slack, around)


NEAR_STARTS = 4  # random moves of the guess per size tried by reach_configuration ...
GRID_STARTS = 64  # ... before at most this many points of its grid
STALL, STALL_STEPS = 1e-2, 5  # a start is given up when its error falls by less than STALL
# (relative) in STALL_STEPS Gauss-Newton steps


def reach_configuration(model: ClosedChain, target: Array, guess: Array | None = None) -> Array:
    """A closed configuration (n,) whose task vector is ``target``.

    Gauss-Newton on the motor values (least-squares steps along the closed
    chain's task Jacobian) from ``guess`` (default home), then from seeded
    random moves of it (``NEAR_STARTS`` of 0.05, 0.2 and 0.5 rad: a straight
    leg at home is singular for the foot's motion toward the hip), then from
    at most ``GRID_STARTS`` points of a grid of motor values inside the joint
    limits (3^12 for twelve motors would take hours). Raises WorkbenchError
    when none reaches the target to 1e-9: it is outside the workspace or
    reachable only through a singularity.
    """
    lower, upper = model.tree.lower[model.active], model.tree.upper[model.active]
    bounded = np.isfinite(upper) & np.isfinite(lower)
    span = np.where(
        bounded, np.where(bounded, upper, 0.0) - np.where(bounded, lower, 0.0), 2 * np.pi
    )
    middle = np.where(
        bounded, (np.where(bounded, upper, 0.0) + np.where(bounded, lower, 0.0)) / 2, 0.0
    )
    steps = 5 if len(model.active) <= 2 else 3
    axes = [m + 0.8 * s * np.linspace(-0.5, 0.5, steps) for m, s in zip(middle, span, strict=True)]
    rng = np.random.default_rng(0)
    grid = np.stack(np.meshgrid(*axes), -1).reshape(-1, len(model.active))
    if len(grid) > GRID_STARTS:
        grid = grid[np.sort(rng.choice(len(grid), GRID_STARTS, replace=False))]
    first = model.home if guess is None else np.asarray(guess, dtype=float)
    near = [
        first[model.active] + scale * rng.uniform(-1.0, 1.0, len(model.active))
        for scale in (0.05, 0.2, 0.5) for _ in range(NEAR_STARTS)
    ]  # fmt: skip
    near = [np.clip(start, lower, upper) for start in near]
    grid = [*near, *grid]
    for start in (first, *grid):
        q = _gauss_newton(model, target, start, first)
        if q is not None:
            return q
    what = "direction" if model.task == "pointing" else "position"
    raise WorkbenchError(
        f"the target {what} {np.round(target, 4).tolist()} is outside the workspace of "
        f"{model.name} (no closed configuration reaches it from {1 + len(grid)} starts)"
    )


def _gauss_newton(
    model: ClosedChain, target: Array, start: Array, base: Array | None = None
) -> Array | None:
    """Gauss-Newton from ``start`` (a closed configuration, or motor and idle values closed
    by continuation from ``base``, default home); None where it fails."""
    try:
        q = start if start.shape == (model.n,) else solve_passive(model, start, guess=base)
        q = solve_passive(model, q[model.active], guess=q)
        best, since = np.inf, 0
        for _ in range(60):
            error = target - task(model, q)[0][0]
            size = float(np.linalg.norm(error))
            if size < 1e-13:
                break
            best, since = (size, 0) if size < (1.0 - STALL) * best else (best, since + 1)
            if since >= STALL_STEPS:  # the least-squares point of a target out of reach
                return None
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
    return task_distance_of(model.task, a, b)


def task_distance_of(task: str, a: Array, b: Array) -> Array:
    """:func:`task_distance` for the task "pointing" or "position"."""
    if task == "pointing":
        return np.arctan2(np.linalg.norm(lie.cross(a, b), axis=-1), np.sum(a * b, axis=-1))
    return np.linalg.norm(a - b, axis=-1)
