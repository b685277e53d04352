"""A closed chain's reaching functions on its independent coordinates alone.

Per knot the decision variables are the independent coordinates' values,
velocities and accelerations ``x = (q_a, dq_a, ddq_a)`` (3 m, m = a + i: the
motors, then the idle joints); the passive joints are not variables but
follow from the closures, solved inside the callbacks (:class:`ClosedStates`):
``q`` by continuation and Newton's method from a nearby closed knot of the last evaluations
(:func:`workbench.closed_chains.kinematics.closed_configurations`),
``dq = S dq_a``, ``ddq = S ddq_a + sigma``. The closed state's derivative by
``x`` is the implicit function theorem on the closures at the three levels
(:func:`workbench.ocp.model_functions.closure_levels`, Jacobian ``D``):
``dX_p / dx = -D_p^-1 D_a`` with ``D_p`` the square, block lower-triangular
passive part. The callbacks (:class:`workbench.ocp.bridge.BatchedCallback`):

* ``torque``: the forces of the independent coordinates ``S^T tau_tree`` (motors,
  then idle joints) with Jacobian ``D_tau(X) dX/dx``;
* ``passive``: the passive joints' values and velocities (2 p), only when one of
  them has a finite limit;
* ``task``: the tool's task vector at the last knot, Jacobian ``J(q) S``.

Why: in tree coordinates (:mod:`workbench.ocp.model_functions`) the NLP carries
the closures as constraints, and a passive block ``K_p`` near singular (the
three revolutes of cassie_like's ball joints near gimbal lock: smallest singular
value 0.006) lets IPOPT take steps of 1e3 rad/s^2 along motions the closures
barely see, with multipliers and Hessian regularisation blowing up. Here the
closures are met to Newton's tolerance at every evaluation and IPOPT sees only
the mechanism's own degrees of freedom. Second derivatives: the bridge's
central differences of these Jacobians.
"""

from __future__ import annotations

import numpy as np

from workbench.closed_chains.derivatives import torque_derivatives
from workbench.closed_chains.dynamics import coordinate_regressor
from workbench.closed_chains.kinematics import (
    Closures,
    PassiveSolver,
    acceleration_bias,
    closed_configurations,
)
from workbench.closed_chains.model import ClosedChain
from workbench.closed_chains.task_space import task
from workbench.errors import WorkbenchError
from workbench.inertia import matrix_from_phi
from workbench.lie import Array
from workbench.ocp.bridge import BatchedCallback
from workbench.ocp.model_functions import closure_levels

MEMORY = 4  # evaluations of all knots whose closed configurations start the continuation


class ClosedStates:
    """Closed tree states ``X`` (N, 3 n) of independent knots ``x`` (N, 3 m) and ``dX/dx``.

    The continuation of each knot starts from the closed configuration of that knot
    nearest in its independent values among the last ``MEMORY`` evaluations of all knots
    (a rejected trial step of IPOPT's line search may lie far from the next point; ``N``
    a multiple of the knot count: the bridge's stacked perturbations of every knot; one
    row: the last knot, the task's).
    A knot whose closure cannot be followed there (outside the workspace, through a
    singularity) or where the passive block is singular (the closure no longer fixes the
    passive joints: an IPOPT trial point on robot_delta with heavy rods stopped the solve
    with an error) gets NaN, which IPOPT's line search backs off from.
    ``q_start``: the closed configuration the continuation first starts from, (n,) for
    every knot or (K, n) one per knot (a warm start's: continued from the start
    configuration, the knots of a solution far from it may meet a singularity on the way).
    """

    def __init__(self, model: ClosedChain, rows: np.ndarray, q_start: Array, knots: int):
        self.model, self.rows, self.knots = model, rows, knots
        q_start = np.asarray(q_start, dtype=float)
        self.memory = [np.broadcast_to(q_start, (knots, model.n)).copy()]
        m, n = len(model.active), model.n
        self.columns = np.concatenate([model.active + level * n for level in range(3)])
        self.passive = np.concatenate([model.passive + level * n for level in range(3)])
        self.m = m
        self._key: bytes | None = None
        self._value: tuple = ()

    def __call__(self, x: Array, jacobian: bool) -> tuple[Array, Array | None]:
        """(X (N, 3 n), the passive rows' dX_p/dx (N, 3 p, 3 m) or None); the rows of the
        independent coordinates in X (``columns``) are x itself."""
        key = x.tobytes() + bytes([jacobian])
        if key != self._key:
            self._value = self._closed(x, jacobian)
            self._key = key
        return self._value

    def configurations(self, qa: Array, knot: np.ndarray | None = None) -> Array:
        """Closed configurations (N, n) of independent values ``qa`` (N, m) at knots
        ``knot`` (N,) (by default row r is knot r mod K, or the last knot for fewer rows
        than knots), NaN where the closure cannot be followed."""
        N, K = len(qa), self.knots
        remember = knot is None and N == K  # an evaluation of all knots
        if knot is None:
            knot = np.arange(N) % K if N % K == 0 else np.full(N, K - 1)
        stored = np.stack(self.memory)[:, knot]  # (M, N, n)
        distance = np.abs(stored[:, :, self.model.active] - qa).max(axis=2)
        guess = stored[np.argmin(distance, axis=0), np.arange(N)]
        try:
            q, _ = closed_configurations(self.model, qa, guess, strict=False)
        except WorkbenchError:  # values that are no joint values (not finite)
            q = np.full_like(guess, np.nan)
        if remember:
            self.memory = [np.where(np.isfinite(q), q, guess), *self.memory][:MEMORY]
        return q

    def _closed(self, x: Array, jacobian: bool) -> tuple:
        m = self.m
        qa, dqa, ddqa = x[:, :m], x[:, m : 2 * m], x[:, 2 * m :]
        if len(qa) > self.knots:  # the bridge's stacked perturbations: row r at knot r mod K
            # those of the rates repeat the knots' values: each value is closed once
            _, first, where = np.unique(qa, axis=0, return_index=True, return_inverse=True)
            knot = np.arange(len(qa)) % self.knots
            q = self.configurations(qa[first], knot[first])[where.ravel()]
        else:
            q = self.configurations(qa)
        bad = ~np.isfinite(q).all(axis=1)
        q[bad] = self.memory[0][0]  # any closed configuration: the rows are NaN below
        X, D, singular = self._levels(q, dqa, ddqa, jacobian)
        bad |= singular
        X[bad] = np.nan
        if not jacobian:
            return X, None
        dX_p = _passive_derivatives(D[:, :, self.passive], D[:, :, self.columns])
        dX_p[bad] = np.nan
        return X, dX_p

    def _levels(self, q: Array, dqa: Array, ddqa: Array, jacobian: bool) -> tuple:
        closures = Closures(self.model, q)
        solver = PassiveSolver(self.model, closures.jacobian(), strict=False)
        # one more Newton step: the closure to rounding, not to the continuation's
        # tolerance, so that central differences of these functions (IPOPT's Hessian) see
        # no noise amplified by a badly conditioned passive block
        q = q.copy()
        q[:, self.model.passive] -= solver.solve(closures.residual()[..., None])[..., 0]
        closures = Closures(self.model, q)
        solver = PassiveSolver(self.model, closures.jacobian(), strict=False)
        S = solver.velocity_map()
        dq = (S @ dqa[..., None])[..., 0]
        ddq = (S @ ddqa[..., None])[..., 0] + acceleration_bias(closures, dq, solver)
        X = np.concatenate([q, dq, ddq], axis=1)
        D = closure_levels(self.model, self.rows, X, True)[1] if jacobian else None
        return X, D, solver.singular


def _passive_derivatives(D_p: Array, D_a: Array) -> Array:
    """``dX_p/dx = -D_p^-1 D_a`` (N, 3 p, 3 m) by block forward substitution: D_p (N, 3 p,
    3 p) is block lower-triangular by level with K_p on each diagonal block (three solves of
    size p instead of one of size 3 p)."""
    p = D_p.shape[1] // 3
    K_p = D_p[:, :p, :p]
    out = np.empty(D_a.shape)
    for level in range(3):
        rows = slice(level * p, (level + 1) * p)
        rhs = D_a[:, rows] + D_p[:, rows, : level * p] @ out[:, : level * p]
        out[:, rows] = -np.linalg.solve(K_p, rhs)
    return out


def independent_callbacks(
    model: ClosedChain, knots: int, rows: np.ndarray, q_start: Array, design=None
) -> dict[str, BatchedCallback]:
    """Torque, task and (with finitely limited passive joints) passive callbacks on the
    independent coordinates (module docstring); "design" as in
    :func:`workbench.ocp.model_functions.model_callbacks`."""
    n, m = model.n, len(model.active)
    states = ClosedStates(model, rows, q_start, knots)
    phi_size = 10 * n

    def torque(x, P, jacobian):
        X, dX_p = states(x, jacobian)
        good = np.isfinite(X).all(axis=1)
        q, dq, ddq = X[good, :n], X[good, n : 2 * n], X[good, 2 * n :]
        chain = model if design is None else model.with_inertias(matrix_from_phi(P.reshape(n, 10)))
        d = torque_derivatives(chain, q, dq, ddq, with_eta=False)
        out = [np.full((len(x), m), np.nan)]
        out[0][good] = d.tau
        if jacobian:
            out.append(np.full((len(x), m, 3 * m), np.nan))
            D = np.concatenate([d.dtau_dq, d.dtau_dv, d.dtau_da], axis=-1)
            out[1][good] = D[:, :, states.columns] + D[:, :, states.passive] @ dX_p[good]
            if design is not None:
                out.append(np.full((len(x), m, phi_size), np.nan))
                out[2][good] = coordinate_regressor(chain, q, dq, ddq)
        return tuple(out)

    def passive(x, _P, jacobian):
        X, dX_p = states(x, jacobian)
        rows = np.concatenate([model.passive, model.passive + n])  # dX_p's first 2 p rows
        return (X[:, rows], dX_p[:, : len(rows)]) if jacobian else (X[:, rows],)

    def task_vector(qa, _P, jacobian):
        q = states.configurations(qa)
        closed = np.isfinite(q).all(axis=1)
        q[~closed] = states.memory[0][0]
        value, J = task(model, q)
        value[~closed] = np.nan
        if not jacobian:
            return (value,)
        S = PassiveSolver(model, Closures(model, q).jacobian(), strict=False).velocity_map()
        return value, J @ S

    accelerations = range(2 * m, 3 * m)  # the torque is affine in ddq_a
    rates = range(m, 3 * m)  # ... and quadratic in (dq_a, ddq_a)
    functions: dict = {
        "states": states,  # to rebuild the tree's knots from the solution
        "torque": BatchedCallback(
            "torque", torque, knots, 3 * m, m, n_shared=0 if design is None else phi_size,
            affine_inputs=accelerations, affine_shared=True, quadratic_inputs=rates,
        ),
        "task": BatchedCallback("task", task_vector, 1, m, 3),
    }  # fmt: skip
    tree = model.tree
    limited = np.concatenate([tree.lower, tree.upper, tree.velocity_limit])
    if np.isfinite(limited.reshape(3, n)[:, model.passive]).any():
        functions["passive"] = BatchedCallback(
            "passive", passive, knots, 3 * m, 2 * len(model.passive),
            affine_inputs=accelerations, quadratic_inputs=rates,
        )  # fmt: skip
    return functions
