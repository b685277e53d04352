"""Point-to-point reaching of the spherical five-bar (the project's main job).

Rest-to-rest pointing of the end effector from one direction to another
in a given time, minimising the integral of tau_pr^T tau_pr, with joint,
velocity and torque limits and the loop closure as constraints.

Transcription (K knots, step h = T / (K - 1)): per knot the five joint
values q, velocities dq and accelerations ddq. The motors' motion is a
piecewise-cubic with continuous velocity and piecewise-linear acceleration
(exact integration of ddq between knots) for the active joints; the
passive joints follow from the loop closure imposed at position, velocity
and acceleration level at every knot (:meth:`FiveBar.closure`), so every
knot is a consistent closed-chain state and tau_pr there is the exact
motor torque of that state. The integral of |tau_pr|^2 uses the trapezoid
rule. Boundary conditions: the start configuration's motor angles, zero
motor velocities at both ends and the goal pointing direction (two
components orthogonal to the goal, and a positive component along it).
Limits hold at the knots (between knots the piecewise-cubic motor motion
may exceed a velocity limit by a fraction of a percent). The model
functions enter CasADi through :class:`~workbench.ocp.bridge.BatchedCallback`
with their analytic Jacobians, evaluated for all knots in one batched
call; IPOPT uses the Hessian of the Lagrangian from the callbacks' reverse
mode (central differences of the analytic Jacobians, 1e-11 from CasADi AD).

After a solve the optimal motor torques (linear between knots) are
integrated open loop with the closed-chain dynamics; the final pointing
error reported is that of the simulated motion (the plan itself meets the
goal to the solver tolerance). It falls like h^2 with the knot spacing.
"""

from __future__ import annotations

import os
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import casadi as ca
import numpy as np

from workbench import lie
from workbench.errors import WorkbenchError
from workbench.fivebar import ACTIVE, FiveBar
from workbench.inertia import matrix_from_phi
from workbench.lie import Array
from workbench.ocp.bridge import BatchedCallback
from workbench.ocp.design import DesignSpace

SOLVED = ("Solve_Succeeded", "Solved_To_Acceptable_Level")
INFEASIBLE = ("Infeasible_Problem_Detected", "Restoration_Failed", "Error_In_Step_Computation")


@dataclass(frozen=True)
class ReachProblem:
    """A reaching problem (see the module docstring); directions are unit 3-vectors."""

    start: Array
    goal: Array
    duration: float = 1.0
    knots: int = 100
    minimum_time: bool = False
    duration_bounds: tuple[float, float] = (0.05, 10.0)
    warm_start: Path | None = None
    tolerance: float = 1e-9
    max_iterations: int = 1000
    source: str = "<built-in>"
    design: DesignSpace | None = None

    @classmethod
    def from_toml(cls, path: str | os.PathLike) -> ReachProblem:
        """Read a problem file; every error names the file and the key."""
        path = Path(path)
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise WorkbenchError(f"problem file not found: {path}") from None
        except tomllib.TOMLDecodeError as exc:
            raise WorkbenchError(f"{path}: {exc}") from exc
        return cls.from_dict(raw, str(path), path.parent)

    @classmethod
    def from_dict(cls, raw: dict, source: str, base: Path) -> ReachProblem:
        known = {"task", "transcription", "solver", "design"}
        unknown = set(raw) - known
        if unknown:
            raise WorkbenchError(
                f"{source}: unknown sections {sorted(unknown)}; known: {sorted(known)}"
            )
        task = dict(raw.get("task", {}))
        transcription = dict(raw.get("transcription", {}))
        solver = dict(raw.get("solver", {}))

        def take(table: dict, section: str, key: str, kind, default=None):
            if key not in table:
                if default is None:
                    raise WorkbenchError(f"{source}: [{section}] needs '{key}'")
                return default
            value = table.pop(key)
            try:
                return kind(value)
            except (TypeError, ValueError):
                raise WorkbenchError(
                    f"{source}: [{section}] {key} = {value!r} is not valid"
                ) from None

        def direction(key: str) -> Array:
            v = take(task, "task", key, lambda x: np.asarray(x, dtype=float))
            if v.shape != (3,) or not np.all(np.isfinite(v)) or np.linalg.norm(v) < 1e-9:
                raise WorkbenchError(f"{source}: [task] {key} must be a non-zero 3-vector")
            return v / np.linalg.norm(v)

        start, goal = direction("start"), direction("goal")
        duration = take(task, "task", "duration", float)
        knots = take(transcription, "transcription", "knots", int, 100)
        minimum_time = take(transcription, "transcription", "minimum_time", bool, False)
        bounds = take(
            transcription, "transcription", "duration_bounds", lambda x: tuple(map(float, x)),
            (0.05, 10.0),
        )  # fmt: skip
        warm = transcription.pop("warm_start", None)
        tolerance = take(solver, "solver", "tolerance", float, 1e-9)
        max_iterations = take(solver, "solver", "max_iterations", int, 1000)
        for section, table in (
            ("task", task),
            ("transcription", transcription),
            ("solver", solver),
        ):
            if table:
                raise WorkbenchError(f"{source}: [{section}] has unknown keys {sorted(table)}")
        if duration <= 0 or knots < 3:
            raise WorkbenchError(f"{source}: need duration > 0 and knots >= 3")
        return cls(
            start=start,
            goal=goal,
            duration=duration,
            knots=knots,
            minimum_time=minimum_time,
            duration_bounds=bounds,
            warm_start=None if warm is None else (base / warm),
            tolerance=tolerance,
            max_iterations=max_iterations,
            source=source,
            design=None if "design" not in raw else _design_space(raw["design"], source),
        )


@dataclass
class ReachResult:
    """Outcome of a solve: status is "solved", "infeasible" or "failed"."""

    status: str
    message: str
    t: Array
    q: Array
    dq: Array
    ddq: Array
    tau: Array
    objective: float
    iterations: int
    solve_time_s: float
    max_constraint_violation: float
    final_pointing_error_rad: float = float("nan")
    tracking_error_rad: float = float("nan")
    design: dict = field(default_factory=dict)

    def summary(self) -> dict:
        """The JSON-ready summary of the solve (no trajectories)."""
        return {
            "status": self.status,
            "message": self.message,
            "objective": self.objective,
            "iterations": self.iterations,
            "solve_time_s": self.solve_time_s,
            "max_constraint_violation": self.max_constraint_violation,
            "final_pointing_error_rad": self.final_pointing_error_rad,
            "tracking_error_rad": self.tracking_error_rad,
            "duration_s": float(self.t[-1]),
            "knots": len(self.t),
            "design": self.design,
        }


def point_at(fivebar: FiveBar, direction: Array, guess: Array | None = None) -> Array:
    """A closed configuration (5,) whose end effector points along ``direction``.

    Gauss-Newton on the motor angles with the pointing Jacobian (the
    pointing direction has two degrees of freedom, like the motors), from
    ``guess`` (default home) and then from a 7 x 7 grid of motor angles
    within the joint limits. Raises WorkbenchError when none converges: the
    direction is outside the workspace (e.g. within the proximal arc's
    complement of a motor axis) or only reachable through a singularity.
    """
    _check_arcs_reach(fivebar, direction)
    first = np.zeros(2) if guess is None else np.asarray(guess, dtype=float)[ACTIVE]
    reach = 0.9 * fivebar.chain.upper[[0, 3]]
    grid = np.stack(np.meshgrid(*(np.linspace(-r, r, 7) for r in reach)), -1).reshape(-1, 2)
    for qa in (first, *grid):
        q = _gauss_newton_pointing(fivebar, direction, qa)
        if q is not None:
            return q
    raise WorkbenchError(
        f"the pointing direction {np.round(direction, 4).tolist()} is outside the five-bar's "
        "workspace (no closed configuration points there)"
    )


def _angle(a: Array, b: Array) -> Array:
    """Angle between vectors (rows), accurate near 0 and pi."""
    return np.arctan2(np.linalg.norm(lie.cross(a, b), axis=-1), np.sum(a * b, axis=-1))


def _check_arcs_reach(fivebar: FiveBar, direction: Array) -> None:
    """Spherical triangle inequality on each branch: with proximal arc a_p (motor axis to
    passive axis) and distal arc a_d (passive axis to end effector), the angle between
    the motor axis and the direction must lie in [|a_p - a_d|, min(a_p + a_d, 2 pi - a_p - a_d)]."""

    w = fivebar.axes  # home axes w1..w5; arcs are rigid, so their angles hold everywhere
    for motor, passive in ((0, 1), (3, 4)):
        a_p, a_d = _angle(w[motor], w[passive]), _angle(w[passive], w[2])
        low, high = abs(a_p - a_d), min(a_p + a_d, 2 * np.pi - a_p - a_d)
        angle_to_motor = _angle(w[motor], direction)
        if not low - 1e-12 <= angle_to_motor <= high + 1e-12:
            raise WorkbenchError(
                f"the pointing direction {np.round(direction, 4).tolist()} is outside the "
                f"five-bar's workspace: it is {np.rad2deg(angle_to_motor):.1f} deg from motor "
                f"{motor + 1}'s axis, the arcs reach {np.rad2deg(low):.1f} to "
                f"{np.rad2deg(high):.1f} deg"
            )


def _gauss_newton_pointing(fivebar: FiveBar, direction: Array, qa: Array) -> Array | None:
    """Motor angles from ``qa`` until the pointing error is < 1e-13, else None."""
    try:
        q = fivebar.solve_passive(qa)
        for _ in range(50):
            error = direction - fivebar.pointing(q)
            if np.linalg.norm(error) < 1e-13:
                return q
            J = fivebar.pointing_jacobian(q)[0]
            step = np.linalg.lstsq(J, error, rcond=None)[0]
            qa = qa + step / max(1.0, np.linalg.norm(step) / 0.2)
            q = fivebar.solve_passive(qa, guess=q)
    except WorkbenchError:  # singular or unassembled on the way
        return None
    within = np.all(np.abs(q[ACTIVE]) <= fivebar.chain.upper[[0, 3]])
    return q if within and np.linalg.norm(direction - fivebar.pointing(q)) <= 1e-9 else None


def initial_guess(fivebar: FiveBar, q0: Array, q1: Array, t: Array) -> tuple[Array, Array, Array]:
    """Minimum-jerk motion of the motors from q0 to q1, passive joints on the closed loop."""
    T = t[-1]
    s = t / T
    shape = 10 * s**3 - 15 * s**4 + 6 * s**5
    dshape = (30 * s**2 - 60 * s**3 + 30 * s**4) / T
    ddshape = (60 * s - 180 * s**2 + 120 * s**3) / T**2
    delta = q1[ACTIVE] - q0[ACTIVE]
    qa = q0[ACTIVE] + shape[:, None] * delta
    q = np.empty((len(t), 5))
    previous = q0
    for k in range(len(t)):
        previous = q[k] = fivebar.solve_passive(qa[k], guess=previous)
    dq = fivebar.velocities(q, dshape[:, None] * delta)
    ddq = fivebar.accelerations(q, dq, ddshape[:, None] * delta)
    return q, dq, ddq


def model_callbacks(
    fivebar: FiveBar,
    knots: int,
    finite_differences: bool = False,
    design: DesignSpace | None = None,
) -> dict:
    """The five-bar's torque, closure and pointing functions as batched CasADi callbacks.

    With a ``design`` space the torque takes the link parameters phi (40,)
    as a shared input (tau is linear in phi: d tau / d phi is the
    regressor) and a "design" callback maps the design p to phi.
    """

    def torque(X, P, jacobian):
        q, dq, ddq = X[:, :5], X[:, 5:10], X[:, 10:]
        model = (
            fivebar if design is None else fivebar.with_inertias(matrix_from_phi(P.reshape(4, 10)))
        )
        if not jacobian:
            return (model.torque(q, dq, ddq),)
        d = model.torque_derivatives(q, dq, ddq, with_eta=False)
        by_state = np.concatenate([d.dtau_dq, d.dtau_dv, d.dtau_da], axis=-1)
        if design is None:
            return d.tau, by_state
        return d.tau, by_state, fivebar.torque_regressor(q, dq, ddq)

    def closure(X, _P, jacobian):
        c, J = fivebar.closure(X[:, :5], X[:, 5:10], X[:, 10:])
        return (c, J) if jacobian else (c,)

    def pointing(X, _P, jacobian):
        p = fivebar.pointing(X)
        return (p, fivebar.pointing_derivative(X)) if jacobian else (p,)

    def link_phi(X, _P, jacobian):
        phi, dphi = design.link_phi(X[0])
        return (phi.reshape(1, 40), dphi.reshape(1, 40, -1)) if jacobian else (phi.reshape(1, 40),)

    fd = finite_differences
    accelerations = range(10, 15)  # tau and the closure are affine in ddq
    functions = {
        "torque": BatchedCallback(
            "torque", torque, knots, 15, 2, n_shared=0 if design is None else 40,
            finite_differences=fd, affine_inputs=accelerations, affine_shared=True,
        ),
        "closure": BatchedCallback(
            "closure", closure, knots, 15, 9, finite_differences=fd, affine_inputs=accelerations
        ),
        "pointing": BatchedCallback("pointing", pointing, 1, 5, 3, finite_differences=fd),
    }  # fmt: skip
    if design is not None:
        functions["design"] = BatchedCallback(
            "design", link_phi, 1, design.size, 40, finite_differences=fd
        )
    return functions


def transcribe(
    problem: ReachProblem,
    functions: dict,
    q_start: Array,
    fivebar: FiveBar,
    design: DesignSpace | None = None,
) -> dict:
    """The NLP (CasADi MX) of ``problem`` given model ``functions`` (see the module docstring).

    ``functions`` maps "torque", "closure" and "pointing" to CasADi
    functions of the stacked knot variables (as :func:`model_callbacks`
    builds them); a pure-SX formulation can be passed in their place. With
    a ``design`` space, "design" maps p to the link phi, the torque takes
    phi, p joins the decision variables (after the knots and the duration)
    and the moving mass is bounded by the budget.
    """
    K = problem.knots
    X = ca.MX.sym("X", 15, K)
    duration = ca.MX.sym("T") if problem.minimum_time else problem.duration
    h = duration / (K - 1)
    q, dq, ddq = X[:5, :], X[5:10, :], X[10:, :]
    a = [int(i) for i in ACTIVE]
    g, lbg, ubg = [], [], []

    def equal(expr, value=0.0):
        g.append(ca.vec(expr))
        n = g[-1].numel()
        lbg.append(np.broadcast_to(value, n).ravel())
        ubg.append(np.broadcast_to(value, n).ravel())

    # motors: exact integration of a piecewise-linear acceleration
    qa, dqa, ddqa = q[a, :], dq[a, :], ddq[a, :]
    equal(qa[:, 1:] - qa[:, :-1] - h * dqa[:, :-1] - h**2 / 6 * (2 * ddqa[:, :-1] + ddqa[:, 1:]))
    equal(dqa[:, 1:] - dqa[:, :-1] - h / 2 * (ddqa[:, :-1] + ddqa[:, 1:]))
    equal(functions["closure"](ca.vec(X)))
    # boundary conditions
    equal(qa[:, 0], q_start[ACTIVE])
    equal(dqa[:, 0])
    equal(dqa[:, -1])
    goal_basis = _orthonormal_complement(problem.goal)
    final_pointing = functions["pointing"](q[:, -1])
    equal(goal_basis @ final_pointing)
    g.append(ca.dot(problem.goal, final_pointing))  # not the opposite direction
    lbg.append([0.0])
    ubg.append([np.inf])
    if design is not None:
        p = ca.MX.sym("p", design.size)
        phi = functions["design"](p)
        mass = ca.sum1(phi[::10])
        g.append(mass)
        lbg.append([0.0])
        ubg.append([design.mass_budget])
        tau = functions["torque"](ca.vec(X), phi)
    else:
        tau = functions["torque"](ca.vec(X))
    # torque limits
    limit = np.repeat(fivebar.chain.effort_limit[[0, 3]][None], K, axis=0).ravel()
    g.append(tau)
    lbg.append(-limit)
    ubg.append(limit)
    weights = np.full(K, 1.0)
    weights[[0, -1]] = 0.5
    effort = h * ca.dot(np.repeat(weights, 2), tau**2)
    objective = duration + 1e-3 * effort if problem.minimum_time else effort
    # bounds on the variables
    lower, upper = _state_bounds(fivebar)
    lbx, ubx = np.tile(lower, K), np.tile(upper, K)
    x = ca.vec(X)
    if problem.minimum_time:
        x = ca.vertcat(x, duration)
        lbx = np.append(lbx, problem.duration_bounds[0])
        ubx = np.append(ubx, problem.duration_bounds[1])
    if design is not None:
        x = ca.vertcat(x, p)
        lower_p, upper_p = design.bounds()
        lbx, ubx = np.append(lbx, lower_p), np.append(ubx, upper_p)
    return {
        "nlp": {"x": x, "f": objective, "g": ca.vertcat(*g)},
        "lbx": lbx,
        "ubx": ubx,
        "lbg": np.concatenate(lbg),
        "ubg": np.concatenate(ubg),
        "tau": ca.Function("tau", [x], [tau]),
        "functions": functions,
    }


def _design_space(table: dict, source: str) -> DesignSpace:
    """The ``[design]`` table of a problem file, on the shipped five-bar's design."""
    from workbench.fivebar_design import FiveBarDesign
    from workbench.resources import shipped

    design = FiveBarDesign.from_toml(shipped("models") / "fivebar" / "design.toml")
    return DesignSpace.from_table(design, table, source)


def objective_unit(problem: ReachProblem) -> str:
    """Unit of the objective: the torque integral, or the duration plus 1e-3 of it."""
    return "s + 1e-3 N^2 m^2 s" if problem.minimum_time else "N^2 m^2 s"


def _state_bounds(fivebar: FiveBar) -> tuple[Array, Array]:
    """Bounds on (q, dq, ddq) per knot: joint limits (joint 5 shares joint 3's), velocity limits."""
    chain = fivebar.chain
    position = np.concatenate([chain.upper, chain.upper[2:3]])
    velocity = np.concatenate([chain.velocity_limit, chain.velocity_limit[2:3]])
    upper = np.concatenate([position, velocity, np.full(5, np.inf)])
    lower = np.concatenate([-position, -velocity, np.full(5, -np.inf)])
    return lower, upper


def _orthonormal_complement(v: Array) -> Array:
    """Two unit rows orthogonal to v and to each other."""
    return np.linalg.svd(v[None, :])[2][1:]


def solve(
    problem: ReachProblem,
    fivebar: FiveBar | None = None,
    progress: bool = True,
    functions: dict | None = None,
) -> ReachResult:
    """Solve ``problem`` with IPOPT; unreachable targets and infeasible solves are statuses.

    ``functions`` replaces the model functions (see :func:`transcribe`), e.g.
    by CasADi-native ones for comparison; default :func:`model_callbacks`.
    """
    fivebar = FiveBar.default() if fivebar is None else fivebar
    K = problem.knots
    t = np.linspace(0.0, problem.duration, K)
    try:
        q_start = point_at(fivebar, problem.start)
        q_goal = point_at(fivebar, problem.goal, guess=q_start)
    except WorkbenchError as exc:
        return _unsolved("infeasible", str(exc), t, K)
    guess = _warm_start(problem, fivebar, q_start, q_goal, t)
    design = problem.design
    if functions is None:  # CasADi holds callbacks weakly: ``functions`` keeps them alive
        functions = model_callbacks(fivebar, K, design=design)
    problem_nlp = transcribe(problem, functions, q_start, fivebar, design)
    x0 = guess.ravel()  # knot by knot, as ca.vec(X) stacks the columns of X (15, K)
    if problem.minimum_time:
        x0 = np.append(x0, problem.duration)
    if design is not None:
        x0 = np.append(x0, np.zeros(design.size))
    options = {
        "ipopt.hessian_approximation": "exact",
        "ipopt.tol": problem.tolerance,
        "ipopt.constr_viol_tol": 1e-10,
        "ipopt.max_iter": problem.max_iterations,
        "ipopt.print_level": 5 if progress else 0,
        "ipopt.sb": "yes",
        "print_time": False,
    }
    if problem.warm_start is not None:  # start near the previous solution's barrier level
        options.update({"ipopt.mu_init": 1e-6, "ipopt.bound_push": 1e-9, "ipopt.bound_frac": 1e-9})
    solver = ca.nlpsol("reach", "ipopt", problem_nlp["nlp"], options)
    started = time.perf_counter()
    sol = solver(
        x0=x0,
        lbx=problem_nlp["lbx"],
        ubx=problem_nlp["ubx"],
        lbg=problem_nlp["lbg"],
        ubg=problem_nlp["ubg"],
    )
    elapsed = time.perf_counter() - started
    stats = solver.stats()
    x = np.asarray(sol["x"]).ravel()
    duration = float(x[-1]) if problem.minimum_time else problem.duration
    X = x[: 15 * K].reshape(K, 15)
    t = np.linspace(0.0, duration, K)
    g = np.asarray(sol["g"]).ravel()
    violation = float(
        max(
            np.max(problem_nlp["lbg"] - g, initial=0.0), np.max(g - problem_nlp["ubg"], initial=0.0)
        )
    )
    status_text = stats["return_status"]
    status = (
        "solved"
        if status_text in SOLVED
        else "infeasible"
        if status_text in INFEASIBLE
        else "failed"
    )
    tau = np.asarray(problem_nlp["tau"](x)).reshape(K, 2)
    result = ReachResult(
        status=status,
        message=status_text,
        t=t,
        q=X[:, :5],
        dq=X[:, 5:10],
        ddq=X[:, 10:],
        tau=tau,
        objective=float(sol["f"]),
        iterations=int(stats["iter_count"]),
        solve_time_s=elapsed,
        max_constraint_violation=violation,
        design={} if design is None else _design_summary(design, x[len(x) - design.size :]),
    )
    if status == "solved":
        if design is not None:
            fivebar = fivebar.with_inertias(matrix_from_phi(np.array(result.design["link_phi"])))
        _simulate(fivebar, problem, result)
    return result


def _simulate(fivebar: FiveBar, problem: ReachProblem, result: ReachResult) -> None:
    """Forward-simulate the optimal motor torques (closed-chain dynamics, RK4) from the start.

    Sets the final pointing error (angle between the simulated end-effector
    direction and the goal) and the largest angle between the simulated and
    the planned pointing over the knots.
    """
    # one RK4 step per knot interval: 4 substeps change the final error by 2e-5 rad of 1.2e-3
    q, _ = fivebar.simulate(result.t, result.tau, result.q[0], result.dq[0, ACTIVE], substeps=1)

    simulated = fivebar.pointing(q)
    result.final_pointing_error_rad = float(_angle(simulated[-1], problem.goal))
    result.tracking_error_rad = float(np.max(_angle(simulated, fivebar.pointing(result.q))))


def _design_summary(design: DesignSpace, p: Array) -> dict:
    """Designed quantities before (nominal) and after, their bounds and the moving mass."""
    lower, upper = design.bounds()
    nominal = design.nominal_values()
    phi = design.link_phi(p)[0]
    variables = {
        name: {
            "before": float(n),
            "after": float(n + value),
            "lower": float(n + lo),
            "upper": float(n + up),
        }
        for name, n, value, lo, up in zip(design.names, nominal, p, lower, upper, strict=True)
    }
    return {
        "variables": variables,
        "unit": "m (arc_width: the arcs' width; <part>_offset: its distance from the centre)",
        "moving_mass_kg": {
            "before": design.moving_mass(np.zeros(design.size)),
            "after": float(phi[:, 0].sum()),
        },
        "mass_budget_kg": design.mass_budget,
        "link_phi": phi.tolist(),
    }


def _warm_start(problem, fivebar, q_start, q_goal, t) -> Array:
    """Knot variables (K, 15): a previous trajectory file if given, else minimum jerk."""
    if problem.warm_start is not None:
        try:
            data = np.load(problem.warm_start)
            previous = [np.asarray(data[key], dtype=float) for key in ("t", "q", "dq", "ddq")]
        except (OSError, KeyError, ValueError) as exc:
            raise WorkbenchError(f"warm start {problem.warm_start}: {exc}") from exc
        t_old = previous[0] / previous[0][-1] * t[-1]
        return np.column_stack(
            [np.interp(t, t_old, column) for array in previous[1:] for column in array.T]
        )
    q, dq, ddq = initial_guess(fivebar, q_start, q_goal, t)
    return np.concatenate([q, dq, ddq], axis=1)


def _unsolved(status: str, message: str, t: Array, K: int) -> ReachResult:
    empty = np.full((K, 5), np.nan)
    return ReachResult(
        status,
        message,
        t,
        empty,
        empty,
        empty,
        np.full((K, 2), np.nan),
        float("nan"),
        0,
        0.0,
        float("nan"),
    )
