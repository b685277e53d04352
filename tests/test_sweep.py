"""workbench sweep: sweep files, tasks as rows, a Dask sweep equal to serial solves, a worker killed
mid-sweep, resuming an interrupted sweep, Ctrl-C on the command line."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from workbench.errors import WorkbenchError
from workbench.ocp.problem import ReachProblem
from workbench.ocp.reach import solve
from workbench.resources import shipped
from workbench.sweep import Sweep, run_sweep
from workbench.sweep.spec import NEIGHBOUR_RADIUS, distance, neighbours
from workbench.sweep.tasks import solve_task

REACH = shipped("problems") / "fivebar_reach.toml"
SMALL = f"""
[sweep]
problem = "{REACH}"
[set]
"transcription.knots" = 20
[goal]
azimuth_deg = {{from = -135, to = 135, count = 4}}
elevation_deg = [50.0, 65.0]
"""


def sweep_file(tmp_path: Path, text: str, name: str = "sweep.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------- sweep files
def test_sweep_file_expands_and_validates(tmp_path):
    sweep = Sweep.from_toml(sweep_file(tmp_path, SMALL + '[axes]\n"task.duration" = [0.5, 0.7]\n'))
    assert len(sweep.tasks) == 16 and sweep.goal_kind == "angles"
    first = sweep.tasks[0]
    assert first.inputs["azimuth_deg"] == -135.0 and first.inputs["task.duration"] == 0.5
    assert first.raw["transcription"]["knots"] == 20 and first.raw["task"]["duration"] == 0.5
    goal = np.array(first.raw["task"]["goal"])
    assert np.linalg.norm(goal) == pytest.approx(1.0)
    assert goal[2] == pytest.approx(np.sin(np.radians(50.0)))
    assert sweep.tasks[1].inputs["task.duration"] == 0.7  # the last axis varies fastest
    assert len({t.key for t in sweep.tasks}) == 16 and len({t.id for t in sweep.tasks}) == 16

    knots = '[set]\n"transcription.knots" = 20\n'
    bad = {
        SMALL + '[axes]\n"task.duration" = [0.5, -1.0]\n': "task 0001.*duration = -1.0 must be",
        SMALL + '[axes]\n"task.durration" = [0.5]\n': "unknown key.*durration",
        SMALL + '[axes]\n"transcription.knots" = {from = 10, count = 3}\n': "to is required",
        SMALL + '[axes]\n"task.duration" = []\n': "non-empty list",
        SMALL.replace(knots, '[set]\n"solver.tolerance" = "tight"\n'): "'tight' must be a number",
        SMALL.replace(knots, '[set]\n"transcription.knotz" = 20\n'): r"with the \[set\] of .*knotz",
        SMALL + '[axes]\n"task.duration" = {from = 0.5, to = 0.7, cont = 2}\n': "unknown.*cont",
        SMALL.split("[goal]")[0] + "[goal]\nlist = [[0, 0, 1], [0, 0, 0]]\n": "goal 2 .*non-zero",
    }
    for text, message in bad.items():
        with pytest.raises(WorkbenchError, match=message):
            Sweep.from_toml(sweep_file(tmp_path, text))
    with pytest.raises(WorkbenchError, match="list or a grid, not both"):
        Sweep.from_toml(sweep_file(tmp_path, SMALL + "list = [[0, 0, 1]]\n"))
    with pytest.raises(WorkbenchError, match="problem file not found"):
        Sweep.from_toml(sweep_file(tmp_path, '[sweep]\nproblem = "nowhere.toml"\n'))
    with pytest.raises(WorkbenchError, match=r"\[sweep\] warm_start"):
        Sweep.from_toml(sweep_file(tmp_path, SMALL.replace("[set]", 'warm_start = "x"\n[set]')))


def test_seeds_cover_the_grid(tmp_path):
    sweep = Sweep.from_toml(shipped("problems") / "fivebar_sweep.toml")
    # azimuth steps (45 deg) are far longer than elevation steps (5 deg): seeds every other
    # elevation, one column of the grid at a time
    assert len(sweep.tasks) == 64 and len(sweep.seeds) == 32
    near = neighbours(sweep.tasks)
    for task in sweep.tasks:
        if task.id not in sweep.seeds:
            assert any(i in sweep.seeds for _, i in near[task.id])
        assert all(distance(task, sweep.task(i)) <= NEIGHBOUR_RADIUS for _, i in near[task.id])


def test_failing_tasks_are_rows(tmp_path):
    """A task that raises, fails or is infeasible returns a row (in-process, no cluster)."""
    sweep = Sweep.from_toml(sweep_file(tmp_path, SMALL))
    task = sweep.tasks[0]

    def payload(raw):
        return {"id": task.id, "raw": raw, "source": "test", "base": str(sweep.base)}

    raw = copy.deepcopy(task.raw)
    raw["task"]["model"] = str(tmp_path / "missing.toml")
    row = solve_task(payload(raw))["row"]
    assert row["status"] == "error" and "missing.toml" in row["message"]
    raw = copy.deepcopy(task.raw)
    raw["solver"]["max_iterations"] = 2
    out = solve_task(payload(raw))
    assert out["row"]["status"] == "failed" and out["row"]["iterations"] == 2
    assert out["arrays"]["q"].shape == (20, 5)
    raw = copy.deepcopy(task.raw)
    raw["task"]["duration"] = 0.05  # shorter than the passive joints' speed limit allows
    out = solve_task(payload(raw))
    assert out["row"]["status"] == "infeasible" and out["arrays"] is None
    raw = copy.deepcopy(task.raw)
    raw["task"]["goal"] = [0.7071, 0.0, 0.7071]  # opposite motor 1's axis: beyond the arcs
    out = solve_task(payload(raw))
    assert out["row"]["status"] == "infeasible" and out["arrays"] is None
    assert "out of reach of spherical_fivebar" in out["row"]["message"]


# --------------------------------------------------------------- on Dask
@pytest.fixture(scope="module")
def client():
    from workbench.sweep import connect

    with connect(workers=2, dashboard=":0") as c:
        yield c


def serial_row(sweep: Sweep, out: Path, row: dict):
    """The same problem solved in this process (with the row's warm start, if any)."""
    task = sweep.task(row["id"])
    problem = ReachProblem.from_dict(copy.deepcopy(task.raw), "serial", sweep.base)
    if row["warm_start_from"]:
        source = out / "tasks" / row["warm_start_from"] / "trajectory.npz"
        problem = dataclasses.replace(problem, warm_start=source)
    return solve(problem, progress=False)


def test_sweep_equals_serial_solves(client, tmp_path):
    text = SMALL.replace("[set]", 'warm_start = "neighbours"\n[set]')
    sweep = Sweep.from_toml(sweep_file(tmp_path, text))
    out = tmp_path / "out"
    outcome = run_sweep(sweep, out, client=client, progress=False, echo=lambda s: None)
    assert len(outcome.rows) == 8 and sorted(outcome.solved_now) == [t.id for t in sweep.tasks]
    table = pq.read_table(out / "results.parquet").to_pylist()
    assert [r["id"] for r in table] == [t.id for t in sweep.tasks]
    for name in ("results.csv", "effort_map.png", "sweep.json"):
        assert (out / name).is_file()
    # the seeds (elevation 50 deg) start from the guess, the others from the seed below them
    assert [bool(r["warm_start_from"]) for r in table] == [False, True] * 4
    for row in table:
        result = serial_row(sweep, out, row)
        assert row["status"] == result.status, row["id"]
        assert row["objective"] == pytest.approx(result.objective, rel=1e-8), row["id"]
        assert row["peak_torque"] == pytest.approx(np.abs(result.tau).max(), rel=1e-6)
        with np.load(out / row["trajectory"]) as data:
            np.testing.assert_allclose(data["q"], result.q, atol=1e-6)
        for key in ("azimuth_deg", "elevation_deg", "iterations", "solve_time_s", "task_error",
                    "max_constraint_violation"):  # fmt: skip
            assert row[key] is not None


def test_killed_worker_does_not_stop_the_sweep(client, tmp_path):
    sweep = Sweep.from_toml(
        sweep_file(tmp_path, SMALL.replace("[set]", 'warm_start = "none"\n[set]'))
    )
    pids = client.run(os.getpid)
    killed = []

    def kill_one(row):
        if not killed:  # after the first result, while the others run
            victim = next(iter(pids.values()))
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)

    outcome = run_sweep(sweep, tmp_path / "out", client=client, progress=False,
                        on_result=kill_one, echo=lambda s: None)  # fmt: skip
    assert killed and len(outcome.rows) == 8
    assert all(r["status"] == "solved" for r in outcome.rows), [r["message"] for r in outcome.rows]
    client.wait_for_workers(2, timeout=60)


def test_interrupted_sweep_resumes(client, tmp_path):
    sweep = Sweep.from_toml(sweep_file(tmp_path, SMALL))
    out = tmp_path / "out"
    seen = []

    def interrupt(row):
        seen.append(row["id"])
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(sweep, out, client=client, progress=False, on_result=interrupt,
                  echo=lambda s: None)  # fmt: skip
    done = sorted(p.parent.name for p in (out / "tasks").glob("*/row.json"))
    assert done == sorted(seen)
    partial = pq.read_table(out / "results.parquet").to_pylist()
    assert sorted(r["id"] for r in partial) == done  # the table of what was done
    outcome = run_sweep(sweep, out, client=client, progress=False, echo=lambda s: None)
    assert sorted(outcome.reused) == done
    assert sorted(outcome.solved_now) == sorted(set(t.id for t in sweep.tasks) - set(done))
    assert len(pq.read_table(out / "results.parquet")) == 8
    again = run_sweep(sweep, out, client=client, progress=False, echo=lambda s: None,
                      warm_start="none")  # fmt: skip
    assert again.solved_now == [] and len(again.reused) == 8
    assert json.loads((out / "sweep.json").read_text())["warm_start"] == "none"  # as used


@pytest.mark.slow
def test_task_over_its_time_is_a_timeout_row(client, tmp_path):
    text = SMALL.replace("[set]", "task_timeout_s = 0.5\n[set]")
    text = text.replace("count = 4}", "count = 2}").replace("[50.0, 65.0]", "[50.0]")
    text = text.replace('"transcription.knots" = 20', '"transcription.knots" = 150')  # ~10 s
    sweep = Sweep.from_toml(sweep_file(tmp_path, text))
    outcome = run_sweep(sweep, tmp_path / "out", client=client, progress=False, echo=lambda s: None)
    assert [r["status"] for r in outcome.rows] == ["timeout", "timeout"]
    assert all(r["message"].startswith("timeout") for r in outcome.rows)
    client.wait_for_workers(2, timeout=60)


def _children(pid: int) -> list[int]:
    """Process ids whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie waiting for the container's init to reap it does not:
    multiprocessing's resource tracker ends with its parent and is reparented as one)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_ctrl_c_stops_the_cluster_and_keeps_rows(tmp_path):
    path = sweep_file(tmp_path, SMALL)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "workbench.cli", "sweep", str(path), "--out", str(out),
               "--workers", "2", "--quiet"]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    workers: list[int] = []
    while time.monotonic() < deadline and not list((out / "tasks").glob("*/row.json")):
        workers = sorted(set(workers) | set(_children(process.pid)))
        time.sleep(0.2)
    assert list((out / "tasks").glob("*/row.json")), process.communicate()
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr
    time.sleep(1)
    alive = [pid for pid in workers if _running(pid)]
    assert not alive, f"stray processes {alive}"
    assert (out / "results.parquet").is_file()
    done = json.loads((out / "sweep.json").read_text())["done"]
    assert 1 <= done < 8


def test_unreachable_scheduler_is_one_line_and_writes_nothing(tmp_path, capsys):
    from workbench.cli import main

    out = tmp_path / "out"
    args = ["sweep", str(sweep_file(tmp_path, SMALL)), "--out", str(out)]
    for address in ("tcp://127.0.0.1:1", "notanaddress"):
        assert main([*args, "--scheduler", address]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--scheduler {address}: cannot reach it" in err[0]
        assert not out.exists()
