"""Workspace sweep on Dask: a serial loop against 1 and 2 worker processes, cold and warm starts.

    python benchmarks/bench_sweep.py [--sweep problems/fivebar_sweep.toml] [--json FILE]

The sweep (default: the shipped 64-goal azimuth x elevation grid of the
spherical five-bar, 40 knots) is solved

1. in a serial loop in this process (every task from the minimum-jerk guess,
   after one untimed solve that loads the model and the compiled kernels);
2. with ``workbench.sweep.run_sweep`` on a LocalCluster of 1 and of 2 worker
   processes, every task cold (``warm_start = "none"``), the same tasks as 1.;
3. on 2 workers with warm starts from solved neighbours (the default).

Wall times of the sweeps exclude starting the cluster (reported on its own);
"busy" is the sum of the tasks' times on their workers over (workers x wall),
the fraction of the workers' time spent in tasks. Markdown rows on stdout.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from timing import machine, row

from workbench.resources import shipped


def serial(sweep) -> dict:
    from workbench.ocp.problem import ReachProblem
    from workbench.ocp.reach import solve

    first = sweep.tasks[0]
    solve(ReachProblem.from_dict(copy.deepcopy(first.raw), "warm-up", sweep.base), progress=False)
    times, results = [], {}
    started = time.perf_counter()
    for task in sweep.tasks:
        t0 = time.perf_counter()
        problem = ReachProblem.from_dict(copy.deepcopy(task.raw), task.id, sweep.base)
        result = solve(problem, progress=False)
        times.append(time.perf_counter() - t0)
        results[task.id] = {
            "status": result.status,
            "objective": result.objective,
            "iterations": result.iterations,
        }
    return {"wall_s": time.perf_counter() - started, "task_s": times, "results": results}


def on_dask(sweep, workers: int, warm: str) -> dict:
    from workbench.sweep import connect, run_sweep

    started = time.perf_counter()
    with connect(workers=workers, dashboard=":0") as client:
        client.wait_for_workers(workers)
        up = time.perf_counter() - started
        with tempfile.TemporaryDirectory() as out:
            outcome = run_sweep(
                sweep, out, client=client, progress=False, warm_start=warm, echo=lambda s: None
            )
    rows = {r["id"]: r for r in outcome.rows}
    busy = sum(r["task_time_s"] for r in outcome.rows) / (workers * outcome.wall_time_s)
    return {
        "workers": workers,
        "warm_start": warm,
        "cluster_start_s": up,
        "wall_s": outcome.wall_time_s,
        "busy": busy,
        "rows": rows,
        "retried": outcome.retried,
    }


def summary(label: str, run: dict, reference: float | None) -> str:
    rows = list(run["rows"].values())
    solved = sum(r["status"] == "solved" for r in rows)
    per_task = run["wall_s"] / len(rows)
    speed = "" if reference is None else f"{reference / run['wall_s']:.2f}x"
    return row(
        label, run["workers"], f"{run['cluster_start_s']:.1f}", f"{run['wall_s']:.1f}",
        f"{per_task:.2f}", speed, f"{100 * run['busy']:.0f} %",
        f"{statistics.mean(r['iterations'] for r in rows):.1f}", f"{solved}/{len(rows)}",
    )  # fmt: skip


def main() -> int:
    from workbench.sweep import Sweep

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", default=str(shipped("problems") / "fivebar_sweep.toml"))
    parser.add_argument("--json", help="write every number to this file")
    args = parser.parse_args()
    sweep = Sweep.from_toml(args.sweep)
    n = len(sweep.tasks)
    print(f"{machine()}; {n} tasks of {args.sweep}", file=sys.stderr)

    loop = serial(sweep)
    print(f"serial loop done: {loop['wall_s']:.1f} s", file=sys.stderr)
    one = on_dask(sweep, 1, "none")
    print(f"1 worker done: {one['wall_s']:.1f} s", file=sys.stderr)
    two = on_dask(sweep, 2, "none")
    print(f"2 workers done: {two['wall_s']:.1f} s", file=sys.stderr)
    warm = on_dask(sweep, 2, "neighbours")
    print(f"2 workers, warm starts done: {warm['wall_s']:.1f} s", file=sys.stderr)

    solved = sum(r["status"] == "solved" for r in loop["results"].values())
    loop_iterations = statistics.mean(r["iterations"] for r in loop["results"].values())
    print(row("run", "workers", "cluster start [s]", "wall [s]", "s / task", "vs 1 worker",
              "busy", "mean iterations", "solved"))  # fmt: skip
    print(row(*["---"] * 9))
    print(row(
        "serial loop (this process)", "-", "-", f"{loop['wall_s']:.1f}",
        f"{loop['wall_s'] / n:.2f}", "", "", f"{loop_iterations:.1f}",
        f"{solved}/{n}",
    ))  # fmt: skip
    print(summary("sweep, cold starts", one, one["wall_s"]))
    print(summary("sweep, cold starts", two, one["wall_s"]))
    print(summary("sweep, warm starts from neighbours", warm, one["wall_s"]))

    # warm against cold, task by task (the tasks that started from a neighbour)
    started_warm = [i for i, r in warm["rows"].items() if r["warm_start_from"]]
    cold, hot = two["rows"], warm["rows"]
    both = [i for i in started_warm if cold[i]["status"] == hot[i]["status"] == "solved"]
    same = [
        i for i in both
        if abs(hot[i]["objective"] - cold[i]["objective"]) <= 1e-6 * abs(cold[i]["objective"])
    ]  # fmt: skip
    lower = [i for i in both if hot[i]["objective"] < cold[i]["objective"] * (1 - 1e-6)]
    print()
    print(row("tasks warm-started", "mean iterations warm / cold", "mean solve s warm / cold",
              "same optimum", "warm lower", "warm higher", "solved warm / cold"))  # fmt: skip
    print(row(*["---"] * 7))
    print(row(
        len(started_warm),
        f"{statistics.mean(hot[i]['iterations'] for i in both):.1f} / "
        f"{statistics.mean(cold[i]['iterations'] for i in both):.1f}",
        f"{statistics.mean(hot[i]['solve_time_s'] for i in both):.2f} / "
        f"{statistics.mean(cold[i]['solve_time_s'] for i in both):.2f}",
        len(same), len(lower), len(both) - len(same) - len(lower),
        f"{sum(hot[i]['status'] == 'solved' for i in started_warm)} / "
        f"{sum(cold[i]['status'] == 'solved' for i in started_warm)}",
    ))  # fmt: skip
    mismatch = [
        i for i, r in two["rows"].items()
        if r["status"] != loop["results"][i]["status"]
        or (r["status"] == "solved"
            and abs(r["objective"] - loop["results"][i]["objective"])
            > 1e-8 * abs(loop["results"][i]["objective"]))
    ]  # fmt: skip
    print(f"\ncold sweep rows differing from the serial loop: {len(mismatch)} {mismatch}")
    if args.json:
        data = {"serial": loop, "one": one, "two": two, "warm": warm, "machine": machine()}
        Path(args.json).write_text(json.dumps(data, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
