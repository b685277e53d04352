"""Point-to-point reaching of a closed chain: the project's main job.

Rest-to-rest motion of the tool from one task vector to another in a given
time (a pointing direction for the spherical five-bar, a position for the
planar five-bar, the four-bar and the delta robot), minimising the integral
of the squared motor torques, with joint, velocity and torque limits and
the loop closures as constraints (problem files: :mod:`workbench.ocp.problem`).

Transcription (K knots, step h = T / (K - 1)): per knot the tree's joint
values q, velocities dq and accelerations ddq. The motors' motion is a
piecewise cubic with continuous velocity and piecewise-linear acceleration
(exact integration of ddq between knots); the passive joints follow from
the closures imposed at position, velocity and acceleration level at every
knot on their independent rows (:func:`workbench.ocp.model_functions.closure_levels`),
so every knot is a consistent closed-chain state and the motor torques there
are exact. The integral of |tau_a|^2 uses the trapezoid rule. Boundary
conditions: the start configuration's motor values (idle joints where they rest under
gravity, :func:`workbench.closed_chains.statics.idle_equilibrium`: a plan cannot start an
open-loop motion from where they fall), zero motor velocities at both ends, and
the goal in the directions the tool can move there (the range of the task Jacobian
at the goal: two directions orthogonal to a pointing goal, and a positive component
along it). Limits hold at the knots. The model functions enter CasADi as batched
callbacks with their
analytic Jacobians (:mod:`workbench.ocp.model_functions`); IPOPT's
Hessian of the Lagrangian comes from the callbacks' reverse mode
(:mod:`workbench.ocp.bridge`).

Closed chains without exact second derivatives (example-parallel-robots
folders, trees of more than ``SX_JOINTS`` joints) are transcribed on their
independent coordinates alone (:mod:`workbench.ocp.independent_coordinates`):
the knots hold the motors' and idle joints' (q, dq, ddq), the callbacks solve
the passive joints, and the closures are no NLP constraints (a passive block near
singular, such as cassie_like's ball joints near gimbal lock, made IPOPT fail
1,000 iterations in tree coordinates; 18 iterations this way). Their fine grids
start from the solution on a coarse one (:func:`solve`).

A closed chain with more motors than the tool has directions (a leg's six motors for its
foot's three coordinates) leaves the postures that hold the tool free, and the squared
torques alone pull them far: gravity's torques fall as a leg swings toward hanging, and
IPOPT crept along such motions for hundreds of iterations, its Hessian indefinite at every
step (digit_like_2legs, battobot_6d: not finished in 12 min and more).
Their objective has two regularisation terms, as Crocoddyl's state and control
regularisation costs do: the motors' squared distance from the start posture, weighted so
that 1 rad costs the squared static torques of holding the start, and a virtual armature
(1 % of the largest reduced inertia) on every motor's acceleration, without which the light
motors' accelerations, which cost almost no torque, alternate from knot to knot
(:func:`regularisation_weights`). ``objective`` stays the torque integral; the terms'
value is reported beside it. Where such a problem still creeps (digit_like_2legs_6D: the
objective falling by 3e-6 relative per iteration after 70), it stops as problems with
idle joints do, once the constraints hold and the objective has moved by less than 1e-5
relative for 15 iterations (:func:`workbench.ocp.nlp.ipopt_options`).

After a solve the optimal motor torques (linear between knots) are
integrated open loop with the closed-chain dynamics; the final task error
reported is that of the simulated motion (the plan meets the goal to the
solver tolerance). It falls like h^2 with the knot spacing.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import casadi as ca
import numpy as np

from workbench.closed_chains.dynamics import (
    forward_dynamics,
    motor_torques,
    reduced_inertia,
    simulate,
)
from workbench.closed_chains.kinematics import (
    accelerations,
    independent_rows,
    residual,
    solve_passive,
    velocities,
)
from workbench.closed_chains.model import ClosedChain
from workbench.closed_chains.statics import idle_equilibrium
from workbench.closed_chains.task_space import (
    reach_bound,
    reach_configuration,
    reduced_task_jacobian,
    task,
    task_distance,
)
from workbench.config import check_memory
from workbench.errors import WorkbenchError
from workbench.inertia import matrix_from_phi
from workbench.io import interrupts_received, reraise_interrupt
from workbench.lie import Array
from workbench.ocp.bridge import BatchedCallback
from workbench.ocp.contract import Infeasible
from workbench.ocp.independent_coordinates import independent_callbacks
from workbench.ocp.model_functions import (
    has_exact_hessians,
    load_kernels,
    model_callbacks,
)
from workbench.ocp.nlp import (
    INTERRUPTED,
    Constraints,
    interrupt_warnings_dropped,
    ipopt_options,
    stagewise_solver,
    status,
    violation,
)
from workbench.ocp.problem import ReachProblem, ReachResult
from workbench.ocp.stages import transcribe_stagewise

# memory per knot and squared state size (3 n), measured on the five-bar (about 650 bytes at
# 100 to 1600 knots), rounded up
KNOT_BYTES = 1024
COARSE = 0.05  # transcription error, as a fraction of the tool's travel, that makes a warning
DRIFT = 0.01  # m or rad: a simulated end error below this and COARSE of the travel is no warning
SHORT_TRAVEL = 1e-3  # m or rad: travel below this is judged against it, not as a fraction
IDLE_RANGE = np.pi / 2  # rad: how far an idle joint may move from the start (independent)
SUBSTEPS = (1, 8, 64)  # RK4 steps per knot interval of the simulation, tried in turn
COARSE_KNOTS = 30  # knots of the first solve of a fine independent-coordinate problem
POSTURE = 1.0  # posture weight: squared static motor torques at the start per rad^2 (or m^2)
ARMATURE = 1e-2  # virtual armature of every motor: of the largest reduced inertia at the start
WARM_CLOSED = 1e-6  # closure residual of interpolated warm-start knots Newton starts from


# ------------------------------------------------------------ configurations
def initial_guess(model: ClosedChain, q0: Array, q1: Array, t: Array) -> Array:
    """Knot variables (K, 3 n): minimum-jerk motion of the motors, passive joints following."""
    s = t / t[-1]
    shape = 10 * s**3 - 15 * s**4 + 6 * s**5
    dshape = (30 * s**2 - 60 * s**3 + 30 * s**4) / t[-1]
    ddshape = (60 * s - 180 * s**2 + 120 * s**3) / t[-1] ** 2
    delta = q1[model.active] - q0[model.active]
    q = solve_passive(model, q0[model.active] + shape[:, None] * delta, guess=q0)
    dq = velocities(model, q, dshape[:, None] * delta)
    ddq = accelerations(model, q, dq, ddshape[:, None] * delta)
    return np.concatenate([q, dq, ddq], axis=1)


# ------------------------------------------------------------ transcription
def regularisation_weights(model: ClosedChain, q_start: Array) -> tuple[float, float]:
    """Weights ``(w, b)`` of the posture and acceleration terms of a closed chain with more
    motors than the tool has directions (module docstring); (0, 0) for any other.

    ``w = POSTURE |tau_s|^2`` per rad^2 (m^2 on prismatic motors), ``tau_s`` the motors'
    static torques at ``q_start``: a motor 1 rad away from its start costs as much as
    holding the start; ``b = ARMATURE lambda_max``, ``lambda_max`` the largest eigenvalue of
    the motors' reduced inertia ``S^T M S`` there: every motor's acceleration costs as if it
    carried that share of the heaviest inertia as a rotor.
    """
    motors = len(model.actuated)
    J = reduced_task_jacobian(model, q_start[None])[0][:, :motors]
    if motors <= _rank(np.linalg.svd(J, compute_uv=False)):
        return 0.0, 0.0
    rest = np.zeros(model.n)
    static = motor_torques(model, q_start, rest, rest)
    inertia = np.linalg.eigvalsh(reduced_inertia(model, q_start)[:motors, :motors])[-1]
    return POSTURE * float(static @ static), ARMATURE * float(inertia)


def goal_rows(model: ClosedChain, q_goal: Array) -> Array:
    """Directions (r, 3) of the task space the tool can move in at the goal (range of J)."""
    U, s, _ = np.linalg.svd(reduced_task_jacobian(model, q_goal[None])[0])
    return U[:, : _rank(s)].T


def _rank(s: Array) -> int:
    """The count of singular values ``s`` above 1e-9 of the largest."""
    return int(np.sum(s > 1e-9 * max(s.max(initial=0.0), 1e-300)))


def transcribe(
    problem: ReachProblem,
    model: ClosedChain,
    functions: dict,
    q_start: Array,
    goal: Array,
    goal_basis: Array,
    regularisation: tuple[float, float] = (0.0, 0.0),
) -> dict:
    """The NLP (CasADi MX) of ``problem`` given the model ``functions`` (module docstring).

    ``regularisation`` (w, b): the weights of the posture and acceleration terms
    (:func:`regularisation_weights`) added to the objective; ``"regularisation"`` in the
    result gives their value.

    ``functions`` maps "torque", "closure" and "task" (and "design" with a
    design space) to CasADi functions of the stacked knot variables, as
    :func:`workbench.ocp.model_functions.model_callbacks` builds them; a
    pure-SX formulation can be passed in their place.
    """
    independent = "closure" not in functions  # knots of the independent coordinates
    n, K = len(model.active) if independent else model.n, problem.knots
    active = list(range(n)) if independent else [int(i) for i in model.active]
    X = ca.MX.sym("X", 3 * n, K)
    duration = ca.MX.sym("T") if problem.minimum_time else problem.duration
    h = duration / (K - 1)
    q, dq, ddq = X[:n, :], X[n : 2 * n, :], X[2 * n :, :]
    c = Constraints()
    qa, dqa, ddqa = q[active, :], dq[active, :], ddq[active, :]
    c.equal(qa[:, 1:] - qa[:, :-1] - h * dqa[:, :-1] - h**2 / 6 * (2 * ddqa[:, :-1] + ddqa[:, 1:]))
    c.equal(dqa[:, 1:] - dqa[:, :-1] - h / 2 * (ddqa[:, :-1] + ddqa[:, 1:]))
    lower, upper = state_bounds(model)
    if not independent:
        c.equal(functions["closure"](ca.vec(X)))
    elif "passive" in functions:
        levels = np.concatenate([model.passive, model.passive + model.n])
        c.within(functions["passive"](ca.vec(X)), np.tile(lower[levels], K),
                 np.tile(upper[levels], K))  # fmt: skip
    c.equal(qa[:, 0], q_start[model.active])
    c.equal(dqa[:, 0])
    c.equal(dqa[:, -1])
    final = functions["task"](q[:, -1])
    c.equal(goal_basis @ (final - goal))
    if model.task == "pointing":
        c.within(ca.dot(goal, final), 0.0, np.inf)  # not the opposite direction
    design = problem.design
    if design is not None:
        p = ca.MX.sym("p", design.size)
        phi = functions["design"](p)
        c.within(ca.sum1(phi[::10]), 0.0, design.mass_budget)
        tau = functions["torque"](ca.vec(X), phi)
    else:
        tau = functions["torque"](ca.vec(X))
    limit = np.tile(model.coordinate_effort, K)  # idle joints: zero force
    c.within(tau, -limit, limit)
    weights = np.full(K, 1.0)
    weights[[0, -1]] = 0.5
    effort = h * ca.dot(np.repeat(weights, len(active)), tau**2)
    w, b = regularisation
    motors = len(model.actuated)
    moved = qa[:motors, :] - np.asarray(q_start)[model.active[:motors], None]
    regular = ca.MX(0.0)
    if w > 0.0 or b > 0.0:  # trapezoids of the squared motor displacements and accelerations
        regular = h * ca.mtimes(w * ca.sum1(moved**2) + b**2 * ca.sum1(ddqa[:motors, :] ** 2),
                                weights)  # fmt: skip
    objective = duration + 1e-3 * effort if problem.minimum_time else effort + regular
    if independent:
        columns = functions["states"].columns
        lower, upper = lower[columns], upper[columns]
        # idle joints within IDLE_RANGE of the start: the coordinates chosen there for the
        # idle motions stay coordinates (talos_like's rod turned by 2.9 rad onto a
        # configuration where its joint no longer is one, and the closure stopped there)
        idle = np.arange(len(model.actuated), n)
        lower[idle] = np.maximum(lower[idle], q_start[model.active[idle]] - IDLE_RANGE)
        upper[idle] = np.minimum(upper[idle], q_start[model.active[idle]] + IDLE_RANGE)
    lbx, ubx, x = np.tile(lower, K), np.tile(upper, K), ca.vec(X)
    if problem.minimum_time:
        x = ca.vertcat(x, duration)
        lbx = np.append(lbx, problem.duration_bounds[0])
        ubx = np.append(ubx, problem.duration_bounds[1])
    if design is not None:
        x = ca.vertcat(x, p)
        lower_p, upper_p = design.bounds()
        lbx, ubx = np.append(lbx, lower_p), np.append(ubx, upper_p)
    g, lbg, ubg = c.stacked()
    return {
        "nlp": {"x": x, "f": objective, "g": g},
        "lbx": lbx,
        "ubx": ubx,
        "lbg": lbg,
        "ubg": ubg,
        "tau": ca.Function("tau", [x], [tau]),
        "regularisation": ca.Function("regularisation", [x], [regular]),
    }


def _stagewise(problem, model, functions, q_start, q_goal, goal, t, progress, warm) -> tuple:
    """The stage-ordered NLP, its FATROP or SQP-HPIPM solver and initial guess."""
    sign = 1.0 if problem.solver == "fatrop" else -1.0  # the gaps' sign each wants
    nlp = transcribe_stagewise(
        problem, model, functions, q_start, goal, goal_rows(model, q_goal), sign
    )
    x0 = nlp["from_knots"](_warm_start(problem, model, q_start, q_goal, t, warm))
    solver = stagewise_solver(
        problem.solver, nlp["nlp"], nlp["structure"], problem.tolerance,
        problem.max_iterations, progress,
    )  # fmt: skip
    return nlp, solver, x0


def state_bounds(model: ClosedChain) -> tuple[Array, Array]:
    """Bounds on (q, dq, ddq) per knot: joint limits and velocity limits of the tree."""
    tree = model.tree
    upper = np.concatenate([tree.upper, tree.velocity_limit, np.full(model.n, np.inf)])
    lower = np.concatenate([tree.lower, -tree.velocity_limit, np.full(model.n, -np.inf)])
    return lower, upper


# --------------------------------------------------------------------- solve
def task_targets(problem: ReachProblem, model: ClosedChain) -> tuple[Array, Array]:
    """Start and goal task vectors; pointing directions are normalised."""
    if model.task != "pointing":
        return problem.start, problem.goal
    out = []
    for name, v in (("start", problem.start), ("goal", problem.goal)):
        norm = np.linalg.norm(v)
        if norm < 1e-9:
            raise WorkbenchError(f"{problem.source}: [task] {name} must be a non-zero direction")
        out.append(v / norm)
    return out[0], out[1]


def solve(
    problem: ReachProblem,
    model: ClosedChain | None = None,
    progress: bool = True,
    functions: Callable[..., dict] = model_callbacks,
    warm: dict[str, Array] | None = None,
    on_solved: Callable[[ReachResult], None] | None = None,
) -> ReachResult:
    """Solve ``problem`` with IPOPT; targets the inverse kinematics cannot reach and
    infeasible solves are statuses, a target beyond the tool's reach (:func:`check_reach`)
    raises :class:`~workbench.ocp.contract.Infeasible` first.

    ``model`` defaults to the problem's; ``functions(model, knots, rows,
    design)`` builds the model functions (see :func:`transcribe`; default
    the analytic callbacks, e.g. CasADi-native ones for comparison). ``warm``
    (arrays t, q, dq, ddq of a previous solve, e.g. a sweep's neighbour)
    starts IPOPT there instead of from ``problem.warm_start`` or the
    minimum-jerk guess. ``on_solved(result)`` is called on a solved result before
    its open-loop simulation (e.g. to start drawing it). Ctrl-C during the solve
    raises KeyboardInterrupt,
    SIGTERM (under the command line's handlers,
    :func:`workbench.io.raise_on_sigterm`) Terminated, once IPOPT has
    stopped, whether a callback or IPOPT's own check caught it.

    Problems on independent coordinates with more than ``2 COARSE_KNOTS`` knots and no
    warm start are solved on ``COARSE_KNOTS`` knots first, and that solution, interpolated
    as the transcription interpolates (:func:`interpolate_knots`), starts the solve on
    all knots (the result counts the iterations and time of both; where that solve fails,
    a solve from the minimum-jerk guess follows, as without the coarse grid). IPOPT's
    iterations far from the optimum then cost a fraction of those on the fine grid, and the
    fine solve starts near its optimum (cassie_like on 100 knots: 18 iterations, 19.9 s from
    the minimum-jerk guess, 18 + 7 and 16.7 s this way, the same optimum; digit_like's leg
    on 100 knots ends 7.9e-5 m from its goal, its 40-knot plan could not be simulated).
    """
    model = problem.closed_chain() if model is None else model
    result = _solve(problem, model, progress, functions, warm)
    if result.status == "solved":
        if on_solved is not None:
            on_solved(result)
        if problem.design is not None:
            phi = np.array(result.design["link_phi"])
            model = model.with_inertias(matrix_from_phi(phi))
        start, goal = task_targets(problem, model)
        _check_motion(problem, model, start, goal, result)
    return result


def _solve(
    problem: ReachProblem,
    model: ClosedChain,
    progress: bool,
    functions: Callable[..., dict],
    warm: dict[str, Array] | None,
    refine: bool = True,
) -> ReachResult:
    """:func:`solve` up to its result, before the result's simulation; ``refine``: a
    coarse solve first where :func:`solve` says."""
    K = problem.knots
    per_knot = KNOT_BYTES * (3 * model.n) ** 2
    check_memory(
        f"{problem.source}: [transcription] knots = {K}", K * per_knot,
        f"{per_knot / 2**10:.0f} KiB per knot for {model.n} tree joints",
    )  # fmt: skip
    t = np.linspace(0.0, problem.duration, K)
    start, goal = task_targets(problem, model)
    check_reach(problem, model)
    try:
        q_start = idle_equilibrium(model, reach_configuration(model, start))
        q_goal = idle_equilibrium(model, reach_configuration(model, goal, guess=q_start))
    except WorkbenchError as exc:
        return _unsolved("infeasible", str(exc), t, problem, model)
    longest = problem.duration_bounds[1] if problem.minimum_time else problem.duration
    too_short = duration_check(model, q_start, q_goal, longest)
    if too_short is not None:
        return _unsolved("infeasible", too_short, t, problem, model)
    design = problem.design
    rows = independent_rows(model, q_start)
    independent = functions is model_callbacks and problem.solver == "ipopt"
    independent = independent and not has_exact_hessians(model)
    coarse = None
    refine = refine and independent and warm is None and problem.warm_start is None
    if refine and design is None and K > 2 * COARSE_KNOTS and not problem.minimum_time:
        if progress:
            print(f"{problem.source}: solving on {COARSE_KNOTS} knots first, then on {K} from "
                  "that solution", flush=True)  # fmt: skip
        coarse = _solve(replace(problem, knots=COARSE_KNOTS), model, progress, functions, None)
        if coarse.status == "solved":
            warm = {"t": coarse.t, "q": coarse.q, "dq": coarse.dq, "ddq": coarse.ddq}
        else:
            coarse = None
    if problem.solver == "ipopt":
        x_start = _warm_start(problem, model, q_start, q_goal, t, warm)  # (K, 3 n)
    if independent:  # CasADi holds callbacks weakly: keep them
        guess = q_start if warm is None else _closed_knots(model, q_start, x_start[:, : model.n])
        built = independent_callbacks(model, K, rows, guess, design)
    else:
        built = functions(model, K, rows, design)
    if problem.solver != "ipopt":
        nlp, solver, x0 = _stagewise(
            problem, model, built, q_start, q_goal, goal, t, progress, warm
        )
    else:
        regularisation = (0.0, 0.0)
        if independent and design is None and not problem.minimum_time:
            regularisation = regularisation_weights(model, q_start)
        nlp = transcribe(
            problem, model, built, q_start, goal, goal_rows(model, q_goal), regularisation
        )
        x0 = x_start[:, built["states"].columns] if independent else x_start
        x0 = x0.ravel()
        if problem.minimum_time:
            x0 = np.append(x0, problem.duration)
        if design is not None:
            x0 = np.append(x0, np.zeros(design.size))
        # idle joints' multipliers stall at rounding; a regularised leg may still creep
        noisy = independent and (len(model.idle) > 0 or any(regularisation))
        options = ipopt_options(
            problem.tolerance, problem.max_iterations, progress,
            warm is not None or problem.warm_start is not None, problem.barrier,
            noisy_multipliers=noisy, initial_objective=_objective(nlp, x0) if noisy else None,
        )  # fmt: skip
        solver = ca.nlpsol("reach", "ipopt", nlp["nlp"], options)
    load_kernels(model, rows, q_start, design)  # compiled or loaded before timing
    started = time.perf_counter()
    seen = interrupts_received()
    with interrupt_warnings_dropped():
        sol = solver(x0=x0, lbx=nlp["lbx"], ubx=nlp["ubx"], lbg=nlp["lbg"], ubg=nlp["ubg"])
    elapsed = time.perf_counter() - started
    callbacks = [f for f in built.values() if isinstance(f, BatchedCallback)]
    reraise_interrupt(seen, any(f.interrupted for f in callbacks))
    errors = [f.error for f in callbacks if f.error is not None]
    if errors:
        raise WorkbenchError(f"{problem.source}: the model failed during the solve: {errors[0]}")
    stats = solver.stats()
    reraise_interrupt(seen, stats["return_status"] in INTERRUPTED)
    x = np.asarray(sol["x"]).ravel()
    size = 3 * (len(model.active) if independent else model.n)
    duration = float(x[size * K]) if problem.minimum_time else problem.duration
    X = x[: size * K].reshape(K, size)
    if independent:
        X = built["states"](X, False)[0]
    text = str(stats["return_status"])
    solved = status(text)
    if problem.solver != "ipopt":
        X = np.asarray(nlp["to_knots"](x)).T
        solved = "solved" if stats["success"] else "failed"
    n = model.n
    regularised = float(nlp["regularisation"](x)) if "regularisation" in nlp else 0.0
    result = ReachResult(
        status=solved,
        message=text,
        t=np.linspace(0.0, duration, K),
        q=X[:, :n],
        dq=X[:, n : 2 * n],
        ddq=X[:, 2 * n :],
        tau=np.asarray(nlp["tau"](x)).reshape(K, len(model.active))[:, : len(model.actuated)],
        objective=float(sol["f"]) - regularised,
        regularisation=regularised,
        iterations=int(stats["iter_count"]),
        solve_time_s=elapsed,
        max_constraint_violation=violation(sol["g"], nlp["lbg"], nlp["ubg"]),
        task=model.task,
        design={} if design is None else design.summary(x[len(x) - design.size :]),
        problem=problem,
        model=model,
    )
    if coarse is not None and result.status != "solved":  # as if there were no coarse grid
        if progress:
            print(f"{problem.source}: not solved from the {COARSE_KNOTS}-knot solution; "
                  "again from the minimum-jerk guess", flush=True)  # fmt: skip
        earlier, result = result, _solve(problem, model, progress, functions, None, False)
        result.iterations += earlier.iterations
        result.solve_time_s += earlier.solve_time_s
    if coarse is not None:
        result.iterations += coarse.iterations
        result.solve_time_s += coarse.solve_time_s
    return result


def check_reach(problem: ReachProblem, model: ClosedChain) -> None:
    """Raise :class:`~workbench.ocp.contract.Infeasible` when the start or the goal lies
    beyond the farthest the tool can be (:func:`workbench.closed_chains.task_space.reach_bound`):
    a cheap, conservative check before the inverse kinematics and the NLP."""
    bound = reach_bound(model)
    for name in ("start", "goal"):
        value = getattr(problem, name)
        beyond = bound.beyond(value)
        if beyond is not None:
            raise Infeasible(
                f"{problem.source}: [task] {name} {np.round(value, 4).tolist()} is out of reach "
                f"of {model.name}: it {beyond}"
            )


def _check_motion(problem: ReachProblem, model: ClosedChain, start, goal, result) -> None:
    """Simulate the solved plan and warn when its knots do not resolve the motion."""
    try:
        _simulate(model, goal, result)
        result.transcription_error = transcription_error(model, result)
    except WorkbenchError as exc:
        result.warnings.append(
            f"the planned torques cannot be simulated (too few knots to resolve the motion? "
            f"now {problem.knots}): {exc}"
        )
        return
    travel = float(task_distance(model, np.asarray(start), np.asarray(goal)))
    coarse = COARSE * max(travel, SHORT_TRAVEL)
    drifted = not result.task_error <= max(coarse, DRIFT)
    if drifted and result.transcription_error <= coarse:
        result.warnings.append(
            f"the open-loop simulation of the planned torques ends {result.task_error:.3g} "
            f"{result.unit} from the goal ({_share(result.task_error, travel)}): the knots "
            "resolve the motion, so the mechanism drifts away from the plan without feedback; "
            "the plan needs a controller that tracks it"
        )
    if result.transcription_error > coarse:
        result.warnings.append(
            f"the knots are too far apart for this motion: integrated interval by interval, "
            f"the planned torques miss the plan by {result.transcription_error:.3g} in all "
            f"({_share(result.transcription_error, travel)}); use more knots "
            f"([transcription] knots, now {problem.knots})"
        )


def _share(error: float, travel: float) -> str:
    """An error as a share of the tool's travel, for warnings."""
    if travel >= SHORT_TRAVEL:
        return f"{100 * error / travel:.0f} % of the {travel:.3g} the tool travels"
    return f"the tool travels only {travel:.3g}: the goal is about the start"


def duration_check(
    model: ClosedChain, q_start: Array, q_goal: Array, duration: float, margin: float = 4.0
) -> str | None:
    """Why ``duration`` is too short, or None (a necessary condition).

    Every joint must cover ``d = |q_goal - q_start|`` from rest to rest: at
    most its velocity limit V means ``T >= d / V``. A motor with at most the
    acceleration A also needs ``T >= 2 sqrt(d / A)`` (``d / V + V / A`` when
    it reaches V). A is bounded at rest from the torque limits, gravity and
    the reduced inertia ``S^T M S`` on 9 configurations along the straight
    motor path, times ``margin`` (the optimal path may pass where the
    inertia is smaller). A duration that passes may still be infeasible; one
    that fails is (velocity) or almost surely is (acceleration).
    """

    tree, active = model.tree, model.active
    distance = np.abs(q_goal - q_start)
    velocity_time = distance / tree.velocity_limit
    j = int(np.argmax(velocity_time))
    if velocity_time[j] > duration * (1.0 + 1e-9):
        role = "motor" if j in active else "passive joint"
        return (
            f"the duration {duration:g} s is too short: {role} {tree.joint_names[j]} must turn "
            f"{distance[j]:.4g} rad, which at its velocity limit {tree.velocity_limit[j]:g} "
            f"rad/s takes {velocity_time[j]:.4g} s"
        )
    path = np.linspace(q_start[active], q_goal[active], 9)
    try:
        q = solve_passive(model, path, guess=q_start)
    except WorkbenchError:
        return None
    a = len(model.actuated)
    limit = tree.effort_limit[model.motor_indices]
    if not np.all(np.isfinite(limit)):
        return None  # no torque limit: no acceleration bound
    rest = np.zeros_like(path)
    # the box of motor torques maps to accelerations free + sum_j tau_j column_j: the largest
    # |acceleration| of motor k over it is |free_k| + sum_j |column_kj| limit_j
    free = forward_dynamics(model, q, rest, np.zeros((len(path), a)))[0][:, :a]
    best = np.abs(free)
    for j in range(a):
        unit = np.zeros((len(path), a))
        unit[:, j] = 1.0
        best += np.abs(forward_dynamics(model, q, rest, unit)[0][:, :a] - free) * limit[j]
    best = best.max(axis=0)
    active = model.motor_indices
    A, V, d = margin * best, tree.velocity_limit[active], distance[active]
    needed = np.where(d <= V**2 / A, 2.0 * np.sqrt(d / A), d / V + V / A)
    j = int(np.argmax(needed))
    if needed[j] > duration:
        return (
            f"the duration {duration:g} s is too short: motor {model.actuated[j]} must turn "
            f"{d[j]:.4g} rad from rest to rest; with its torque limit {limit[j]:g} N m it "
            f"accelerates at most ~{best[j]:.4g} rad/s^2 (x{margin:g} margin) and at most "
            f"{V[j]:g} rad/s, which takes {needed[j]:.4g} s"
        )
    return None


def transcription_error(model: ClosedChain, result: ReachResult) -> float:
    """The plan's integration error in task space: the sum over intervals of how far one
    RK4 step of the true dynamics, from the plan's state at a knot under its torques,
    ends from the plan's next knot.

    Each interval starts again from the plan, so an unstable mechanism's open-loop
    drift does not count; the sum bounds the error the knots themselves make (it falls
    at least like h^2 with the spacing h: 8.3x from 40 to 80 knots on the default problem).
    """
    a, h = len(model.active), np.diff(result.t)[:, None]
    tau0, tau1 = result.tau[:-1], result.tau[1:]
    last = result.q[:-1]

    def rhs(fraction: float, x: Array) -> Array:
        nonlocal last
        last = solve_passive(model, x[:, :a], guess=last)
        ddqa, _ = forward_dynamics(model, last, x[:, a:], tau0 + fraction * (tau1 - tau0))
        return np.concatenate([x[:, a:], ddqa], axis=1)

    x = np.concatenate([result.q[:-1, model.active], result.dq[:-1, model.active]], axis=1)
    k1 = rhs(0.0, x)
    k2 = rhs(0.5, x + h / 2 * k1)
    k3 = rhs(0.5, x + h / 2 * k2)
    k4 = rhs(1.0, x + h * k3)
    end = solve_passive(model, (x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4))[:, :a], guess=last)
    planned = task(model, result.q[1:])[0]
    return float(np.sum(task_distance(model, task(model, end)[0], planned)))


def _simulate(model: ClosedChain, goal: Array, result: ReachResult) -> None:
    """Forward-simulate the optimal motor torques (RK4, one step per knot interval, or
    ``SUBSTEPS`` steps where that diverges).

    A stiff mechanism (a light link between heavy ones: the reduced inertia's
    eigenvalues five decades apart on 5bar_linkage, eigenvalues of the linearised dynamics
    h |lambda| > 2.8 for RK4) makes one step per interval diverge although
    the plan is accurate; smaller steps then integrate the same torques.
    Sets the final task error of the simulated motion and the largest
    distance between the simulated and the planned task vectors.
    """
    tau, q0, dqa0 = result.tau, result.q[0], result.dq[0, model.active]
    for substeps in SUBSTEPS:
        try:
            q, _ = simulate(model, result.t, tau, q0, dqa0, substeps=substeps)
            break
        except WorkbenchError:
            if substeps == SUBSTEPS[-1]:
                raise
    simulated = task(model, q)[0]
    result.task_error = float(task_distance(model, simulated[-1], goal))
    result.tracking_error = float(np.max(task_distance(model, simulated, task(model, result.q)[0])))


def _objective(nlp: dict, x0: Array) -> float:
    """The NLP's objective at ``x0`` (one evaluation of the model functions); NaN where
    the model fails there (its callbacks remember the error, which the solve reports)."""
    problem = nlp["nlp"]
    try:
        return float(ca.Function("objective", [problem["x"]], [problem["f"]])(x0))
    except RuntimeError:  # CasADi's wrapping of a callback's error
        return np.nan


def _closed_knots(model: ClosedChain, q_start: Array, q: Array) -> Array:
    """Where the passive joints of each knot are first solved from: the warm start's
    configuration ``q`` (K, n) at the knots where that is closed to ``WARM_CLOSED``, else
    ``q_start``."""
    closed = np.isfinite(q).all(axis=1)
    if closed.any():
        closed[closed] = np.abs(residual(model, q[closed])).max(axis=1) <= WARM_CLOSED
    return np.where(closed[:, None], q, q_start)


def _warm_start(
    problem: ReachProblem, model: ClosedChain, q_start, q_goal, t, warm: dict | None = None
) -> Array:
    """Knot variables (K, 3 n): the ``warm`` arrays or the problem's trajectory file if
    given, else minimum jerk."""
    if warm is None and problem.warm_start is None:
        return initial_guess(model, q_start, q_goal, t)
    where = "warm start" if warm is not None else f"warm start {problem.warm_start}"
    try:
        if warm is None:
            with np.load(problem.warm_start) as data:
                warm = {key: np.asarray(data[key]) for key in ("t", "q", "dq", "ddq")}
        previous = [np.asarray(warm[key], dtype=float) for key in ("t", "q", "dq", "ddq")]
    except (OSError, KeyError, ValueError) as exc:
        raise WorkbenchError(f"{where}: {exc}") from None
    if any(p.ndim != 2 or p.shape[1] != model.n for p in previous[1:]) or previous[0].ndim != 1:
        raise WorkbenchError(f"{where}: q, dq, ddq must be (K, {model.n}) for {model.name}")
    if not all(np.all(np.isfinite(p)) for p in previous) or previous[0][-1] <= 0:
        raise WorkbenchError(f"{where}: values are not finite")
    t_old = previous[0] / previous[0][-1] * t[-1]
    return np.concatenate(interpolate_knots(t_old, *previous[1:], t), axis=1)


def interpolate_knots(
    t_old: Array, q: Array, dq: Array, ddq: Array, t: Array
) -> tuple[Array, Array, Array]:
    """Knots (q, dq, ddq) at times ``t`` of the motion the transcription makes of knots at
    ``t_old`` (module docstring): accelerations linear between knots, velocities and
    values their exact integrals (so a solution's knots satisfy the integration rows at
    every new knot within an old interval); the old knots' values at the old times."""
    k = np.clip(np.searchsorted(t_old, t, side="right") - 1, 0, len(t_old) - 2)
    h = (t_old[k + 1] - t_old[k])[:, None]
    s = (t - t_old[k])[:, None]
    jerk = (ddq[k + 1] - ddq[k]) / h
    return (
        q[k] + dq[k] * s + ddq[k] * s**2 / 2 + jerk * s**3 / 6,
        dq[k] + ddq[k] * s + jerk * s**2 / 2,
        ddq[k] + jerk * s,
    )


def _unsolved(
    status: str, message: str, t: Array, problem: ReachProblem, model: ClosedChain
) -> ReachResult:
    K, n, a = len(t), model.n, len(model.active)
    empty = np.full((K, n), np.nan)
    return ReachResult(
        status, message, t, empty, empty, empty, np.full((K, a), np.nan),
        float("nan"), 0, 0.0, float("nan"), task=model.task, problem=problem, model=model,
    )  # fmt: skip
