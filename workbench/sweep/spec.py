"""Sweep files: a base problem and the axes to vary; every combination is one task.

A sweep file (TOML) names a problem file of any problem kind
(:mod:`workbench.ocp.kinds`; reaching: :mod:`workbench.ocp.problem`) and what
to vary in it; paths are relative to the sweep file::
    [sweep]
    problem = "fivebar_reach.toml"  # the base problem
    warm_start = "rescue"           # or "neighbours", "none" (below)
    task_timeout_s = 600            # a task running longer is stopped: a "timeout" row (0: none)

    [set]                           # keys of the base problem changed for every task
    "transcription.knots" = 40

    [goal]                          # goals: a grid over the workspace ...
    azimuth_deg = {from = -157.5, to = 157.5, count = 8}
    elevation_deg = {from = 20.0, to = 80.0, count = 8}
    # x = {from = 0.1, to = 0.2, count = 5}   # position tasks: x, y, z grids (m)
    # list = [[0.5, 0.3, 0.812], [0.0, 0.6, 0.8]]  # ... or a list of goals

    [axes]                          # any problem key by its dotted path
    "task.duration" = [0.4, 0.6, 0.8]
    "design.mass_budget" = {from = 0.74, to = 0.80, count = 4}

Values of an axis (and of each ``[goal]`` coordinate) are a list, or a table
``{from, to, count}`` of evenly spaced numbers with both ends included. A
pointing goal at azimuth a and elevation e is the unit direction
``(cos e cos a, cos e sin a, sin e)`` (degrees); grid coordinates not given
keep the base problem's goal (``x``, ``y``, ``z`` for position tasks, in m).
Tasks are the Cartesian product of the goals and the axes, numbered in that
order (the goal varies slowest, the last axis fastest); each task's problem
is validated on reading, so a bad value is an error naming the sweep file,
the axis and the value before anything runs.

Warm starts (``warm_start``): "rescue" (the default) starts every task from
the minimum-jerk guess and gives each task IPOPT did not solve a second
attempt from its nearest solved neighbour; "neighbours" cuts the tasks into
*seeds*, a subset spread over the sweep (on a grid, every other point along
each axis) solved from the guess, and the rest, each started from the
trajectory of its nearest solved neighbour as soon as one within 1.5 steps is
solved, with the same second attempt (from the guess) for those that fail;
"none" solves every task once from the guess (:mod:`workbench.sweep.runner`;
BENCHMARKS.md measures what warm starts change). Distances count
steps: goals by the distance between their vectors (unit directions, or
positions) in units of the median distance between nearest goals, so a grid
point's neighbours are the goals physically closest to it (on an azimuth x
elevation grid, azimuth steps shrink towards the pole); every other numeric
axis by its value difference over its median spacing; tasks that differ in
a non-numeric value (a string, a boolean, an array) are never neighbours.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from workbench.config import Section, read_toml
from workbench.errors import WorkbenchError
from workbench.lie import Array
from workbench.ocp import kinds
from workbench.ocp.contract import GoalProblem

WARM_STARTS = ("rescue", "neighbours", "none")
MAX_TASKS = 100_000  # tasks of one sweep
TASK_SECONDS = 1.0  # solver time of a five-bar reaching task, for the estimate a refusal shows
NEIGHBOUR_RADIUS = 1.5  # grid steps: the 8 neighbours of a point on a 2-D grid


@dataclass(frozen=True)
class Task:
    """One combination: the problem (raw TOML dict) and the varied inputs (table columns)."""

    id: str
    index: int
    inputs: dict[str, Any]
    raw: dict
    key: str  # hash of the problem: results on disk are reused only when it matches
    features: Array  # neighbour coordinates, in steps (module docstring)
    group: str  # tasks of different groups (non-numeric values) are never neighbours

    @property
    def label(self) -> str:
        """'task 0007 (azimuth_deg = 45, task.duration = 0.6)' for messages."""
        shown = ", ".join(f"{k} = {_short(v)}" for k, v in self.inputs.items())
        return f"task {self.id} ({shown})"


@dataclass(frozen=True)
class Sweep:
    """A sweep file read and expanded into its tasks (module docstring)."""

    source: str
    problem: Path  # the base problem file
    base: Path  # directory the problems' relative paths are resolved against
    tasks: list[Task]
    warm_start: str = "rescue"
    task_timeout_s: float = 0.0  # 0: no limit
    kind: tuple[str, str] = ("reach", kinds.KINDS["reach"])  # problem kind and its module
    goal_kind: str = "none"  # "angles" (azimuth x elevation), "xyz", "list" or "none"
    task_kind: str = "pointing"  # the goal's space: "pointing", "position" or "none" (no goal)
    axes: tuple[str, ...] = ()  # dotted keys of the other axes, in file order
    grid_columns: tuple[str, ...] = ()  # the goal's grid coordinates (azimuth_deg, ...)
    seeds: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def from_toml(cls, path: str | os.PathLike) -> Sweep:
        """Read a sweep file; every error names the file and the key."""
        path = Path(path)
        return cls.from_dict(read_toml(path, "sweep file"), str(path), path.parent)

    @classmethod
    def from_dict(cls, raw: dict, source: str, base: Path) -> Sweep:
        top = Section(raw, source)
        head = top.section("sweep", required=True)
        problem_path = base / head.string("problem")
        warm = head.string("warm_start", "rescue", choices=WARM_STARTS)
        timeout = head.number("task_timeout_s", 0.0, minimum=0.0)
        head.done()
        problem_raw = read_toml(problem_path, "problem file")
        problem_base = problem_path.parent
        settings = top.section("set")
        for key in list(settings.table):
            _set_path(problem_raw, key, settings.raw(key), settings.where(key))
        settings.done()
        # the base problem as it would run, validated once on its own
        where = str(problem_path)
        if settings.table:
            where += f" with the [set] of {source}"
        first = kinds.read_dict(copy.deepcopy(problem_raw), where, problem_base)
        task_kind = first.task_space if isinstance(first, GoalProblem) else "none"
        base_goal = first.goal if isinstance(first, GoalProblem) else None
        goals, goal_kind, grid_columns = _goals(top, task_kind, base_goal)
        axes = _axes(top.section("axes"))
        if goals is not None and any(key == "task.goal" for key, _ in axes):
            raise WorkbenchError(
                f"{source}: [axes] task.goal and [goal] both vary the goal; use one of them"
            )
        top.done()
        tasks = _expand(source, problem_raw, problem_path, goals, axes)
        return cls(
            source=source,
            problem=problem_path,
            base=problem_base,
            tasks=tasks,
            warm_start=warm,
            task_timeout_s=timeout,
            kind=(first.kind, kinds.KINDS[first.kind]),
            goal_kind=goal_kind,
            task_kind=task_kind,
            axes=tuple(key for key, _ in axes),
            grid_columns=grid_columns,
            seeds=frozenset(seed_tasks(tasks)),
        )

    def task(self, task_id: str) -> Task:
        return next(t for t in self.tasks if t.id == task_id)


# ------------------------------------------------------------------- goals
@dataclass(frozen=True)
class _Goal:
    """One goal of the [goal] table: its vector and its table columns."""

    vector: Array
    columns: dict[str, Any]
    features: Array | None = None  # set by _goals: the goal in units of the goal spacing


def _goals(top: Section, task_kind: str, base_goal: Array):
    """The goals of ``[goal]`` (None without one), their kind and grid column names.

    Neighbour coordinates of a goal are its vector (a unit direction, or a
    position) divided by the median distance between nearest goals: the
    task error the warm start has to undo, whatever the grid's axes.
    """
    goals, kind, columns = _read_goals(top, task_kind, base_goal)
    if goals is None:
        return goals, kind, columns
    vectors = np.array([g.vector for g in goals])
    if task_kind == "pointing":
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-300)
    scale = _nearest_spacing(vectors)
    goals = [_Goal(g.vector, g.columns, v / scale) for g, v in zip(goals, vectors, strict=True)]
    return goals, kind, columns


def _read_goals(top: Section, task_kind: str, base_goal: Array):
    if "goal" not in top:
        top.section("goal")  # registers the key
        return None, "none", ()
    goal = top.section("goal")
    if task_kind == "none":
        raise WorkbenchError(
            f"{goal.source}: [goal] varies task.goal, and this problem kind has no goal; vary "
            "its keys under [axes]"
        )
    keys = set(goal.table)
    angles = keys & {"azimuth_deg", "elevation_deg"}
    xyz = keys & {"x", "y", "z"}
    if "list" in keys and (angles or xyz):
        raise WorkbenchError(f"{goal.where('list')}: give a list or a grid, not both")
    if angles and xyz:
        raise WorkbenchError(
            f"{goal.source}: [goal] azimuth_deg/elevation_deg (pointing) and x/y/z (position) "
            "cannot be mixed"
        )
    if "list" in keys:
        vectors = goal.array("list", shape=(None, 3))
        goal.done()
        if len(vectors) == 0:
            raise WorkbenchError(f"{goal.where('list')} is empty")
        out = []
        for k, v in enumerate(vectors):
            columns = _vector_columns(v)
            if task_kind == "pointing" and not np.linalg.norm(v) > 1e-9:
                raise WorkbenchError(
                    f"{goal.where('list')}: goal {k + 1} {v.tolist()} is not a direction "
                    "(a pointing goal must be non-zero)"
                )
            if task_kind == "pointing":
                columns = _angle_columns(v) | columns
            out.append(_Goal(v, columns))
        return out, "list", ()
    if angles:
        if task_kind != "pointing":
            raise WorkbenchError(
                f"{goal.source}: [goal] azimuth_deg/elevation_deg need a pointing task; the "
                "model's task is a position (use x, y, z grids or a list)"
            )
        base_az, base_el = _angles(base_goal)
        azimuth = _values(goal, "azimuth_deg", [base_az], numeric=True)
        elevation = _values(goal, "elevation_deg", [base_el], numeric=True)
        goal.done()
        _check_task_count(
            goal.source, "azimuth_deg x elevation_deg", [len(azimuth), len(elevation)]
        )
        out = []
        for az, el in itertools.product(azimuth, elevation):
            a, e = math.radians(az), math.radians(el)
            v = np.array([math.cos(e) * math.cos(a), math.cos(e) * math.sin(a), math.sin(e)])
            columns = {"azimuth_deg": float(az), "elevation_deg": float(el)}
            columns |= _vector_columns(v)
            out.append(_Goal(v, columns))
        return out, "angles", ("azimuth_deg", "elevation_deg")
    if xyz:
        if task_kind != "position":
            raise WorkbenchError(
                f"{goal.source}: [goal] x/y/z grids are positions; the model points "
                "(use azimuth_deg and elevation_deg, or a list of directions)"
            )
        names = [c for c in ("x", "y", "z") if c in xyz]
        grids = [_values(goal, c, None, numeric=True) for c in ("x", "y", "z") if c in xyz]
        goal.done()
        _check_task_count(goal.source, " x ".join(names), [len(g) for g in grids])
        out = []
        for point in itertools.product(*grids):
            v = np.array(base_goal, dtype=float)
            for name, value in zip(names, point, strict=True):
                v["xyz".index(name)] = value
            out.append(_Goal(v, _vector_columns(v)))
        return out, "xyz", tuple(f"goal_{c}" for c in names)
    raise WorkbenchError(
        f"{goal.source}: [goal] needs azimuth_deg/elevation_deg, x/y/z or list "
        f"(it has {', '.join(sorted(keys)) or 'nothing'})"
    )


def _angles(v: Array) -> tuple[float, float]:
    """Azimuth and elevation (degrees) of a direction."""
    v = np.asarray(v, dtype=float) / max(float(np.linalg.norm(v)), 1e-300)
    azimuth = math.degrees(math.atan2(v[1], v[0]))
    elevation = math.degrees(math.asin(float(np.clip(v[2], -1.0, 1.0))))
    return azimuth, elevation


def _angle_columns(v: Array) -> dict[str, float]:
    az, el = _angles(v)
    return {"azimuth_deg": az, "elevation_deg": el}


def _vector_columns(v: Array) -> dict[str, float]:
    return {"goal_x": float(v[0]), "goal_y": float(v[1]), "goal_z": float(v[2])}


# -------------------------------------------------------------------- axes
def _axes(section: Section) -> list[tuple[str, list]]:
    """(dotted key, values) of every axis of ``[axes]``, in file order."""
    axes = []
    for key in list(section.table):
        if not key or any(not part for part in key.split(".")):
            raise WorkbenchError(f"{section.where(key)}: not a dotted key such as task.duration")
        axes.append((key, _values(section, key, None)))
    section.done()
    return axes


def _values(section: Section, key: str, default, numeric: bool = False) -> list:
    """A list of values, or ``{from, to, count}`` (both ends included)."""
    if key not in section.table:
        section.raw(key, None)
        if default is None:
            raise WorkbenchError(f"{section.where(key)} is required")
        return list(default)
    value = section.raw(key)
    if isinstance(value, dict):
        spaced = Section(value, section.source, f"{section.name}.{key}")
        unknown = sorted(set(value) - {"from", "to", "count"})
        if unknown:
            raise WorkbenchError(
                f"{section.where(key)}: unknown key(s) {', '.join(unknown)}; a range is "
                "{from, to, count}"
            )
        first = spaced.number("from")
        last = spaced.number("to")
        count = spaced.integer("count", minimum=1)
        spaced.done()
        if count > MAX_TASKS:
            raise WorkbenchError(
                f"{spaced.where('count')} = {count}: more values than a sweep may have tasks "
                f"({MAX_TASKS})"
            )
        if count == 1 and first != last:
            raise WorkbenchError(f"{section.where(key)}: count = 1 needs from = to")
        return [float(v) for v in np.linspace(first, last, count)]
    if not isinstance(value, list) or not value:
        raise WorkbenchError(
            f"{section.where(key)} must be a non-empty list of values or {{from, to, count}}"
        )
    if numeric and not all(_is_number(v) for v in value):
        raise WorkbenchError(f"{section.where(key)} = {value!r} must be numbers")
    if len({json.dumps(v, sort_keys=True) for v in value}) != len(value):
        raise WorkbenchError(f"{section.where(key)} = {value!r} repeats a value")
    return list(value)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _spacing(values: list) -> float:
    """Median step between the sorted distinct values (1 for a single value)."""
    distinct = np.unique(np.asarray(values, dtype=float))
    if distinct.size < 2:
        return 1.0
    return float(np.median(np.diff(distinct)))


def _nearest_spacing(points: Array) -> float:
    """Median distance from each point to its nearest other point (1 for one point)."""
    if len(points) < 2:
        return 1.0
    d = np.linalg.norm(points[:, None] - points[None], axis=-1)
    d[np.diag_indices_from(d)] = np.inf
    nearest = d.min(axis=1)
    nearest = nearest[nearest > 0]
    return float(np.median(nearest)) if nearest.size else 1.0


def _set_path(raw: dict, dotted: str, value: Any, where: str) -> None:
    """``raw[a][b][c] = value`` for ``dotted = "a.b.c"``, creating tables on the way."""
    parts = dotted.split(".")
    if not all(parts):
        raise WorkbenchError(f"{where}: not a dotted key such as task.duration")
    table = raw
    for i, part in enumerate(parts[:-1]):
        table = table.setdefault(part, {})
        if not isinstance(table, dict):
            raise WorkbenchError(
                f"{where}: {'.'.join(parts[: i + 1])} is a value in the problem file, not a table"
            )
    table[parts[-1]] = copy.deepcopy(value)


# ------------------------------------------------------------------- tasks
def _check_task_count(source: str, what: str, counts: list[int]) -> None:
    """Refuse a product of grid sizes above MAX_TASKS before any task is made."""
    total = math.prod(counts)
    if total > MAX_TASKS:
        product = " x ".join(str(c) for c in counts)
        raise WorkbenchError(
            f"{source}: {total} tasks ({what} = {product}) would take about "
            f"{total * TASK_SECONDS / 3600:.3g} hours of solver time at {TASK_SECONDS:g} s per "
            f"task, and each is validated and kept in memory first; at most {MAX_TASKS}"
        )


def _expand(source: str, problem_raw: dict, problem_path: Path, goals, axes) -> list[Task]:
    """Every combination as a validated Task (module docstring)."""

    goal_options = goals if goals is not None else [None]
    scales = [_spacing(values) if all(_is_number(v) for v in values) else None
              for _, values in axes]  # fmt: skip
    _check_task_count(source, "goals x axes", [len(goal_options), *(len(v) for _, v in axes)])
    combos = list(itertools.product(goal_options, *(values for _, values in axes)))
    width = max(4, len(str(len(combos) - 1)))
    tasks = []
    base = problem_path.parent
    for index, (goal, *values) in enumerate(combos):
        raw = copy.deepcopy(problem_raw)
        inputs: dict[str, Any] = {}
        features: list[float] = []
        group: list[str] = []
        if goal is not None:
            _set_path(raw, "task.goal", goal.vector.tolist(), f"{source}: [goal]")
            inputs |= goal.columns
            features += goal.features.tolist()
        for (key, _), value, scale in zip(axes, values, scales, strict=True):
            _set_path(raw, key, value, f"{source}: [axes] {key}")
            inputs[key] = value
            if scale is not None:
                features.append(float(value) / scale)
            else:
                group.append(json.dumps(value, sort_keys=True))
        task_id = f"{index:0{width}d}"
        shown = ", ".join(f"{k} = {_short(v)}" for k, v in inputs.items()) or "the base problem"
        try:
            kinds.read_dict(copy.deepcopy(raw), f"{problem_path} ({shown})", base)
        except WorkbenchError as exc:
            raise WorkbenchError(f"{source}: task {task_id}: {exc}") from None
        key = hashlib.sha256(
            json.dumps([raw, str(base.resolve())], sort_keys=True, default=str).encode()
        ).hexdigest()[:16]
        tasks.append(
            Task(task_id, index, inputs, raw, key, np.array(features, dtype=float), "|".join(group))
        )
    return tasks


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return json.dumps(value) if not isinstance(value, str) else value


def distance(a: Task, b: Task) -> float:
    """Distance in grid steps (inf between tasks of different groups)."""
    if a.group != b.group:
        return math.inf
    return float(np.linalg.norm(a.features - b.features))


def seed_tasks(tasks: list[Task], radius: float = NEIGHBOUR_RADIUS) -> list[str]:
    """Ids of the seeds: greedily, in task order, every task with no seed within ``radius``.

    On a regular grid this keeps every other point along each axis (a
    quarter of a 2-D grid); every other task then has a seed within
    ``radius`` steps.
    """
    seeds: list[str] = []
    for group in _groups(tasks).values():
        features = np.array([t.features for t in group]).reshape(len(group), -1)
        chosen: list[int] = []
        for k in range(len(group)):
            if (
                not chosen
                or np.min(np.linalg.norm(features[chosen] - features[k], axis=1)) > radius
            ):
                chosen.append(k)
        seeds += [group[k].id for k in chosen]
    return sorted(seeds)


def neighbours(tasks: list[Task], radius: float = NEIGHBOUR_RADIUS) -> dict[str, list]:
    """For every task, the other tasks within ``radius``: [(distance, id)], nearest first."""
    near: dict[str, list] = {}
    for group in _groups(tasks).values():
        features = np.array([t.features for t in group]).reshape(len(group), -1)
        for k, task in enumerate(group):
            d = np.linalg.norm(features - features[k], axis=1)
            close = [j for j in np.flatnonzero(d <= radius) if j != k]
            near[task.id] = sorted((float(d[j]), group[j].id) for j in close)
    return near


def _groups(tasks: list[Task]) -> dict[str, list[Task]]:
    groups: dict[str, list[Task]] = {}
    for task in tasks:
        groups.setdefault(task.group, []).append(task)
    return groups
