"""Where a closed chain's idle joints come to rest under gravity with the motors held.

Idle motions carry no force (:mod:`workbench.closed_chains.dynamics`); at
rest, the forces on their coordinates are the gradient of the potential
energy ``V`` along them, ``f_i = S_i^T g(q)`` (inverse dynamics at rest).
A mechanism at rest with ``f_i != 0`` does not stay there: the idle links
start to fall at once, and where ``V`` is a maximum along them (an unstable
equilibrium) the smallest deviation grows exponentially. talos_like's rod,
at the configuration that closes q = 0, is pulled by 5e-5 N m with a reduced
inertia that makes its linearised motion grow like exp(25 t): an open-loop
simulation of a plan that starts there cannot follow it.

:func:`idle_equilibrium` moves the idle coordinates (the motors held, the
passive joints following the closures) to a minimum of ``V``: Newton's method
on ``f_i = 0`` with the Hessian's eigenvalues taken in absolute value (a
descent direction for ``V`` where the Hessian is indefinite; [Nocedal]
§3.4), steps of at most ``MAX_STEP``, each accepted when the trapezoid
estimate of the change of ``V`` along it, ``(f_i + f_i') . p / 2``, is
negative, and halved while it would leave the joint limits (the NLP's bounds
would then reject the start; a joint of ``q`` beyond a limit may not go further
beyond it): an idle joint whose rest lies beyond a limit stops at it, where
gravity still pulls it. At an equilibrium that is a maximum or a saddle it
steps along the negative curvature. Idle coordinates that move the tool (a tool on an
idle link: their columns of the task Jacobian are not zero) are held where they are.
"""

from __future__ import annotations

import numpy as np

from workbench.closed_chains.dynamics import coordinate_forces
from workbench.closed_chains.kinematics import solve_passive
from workbench.closed_chains.model import ClosedChain
from workbench.closed_chains.task_space import reduced_task_jacobian, task, task_distance
from workbench.errors import WorkbenchError
from workbench.lie import Array

MAX_STEP = 0.3  # rad or m: the largest move of an idle coordinate per step
ITERATIONS = 100
HALVINGS = 30
AT_REST = 1e-12  # |f_i| at or below this times the largest force at rest: an equilibrium
DIFFERENCE = 1e-6  # rad or m: central-difference step of the Hessian
# curvature (per rad) below this times the largest force at rest is none: a thousand times
# the rounding of the central differences (robot_delta's spinning rods: 2e-11 N m/rad)
FLAT = 1e3 * np.finfo(float).eps / DIFFERENCE
TOOL_MOVED = 1e-9  # m or rad: the tool may not move when the idle joints do


def idle_equilibrium(model: ClosedChain, q: Array) -> Array:
    """The closed configuration nearest ``q`` (n,) downhill in the potential energy along
    the idle coordinates (motors as in ``q``) where the idle joints rest, within the
    joint limits (short of a rest beyond them). The idle coordinates that move the tool (a
    tool on an idle link) are held: ``q`` itself without other idle motions, when they rest
    there already, or when the tool would move (module docstring)."""
    a = len(model.actuated)
    try:
        J = reduced_task_jacobian(model, q[None])[0]  # (task, a + i)
    except WorkbenchError:  # the passive joints are not fixed at q
        return q
    free = a + np.flatnonzero(np.abs(J[:, a:]).max(axis=0) <= TOOL_MOVED)  # per rad or m
    if not len(free):
        return q
    lower, upper = np.minimum(model.tree.lower, q), np.maximum(model.tree.upper, q)
    start, x = q, q[model.active].copy()
    forces = _rest_forces(model, q)
    scale = max(float(np.abs(forces).max()), np.finfo(float).tiny)  # N m, or N m per rad
    tolerance, flat = AT_REST * scale, FLAT * scale
    f = forces[free]
    for _ in range(ITERATIONS):
        try:
            hessian = _hessian(model, x, q, free)
        except WorkbenchError:  # a singular configuration within DIFFERENCE: stay here
            break
        values, vectors = np.linalg.eigh(hessian)
        if np.abs(f).max() <= tolerance:
            if values[0] >= -flat:
                break
            step = MAX_STEP * vectors[:, 0]  # an equilibrium on a maximum or saddle: leave it
        else:
            step = -vectors @ ((vectors.T @ f) / np.maximum(np.abs(values), flat))
        step *= min(1.0, MAX_STEP / np.abs(step).max())
        for _ in range(HALVINGS):
            trial = x.copy()
            trial[free] += step
            try:
                q_trial = solve_passive(model, trial, guess=q)
            except WorkbenchError:
                step /= 2
                continue
            if np.any(q_trial < lower) or np.any(q_trial > upper):
                step /= 2
                continue
            f_trial = _rest_forces(model, q_trial)[free]
            if 0.5 * (f + f_trial) @ step < 0.0:
                break
            step /= 2
        else:
            break  # no descent along this direction within its halvings
        x, q, f = trial, q_trial, f_trial
    moved = task_distance(model, task(model, q[None])[0][0], task(model, start[None])[0][0])
    return q if moved <= TOOL_MOVED else start


def _rest_forces(model: ClosedChain, q: Array) -> Array:
    """The forces at rest on the independent coordinates at q: (n,) -> (a + i,), (N, n) ->
    (N, a + i)."""
    return coordinate_forces(model, q, np.zeros_like(q), np.zeros_like(q))


def _hessian(model: ClosedChain, x: Array, q: Array, free: np.ndarray) -> Array:
    """d f / d x of the forces on the independent coordinates ``free`` along them, by central
    differences (the 2 len(free) moved configurations in one batch), symmetrised."""
    steps = np.zeros((len(free), len(x)))
    steps[np.arange(len(free)), free] = DIFFERENCE
    moved = x + np.concatenate([steps, -steps])
    f = _rest_forces(model, solve_passive(model, moved, guess=q))[:, free]
    H = (f[: len(free)] - f[len(free) :]).T / (2 * DIFFERENCE)
    return 0.5 * (H + H.T)
