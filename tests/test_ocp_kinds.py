"""The problem contract: a second problem kind, defined here, runs through the command line
and the sweep's task function without any change to the package.

The toy kind is the rest-to-rest motion of a 1-D double integrator (x'' = u,
x(0) = 0, x(T) = d, v(0) = v(T) = 0) minimising the integral of u^2, with u
constant on each of N intervals, transcribed in CasADi and solved by IPOPT.
Its optimum is checked against the minimum-norm solution of the same two
linear end conditions computed with numpy (and against the continuous
optimum 12 d^2 / T^3).
"""

from __future__ import annotations

import copy
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import casadi as ca
import numpy as np
import pytest

from workbench.cli import main
from workbench.config import Section
from workbench.errors import WorkbenchError
from workbench.ocp import kinds
from workbench.resources import shipped
from workbench.sweep import Sweep
from workbench.sweep.table import csv_text
from workbench.sweep.tasks import solve_task

ROOT = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------- the toy kind
NAME = "toy"


@dataclass(frozen=True)
class ToyProblem:
    distance: float  # m
    duration: float  # s
    intervals: int
    source: str
    kind: str = NAME


@dataclass
class ToyResult:
    problem: ToyProblem
    status: str
    message: str
    objective: float  # m^2 / s^3
    iterations: int
    solve_time_s: float
    t: np.ndarray
    x: np.ndarray
    v: np.ndarray
    u: np.ndarray
    warnings: list[str] = field(default_factory=list)

    def row(self) -> dict[str, float | str]:
        return {"final_position": float(self.x[-1])}

    def arrays(self) -> dict[str, np.ndarray] | None:
        return {"t": self.t, "x": self.x, "v": self.v, "u": self.u}

    def describe(self) -> str:
        return f"objective {self.objective:.6g} m^2/s^3, {self.iterations} iterations"


def read(raw: dict, source: str, base: Path) -> ToyProblem:
    top = Section(raw, source)
    task = top.section("task", required=True)
    distance = task.number("distance")
    duration = task.number("duration", positive=True)
    intervals = top.section("transcription").integer("intervals", 20, minimum=1)
    task.done()
    return ToyProblem(distance, duration, intervals, source)


def solve(problem: ToyProblem, progress: bool = True, warm: dict | None = None) -> ToyResult:
    N, h = problem.intervals, problem.duration / problem.intervals
    x, v, u = ca.MX.sym("x", N + 1), ca.MX.sym("v", N + 1), ca.MX.sym("u", N)
    g = ca.vertcat(
        x[1:] - x[:-1] - h * v[:-1] - h**2 / 2 * u,
        v[1:] - v[:-1] - h * u,
        x[0], v[0], v[N], x[N] - problem.distance,
    )  # fmt: skip
    nlp = {"x": ca.vertcat(x, v, u), "f": h * ca.sumsqr(u), "g": g}
    options = {"ipopt.print_level": 5 if progress else 0, "ipopt.sb": "yes", "print_time": False}
    solver = ca.nlpsol("toy", "ipopt", nlp, options)
    x0 = np.zeros(3 * N + 2) if warm is None else np.concatenate([warm[k] for k in "xvu"])
    started = time.perf_counter()
    sol = solver(x0=x0, lbg=0.0, ubg=0.0)
    elapsed = time.perf_counter() - started
    stats = solver.stats()
    z = np.asarray(sol["x"]).ravel()
    return ToyResult(
        problem, "solved" if stats["success"] else "failed", stats["return_status"],
        float(sol["f"]), int(stats["iter_count"]), elapsed,
        np.linspace(0.0, problem.duration, N + 1), z[: N + 1], z[N + 1 : 2 * N + 2], z[2 * N + 2 :],
    )  # fmt: skip


def write(result: ToyResult, stage: Path) -> None:
    summary = {"status": result.status, "objective": result.objective}
    (stage / "summary.json").write_text(json.dumps(summary), encoding="utf-8")


# ---------------------------------------------------------------- the tests
@pytest.fixture
def toy(monkeypatch, tmp_path) -> Path:
    """The toy kind registered (for this test only) and a problem file of it."""
    monkeypatch.setattr(kinds, "KINDS", dict(kinds.KINDS))
    kinds.register(NAME, __name__)
    path = tmp_path / "toy.toml"
    path.write_text(
        'kind = "toy"\n[task]\ndistance = 0.5\nduration = 2.0\n[transcription]\nintervals = 40\n'
    )
    return path


def least_norm_optimum(distance: float, duration: float, intervals: int) -> float:
    """min h |u|^2 subject to the two end conditions, linear in u (numpy, no CasADi)."""
    h = duration / intervals
    k = np.arange(intervals)
    # from rest: v_N = h sum u_k, x_N = sum (h^2 / 2 + h^2 (N - 1 - k)) u_k
    A = np.array([np.full(intervals, h), h**2 / 2 + h**2 * (intervals - 1 - k)])
    u = A.T @ np.linalg.solve(A @ A.T, [0.0, distance])
    return h * float(u @ u)


def test_a_second_kind_runs_through_the_command_line(toy, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["reach", str(toy), "--out", str(out), "--quiet"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"solved {toy}: objective ") and line.endswith(f"results in {out}/")
    summary = json.loads((out / "summary.json").read_text())
    expected = least_norm_optimum(0.5, 2.0, 40)
    assert summary["status"] == "solved"
    assert summary["objective"] == pytest.approx(expected, rel=1e-8)
    assert summary["objective"] == pytest.approx(12 * 0.5**2 / 2.0**3, rel=1e-3)  # continuous


def test_a_second_kind_runs_through_the_sweep_task(toy, tmp_path):
    sweep_file = tmp_path / "sweep.toml"
    sweep_file.write_text('[sweep]\nproblem = "toy.toml"\n[axes]\n"task.distance" = [0.2, 0.5]\n')
    sweep = Sweep.from_toml(sweep_file)
    assert sweep.kind == (NAME, __name__) and sweep.task_kind == "none"
    results = []
    for task, warm in zip(sweep.tasks, (None, "first"), strict=True):
        payload = {
            "id": task.id, "kind": list(sweep.kind), "raw": copy.deepcopy(task.raw),
            "source": f"{sweep.problem} ({task.label})", "base": str(sweep.base),
            "warm": None if warm is None else results[0]["arrays"], "warm_from": warm,
        }  # fmt: skip
        results.append(solve_task(payload))
    rows = [r["row"] for r in results]
    for row, distance in zip(rows, (0.2, 0.5), strict=True):
        assert row["status"] == "solved", row["message"]
        assert row["objective"] == pytest.approx(least_norm_optimum(distance, 2.0, 40), rel=1e-8)
        assert row["final_position"] == pytest.approx(distance, abs=1e-9)
    assert rows[1]["warm_start_from"] == "first"
    assert set(results[0]["arrays"]) == {"t", "x", "v", "u"}
    done = [{"id": t.id, **t.inputs, **r} for t, r in zip(sweep.tasks, rows, strict=True)]
    header = csv_text(sweep, done).splitlines()[0].split(",")
    assert header[:4] == ["id", "task.distance", "status", "message"]
    assert "final_position" in header and "peak_torque" not in header


def test_a_goal_grid_needs_a_kind_with_a_goal(toy, tmp_path):
    sweep_file = tmp_path / "sweep.toml"
    sweep_file.write_text('[sweep]\nproblem = "toy.toml"\n[goal]\nlist = [[0, 0, 1]]\n')
    with pytest.raises(WorkbenchError, match=r"\[goal\] varies task.goal, and this problem kind"):
        Sweep.from_toml(sweep_file)


def test_the_kind_of_a_problem_file_is_checked(tmp_path, capsys):
    problem = tmp_path / "other.toml"
    problem.write_text('kind = "nope"\n[task]\ndistance = 0.5\n')
    assert main(["reach", str(problem), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"workbench reach: error: {problem}: kind = 'nope' must be one of 'reach'"]
    # an experiment-design file says no kind: read as a reaching problem, it has no [task]
    excite = ROOT / "problems" / "excite_dynamic.toml"
    assert main(["reach", str(excite), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"workbench reach: error: {excite}: task is required"]
    assert not (tmp_path / "out").exists()
    explicit = tmp_path / "reach.toml"
    text = (shipped("problems") / "fivebar_reach.toml").read_text()
    explicit.write_text('kind = "reach"\n' + text)
    problem = kinds.read(explicit)
    assert problem.kind == "reach" and problem.goal.tolist() == [0.5, 0.3, 0.812]


@pytest.mark.slow
def test_a_second_kind_is_swept_on_dask(toy, tmp_path):
    """On worker processes that never saw the registration: the task carries the kind."""
    from workbench.sweep import run_sweep
    from workbench.sweep.table import read_results

    sweep_file = tmp_path / "sweep.toml"
    sweep_file.write_text(
        '[sweep]\nproblem = "toy.toml"\nwarm_start = "neighbours"\n'
        '[axes]\n"task.distance" = [0.1, 0.2, 0.3]\n'
    )
    outcome = run_sweep(Sweep.from_toml(sweep_file), tmp_path / "out", workers=1, progress=False)
    assert outcome.counts == {"solved": 3}
    rows = read_results(tmp_path / "out" / "results.parquet")
    assert rows[1]["warm_start_from"] in ("0000", "0002")
    for row, distance in zip(rows, (0.1, 0.2, 0.3), strict=True):
        assert row["objective"] == pytest.approx(least_norm_optimum(distance, 2.0, 40), rel=1e-8)
        with np.load(tmp_path / "out" / row["trajectory"]) as data:
            assert data["x"][-1] == pytest.approx(distance, abs=1e-9)
