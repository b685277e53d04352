"""The reaching NLP ordered stage by stage, for FATROP and HPIPM.

The same transcription as :func:`workbench.ocp.reach.transcribe` (fixed
duration, no design), with its variables and constraints interleaved by
knot as the structure-exploiting solvers need them. Stage k holds

* the state ``s_k = (q_a, dq_a, ddq_a)`` of the motors (3 a);
* the controls ``u_k = (q_p, dq_p, ddq_p, a_k)``: the passive joints'
  values, rates and accelerations, and ``a_k = ddq_a`` at knot k + 1,
  so that the motors' piecewise cubic is an explicit map
  ``s_{k+1} = F(s_k, u_k)``:
  ``q_a + h dq_a + h^2 / 6 (2 ddq_a + a_k)``, ``dq_a + h / 2 (ddq_a + a_k)``, ``a_k``;
  the last stage has no controls (HPIPM's form): its passive joints are
  states too, equal to copies ``w`` among the controls of the stage before;
* the constraints: first the gap ``sign (s_{k+1} - F(s_k, u_k)) = 0`` (3 a,
  or 3 n into the last stage; FATROP wants sign 1, HPIPM -1), then the
  stage's own: closure at three levels, torque limits, and the boundary
  conditions of the first and the last knot.

``equality`` flags every constraint; ``nx, nu, ng`` give the stage sizes
(FATROP's and HPIPM's manual structure).
"""

from __future__ import annotations

import casadi as ca
import numpy as np

from workbench.closed_chains.model import ClosedChain
from workbench.errors import WorkbenchError
from workbench.lie import Array
from workbench.ocp.nlp import Constraints
from workbench.ocp.problem import ReachProblem


def check_stagewise(problem: ReachProblem) -> None:
    """Stage-wise solvers need a fixed duration and no design (both span all stages)."""
    if problem.minimum_time or problem.design is not None:
        raise WorkbenchError(
            f"{problem.source}: [solver] name = {problem.solver!r} needs a fixed duration and "
            'no [design] (both are variables shared by all knots); use "ipopt"'
        )


def transcribe_stagewise(
    problem: ReachProblem,
    model: ClosedChain,
    functions: dict,
    q_start: Array,
    goal: Array,
    goal_basis: Array,
    sign: float = 1.0,
) -> dict:
    """The stage-ordered NLP (module docstring) with the keys of ``reach.transcribe`` and
    ``structure`` (N, nx, nu, ng, equality), ``to_knots`` (x -> (3 n, K)) and
    ``from_knots`` (knot values (K, 3 n) -> x)."""
    check_stagewise(problem)
    n, K = model.n, problem.knots
    active = [int(i) for i in model.active]
    passive = [int(i) for i in model.passive]
    a, p = len(active), len(passive)
    h = problem.duration / (K - 1)
    states = [ca.MX.sym(f"s{k}", 3 * a) for k in range(K - 1)] + [ca.MX.sym("s", 3 * n)]
    sizes = [3 * p + a] * (K - 2) + [3 * p + a + 3 * p, 0]
    controls = [ca.MX.sym(f"u{k}", size) for k, size in enumerate(sizes)]
    # knot rows of (s, u[:3 p]) and, inverted, the knot from them
    rows = np.concatenate([np.array(joints, dtype=int) + j * n
                           for joints in (active, passive) for j in range(3)])  # fmt: skip
    inverse = np.argsort(rows)
    knots = []
    for k in range(K):
        s, u = states[k], controls[k]
        own = ca.vertcat(s, u[: 3 * p]) if k < K - 1 else s
        knots.append(own[inverse.tolist()])
    X = ca.horzcat(*knots)
    closure = ca.reshape(functions["closure"](ca.vec(X)), -1, K)
    tau = ca.reshape(functions["torque"](ca.vec(X)), a, K)
    final = functions["task"](X[:n, -1])
    limit = model.coordinate_effort  # idle joints: zero force
    lower, upper = _state_bounds(model, active, passive)
    c, structure = Constraints(), {"nx": [], "nu": [], "ng": [], "equality": []}
    lbx, ubx, x = [], [], []
    for k in range(K):
        before = _size(c)
        s, u = states[k], controls[k]
        if k < K - 1:
            qa, dqa, ddqa = s[:a], s[a : 2 * a], s[2 * a : 3 * a]
            nxt = u[3 * p : 3 * p + a]
            following = states[k + 1]
            F = [qa + h * dqa + h**2 / 6 * (2 * ddqa + nxt), dqa + h / 2 * (ddqa + nxt), nxt]
            if k == K - 2:
                F.append(u[3 * p + a :])
            c.equal(sign * (following - ca.vertcat(*F)))
        gap = _size(c) - before
        c.equal(closure[:, k])
        c.within(tau[:, k], -limit, limit)
        if k == 0:
            c.equal(s[:a], q_start[active])
            c.equal(s[a : 2 * a])
        if k == K - 1:
            c.equal(s[a : 2 * a])
            c.equal(goal_basis @ (final - goal))
            if model.task == "pointing":
                c.within(ca.dot(goal, final), 0.0, np.inf)
        structure["nx"].append(int(s.numel()))
        structure["nu"].append(int(u.numel()))
        structure["ng"].append(_size(c) - before - gap)
        x += [s, u]
        if k < K - 1:  # (s, passive, a_k [, w])
            extra = u.numel() - 3 * p
            lbx += [lower, np.full(extra, -np.inf)]
            ubx += [upper, np.full(extra, np.inf)]
        else:
            lbx.append(lower)
            ubx.append(upper)
    g, lbg, ubg = c.stacked()
    structure["equality"] = (lbg == ubg).tolist()
    structure["N"] = K - 1
    weights = np.full(K, 1.0)
    weights[[0, -1]] = 0.5
    effort = h * ca.dot(ca.vec(ca.repmat(weights.reshape(1, -1), a, 1)), ca.vec(tau) ** 2)
    x = ca.vertcat(*x)

    def from_knots(values: Array) -> Array:
        parts = []
        for k in range(K):
            parts.append(values[k, rows])
            if k < K - 1:
                parts.append(values[k + 1, [2 * n + i for i in active]])
            if k == K - 2:
                parts.append(values[k + 1, rows[3 * a :]])
        return np.concatenate(parts)

    return {
        "nlp": {"x": x, "f": effort, "g": g},
        "lbx": np.concatenate(lbx),
        "ubx": np.concatenate(ubx),
        "lbg": lbg,
        "ubg": ubg,
        "tau": ca.Function("tau", [x], [ca.vec(tau)]),
        "to_knots": ca.Function("knots", [x], [X]),
        "from_knots": from_knots,
        "structure": structure,
    }


def _size(constraints: Constraints) -> int:
    return int(sum(len(b) for b in constraints.lower))


def _state_bounds(model: ClosedChain, active, passive) -> tuple[Array, Array]:
    """Bounds on (q_a, dq_a, ddq_a, q_p, dq_p, ddq_p): joint and velocity limits."""
    tree = model.tree
    infinite = np.full(model.n, np.inf)
    lower = [tree.lower, -tree.velocity_limit, -infinite]
    upper = [tree.upper, tree.velocity_limit, infinite]
    pick = [active] * 3 + [passive] * 3
    return (
        np.concatenate([b[i] for b, i in zip(lower * 2, pick, strict=True)]),
        np.concatenate([b[i] for b, i in zip(upper * 2, pick, strict=True)]),
    )
