"""Reaching problems (problem files) and their results.

A problem file names a closed chain (a shipped name, a closure file, or a
folder of example-parallel-robots ``DIR`` or ``DIR/robot.yaml``) and the
task; every key but ``start`` and ``goal`` has a default::
    kind = "reach"             # optional: the problem kind (workbench.ocp.kinds)
    [task]
    model = "fivebar"          # a shipped closed chain, a closure file or a folder
    tool = "effector"          # a folder's tool frame (default its last frame)
    start = [0.0, -0.5, 0.866] # the tool's task vector at t = 0: a pointing
    goal = [0.5, 0.3, 0.812]   # direction ("pointing" models) or a position in m
    duration = 0.6             # s
    [limits]
    torque = [2.0, 2.0]        # N m, one per motor (actuated order): overrides the efforts
    [transcription]
    knots = 100
    minimum_time = false       # true: minimise the duration within duration_bounds
    duration_bounds = [0.05, 5.0]
    warm_start = "results/reach/trajectory.npz"   # optional, relative to the file
    [solver]
    tolerance = 1e-9
    max_iterations = 1000
    barrier = "adaptive"       # IPOPT's barrier update: "adaptive" or "monotone"
    name = "ipopt"             # or "fatrop", "sqpmethod-hpipm" (stage-wise; fixed duration,
                               # no design: workbench.ocp.stages)
    [design]                   # optional co-design (the spherical five-bar only)
    file = "../models/fivebar/design.toml"   # the design file (default the shipped one)
    mass_budget = 0.75
    [design.variables]
    arc_width = [-0.008, 0.010]

Every error names the file and the key (:mod:`workbench.config`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

import numpy as np

from workbench.closed_chains import is_robot_folder, load
from workbench.closed_chains.model import ClosedChain
from workbench.config import Section, read_toml
from workbench.errors import WorkbenchError
from workbench.lie import Array
from workbench.ocp.design import DesignSpace

# A longer reaching motion is a typo (seconds for milliseconds?), not a problem to solve.
MAX_DURATION = 3600.0
BARRIERS = ("adaptive", "monotone")  # IPOPT's mu_strategy (workbench.ocp.nlp.ipopt_options)
SOLVERS = ("ipopt", "fatrop", "sqpmethod-hpipm")  # workbench.ocp.nlp.solver


@dataclass(frozen=True)
class ReachProblem:
    """A reaching problem (module docstring); ``design`` is a DesignSpace or None."""

    kind: ClassVar[str] = "reach"  # its name in workbench.ocp.kinds
    start: Array
    goal: Array
    model: str = "fivebar"
    duration: float = 1.0
    knots: int = 100
    minimum_time: bool = False
    duration_bounds: tuple[float, float] = (0.05, 10.0)
    warm_start: Path | None = None
    tolerance: float = 1e-9
    max_iterations: int = 1000
    barrier: str = "adaptive"
    solver: str = "ipopt"
    source: str = "<built-in>"
    design: object | None = None
    tool: str | None = None
    torque: tuple[float, ...] | None = None

    @property
    def task_space(self) -> str:
        """The model's task: "pointing" (goals are directions) or "position" (m)."""
        return self.closed_chain().task

    def closed_chain(self) -> ClosedChain:
        """The problem's closed chain: its ``tool`` and, given, its motors' ``torque`` limits."""
        model = load(self.model, tool=self.tool)
        if self.torque is None:
            return model
        if len(self.torque) != len(model.actuated):
            raise WorkbenchError(
                f"{self.source}: [limits] torque has {len(self.torque)} values for the "
                f"{len(model.actuated)} motors of {model.name} ({', '.join(model.actuated)})"
            )
        effort = model.tree.effort_limit.copy()
        effort[model.motor_indices] = self.torque
        return model.with_tree(replace(model.tree, effort_limit=effort))

    @property
    def objective_unit(self) -> str:
        """Unit of the objective: the torque integral, or the duration plus 1e-3 of it."""
        return "s + 1e-3 N^2 m^2 s" if self.minimum_time else "N^2 m^2 s"

    @classmethod
    def from_toml(cls, path: str | os.PathLike) -> ReachProblem:
        """Read a problem file; every error names the file and the key."""
        path = Path(path)
        return cls.from_dict(read_toml(path, "problem file"), str(path), path.parent)

    @classmethod
    def from_dict(cls, raw: dict, source: str, base: Path) -> ReachProblem:
        top = Section(raw, source)
        top.string("kind", cls.kind, choices=(cls.kind,))  # workbench.ocp.kinds dispatches on it
        task = top.section("task", required=True)
        transcription = top.section("transcription")
        solver = top.section("solver")
        model = task.string("model", "fivebar")
        if (model.endswith(".toml") or is_robot_folder(base / model)) and not Path(
            model
        ).is_absolute():
            model = str(base / model)
        tool = task.string("tool", None)
        if tool is not None and not is_robot_folder(model):
            raise WorkbenchError(
                f"{task.where('tool')}: only a folder's model (DIR/robot.yaml) takes a tool "
                "frame; shipped models and closure files name theirs"
            )
        limits = top.section("limits")
        torque = limits.array("torque", None, shape=(None,), positive=True)
        start = task.array("start", shape=(3,))
        goal = task.array("goal", shape=(3,))
        duration = task.number("duration", 1.0, positive=True, maximum=MAX_DURATION)
        knots = transcription.integer("knots", 100, minimum=3)
        minimum_time = transcription.boolean("minimum_time", False)
        bounds = transcription.array("duration_bounds", np.array([0.05, 10.0]), shape=(2,),
                                     positive=True)  # fmt: skip
        if not bounds[0] < bounds[1] <= MAX_DURATION:
            raise WorkbenchError(
                f"{transcription.where('duration_bounds')} = {bounds.tolist()} must be increasing "
                f"and at most {MAX_DURATION:g} s"
            )
        if minimum_time and not bounds[0] <= duration <= bounds[1]:
            raise WorkbenchError(
                f"{task.where('duration')} = {duration} lies outside duration_bounds "
                f"{bounds.tolist()} (the initial guess of a minimum-time solve)"
            )
        warm = transcription.string("warm_start", None)
        warm_start = None
        if warm is not None:
            warm_start = base / warm
            if not warm_start.is_file():
                raise WorkbenchError(
                    f"{transcription.where('warm_start')}: no trajectory file at {warm_start}"
                )
        tolerance = solver.number("tolerance", 1e-9, positive=True)
        max_iterations = solver.integer("max_iterations", 1000, minimum=1)
        barrier = solver.string("barrier", "adaptive", choices=BARRIERS)
        solver_name = solver.string("name", "ipopt", choices=SOLVERS)
        design = None
        if "design" in top:
            design = DesignSpace.from_section(top.section("design"), model, base)
        for section in (task, transcription, solver, limits, top):
            section.done()
        return cls(
            start=start,
            goal=goal,
            model=model,
            duration=duration,
            knots=knots,
            minimum_time=minimum_time,
            duration_bounds=(float(bounds[0]), float(bounds[1])),
            warm_start=warm_start,
            tolerance=tolerance,
            max_iterations=max_iterations,
            barrier=barrier,
            solver=solver_name,
            source=source,
            design=design,
            tool=tool,
            torque=None if torque is None else tuple(float(x) for x in torque),
        )


@dataclass
class ReachResult:
    """Outcome of a solve: status is "solved", "infeasible" or "failed".

    ``task_error`` is the distance between the simulated tool and the goal
    at the end (rad for pointing, m for position), ``tracking_error`` the
    largest distance between the simulated and the planned task vector
    (both open loop: an unstable mechanism drifts without feedback),
    ``transcription_error`` the error the knots make
    (:func:`workbench.ocp.reach.transcription_error`); ``warnings`` says
    when it is too large to trust the plan, or the plan cannot be simulated.
    ``objective`` is the torque integral (with minimum time: the duration plus 1e-3 of it);
    ``regularisation`` the posture and acceleration terms IPOPT minimised beside it
    (:func:`workbench.ocp.reach.regularisation_weights`; 0 where there are none).
    ``problem`` and ``model`` (the nominal closed chain) are what was solved;
    ``drawings`` the result files being drawn since the solve
    (:func:`workbench.ocp.report.draw_figures`), empty until then.
    """

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
    task: str = "pointing"
    task_error: float = float("nan")
    tracking_error: float = float("nan")
    transcription_error: float = float("nan")
    design: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    regularisation: float = 0.0
    problem: ReachProblem | None = None
    model: ClosedChain | None = field(default=None, repr=False, compare=False)
    drawings: dict = field(default_factory=dict, repr=False, compare=False)

    @property
    def unit(self) -> str:
        """Unit of the task errors: rad (pointing) or m (position)."""
        return "rad" if self.task == "pointing" else "m"

    def describe(self) -> str:
        """One line: objective with its unit, iterations, time, violation, simulated error and
        how many warnings there are."""
        return (
            f"objective {self.objective:.6g} {self.problem.objective_unit}, {self.iterations} "
            f"iterations, {self.solve_time_s:.2f} s, constraint violation "
            f"{self.max_constraint_violation:.1e}, final {self.task} error "
            f"{self.task_error:.1e} {self.unit} (simulated)"
            + (f", {len(self.warnings)} warning(s) (above)" if self.warnings else "")
        )

    def row(self) -> dict[str, float | str]:
        """A sweep's columns of this result (workbench.sweep.table): peak |torque| (N m, over
        knots and motors), the violation, the errors and, with a design, its variables (m)
        and the moving mass (kg)."""
        tau = np.asarray(self.tau, dtype=float)
        finite = tau.size and np.all(np.isfinite(tau))
        row: dict[str, float | str] = {
            "peak_torque": float(np.max(np.abs(tau))) if finite else float("nan"),
            "max_constraint_violation": float(self.max_constraint_violation),
            "task_error": float(self.task_error),
            "tracking_error": float(self.tracking_error),
            "transcription_error": float(self.transcription_error),
        }
        for name, values in self.design.get("variables", {}).items():
            row[f"design.{name}"] = float(values["after"])
        if "moving_mass_kg" in self.design:
            row["moving_mass_kg"] = float(self.design["moving_mass_kg"]["after"])
        return row

    def arrays(self) -> dict[str, Array] | None:
        """The trajectory t (K,), q, dq, ddq (K, n), tau (K, a); None when there is none."""
        if not np.all(np.isfinite(self.q)):
            return None
        return {key: np.asarray(getattr(self, key)) for key in ("t", "q", "dq", "ddq", "tau")}

    def summary(self) -> dict:
        """The JSON-ready summary of the solve (no trajectories)."""
        unit = self.unit
        return {
            "status": self.status,
            "message": self.message,
            "objective": self.objective,
            "regularisation": self.regularisation,
            "iterations": self.iterations,
            "solve_time_s": self.solve_time_s,
            "max_constraint_violation": self.max_constraint_violation,
            f"final_{self.task}_error_{unit}": self.task_error,
            f"tracking_error_{unit}": self.tracking_error,
            f"transcription_error_{unit}": self.transcription_error,
            "warnings": list(self.warnings),
            "duration_s": float(self.t[-1]),
            "knots": len(self.t),
            "design": self.design,
        }
