"""The sweep's outputs: one table (Parquet and CSV), the effort map and sweep.json.

Columns, one row per task in task order: ``id``; the varied inputs (goal
``azimuth_deg``, ``elevation_deg`` for pointing goals, ``goal_x``, ``goal_y``,
``goal_z``; every other axis under its dotted key, array values as JSON
text); ``status`` ("solved", "infeasible", "failed", "timeout", "error") and
``message``; ``objective`` (the problem's objective, N^2 m^2 s for the
effort), ``iterations``, ``solve_time_s`` (the solver) and ``task_time_s``
(the whole task on its worker); the problem kind's own columns
(:meth:`workbench.ocp.contract.Result.row`, in the order they first appear),
for reaching ``peak_torque`` (N m, max |tau| over knots and motors),
``max_constraint_violation``, ``task_error`` (simulated final task error, rad
or m), ``tracking_error``, ``transcription_error`` (the error the knots make,
:func:`workbench.ocp.reach.transcription_error`) and, with co-design,
``design.<variable>`` (m) and ``moving_mass_kg``; ``warning`` (the solve's
warnings, empty when none); ``warm_start_from`` (the id of the task whose
trajectory started this one, empty: the minimum-jerk guess), ``attempts``
and ``first_status``; ``worker`` (host:pid) and ``trajectory``
(``tasks/<id>/trajectory.npz``, relative to the results directory; empty
when no trajectory exists, e.g. an unreachable goal). Every file is written
atomically.
"""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from workbench.io import atomic_write, atomic_write_text, json_text
from workbench.sweep.plots import plot_effort_map

RESULT_COLUMNS = ("status", "message", "objective", "iterations", "solve_time_s", "task_time_s")
RUN_COLUMNS = ("warning", "warm_start_from", "attempts", "first_status")
TAIL_COLUMNS = ("worker", "trajectory")
INTEGER_COLUMNS = ("iterations", "attempts")


def columns(sweep, rows: list[dict[str, Any]]) -> list[str]:
    """Column order: id, inputs, results, the kind's columns, run columns, worker, trajectory."""
    inputs = list(sweep.tasks[0].inputs) if sweep.tasks else []
    known = {"id", "key", *inputs, *RESULT_COLUMNS, *RUN_COLUMNS, *TAIL_COLUMNS}
    own = list(dict.fromkeys(k for row in rows for k in row if k not in known))
    return ["id", *inputs, *RESULT_COLUMNS, *own, *RUN_COLUMNS, *TAIL_COLUMNS]


def _cell(value: Any) -> Any:
    """Table cell: numbers and strings as they are, arrays and tables as JSON text."""
    if isinstance(value, list | dict):
        return json.dumps(value)
    return value


def arrow_table(sweep, rows: list[dict[str, Any]]):
    """The rows as a pyarrow Table (typed columns; missing values are null)."""
    import pyarrow as pa

    data = {}
    for name in columns(sweep, rows):
        values = [_cell(row.get(name)) for row in rows]
        present = [v for v in values if v is not None]
        if name in INTEGER_COLUMNS:
            data[name] = pa.array(values, type=pa.int64())
        elif present and all(isinstance(v, bool) for v in present):
            data[name] = pa.array(values, type=pa.bool_())
        elif present and all(isinstance(v, int | float) and not isinstance(v, bool)
                             for v in present):  # fmt: skip
            data[name] = pa.array(
                [None if v is None else float(v) for v in values], type=pa.float64()
            )
        else:
            data[name] = pa.array([None if v is None else str(v) for v in values], pa.string())
    return pa.table(data)


def csv_text(sweep, rows: list[dict[str, Any]]) -> str:
    """The rows as CSV (floats with 17 significant digits, NaN and missing values empty)."""
    names = columns(sweep, rows)
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(names)
    for row in rows:
        cells = []
        for name in names:
            value = _cell(row.get(name))
            if isinstance(value, float):
                value = "" if not math.isfinite(value) else repr(value)
            cells.append("" if value is None else value)
        writer.writerow(cells)
    return buffer.getvalue()


def write_outputs(sweep, out: Path, rows: list[dict[str, Any]], outcome) -> None:
    """results.parquet, results.csv, effort_map.png and sweep.json in ``out``."""
    import pyarrow.parquet as pq

    table = arrow_table(sweep, rows)
    atomic_write(out / "results.parquet", lambda tmp: pq.write_table(table, tmp))
    atomic_write_text(out / "results.csv", csv_text(sweep, rows))
    plot_effort_map(out / "effort_map.png", sweep, rows)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    solved = [r for r in rows if r["status"] == "solved"]
    warm = [r for r in solved if r.get("warm_start_from")]
    cold = [r for r in solved if not r.get("warm_start_from")]
    summary = {
        "sweep": sweep.source,
        "problem": str(sweep.problem),
        "tasks": len(sweep.tasks),
        "done": len(rows),
        "missing": len(sweep.tasks) - len(rows),
        "status": counts,
        "warm_start": outcome.warm_start,
        "solved_cold": _stats(cold),
        "solved_warm": _stats(warm),
        "rescued_by_retry": sum(
            1 for r in rows if r.get("attempts") == 2 and r["status"] == "solved"
        ),
        "this_run": {
            "solved_now": len(outcome.solved_now),
            "reused": len(outcome.reused),
            "retried": len(outcome.retried),
            "wall_time_s": outcome.wall_time_s,
            "workers": outcome.workers,
            "dashboard": outcome.dashboard,
        },
        "files": ["results.parquet", "results.csv", "effort_map.png", "tasks/<id>/"],
    }
    atomic_write_text(out / "sweep.json", json_text(summary))


def _stats(rows: list[dict[str, Any]]) -> dict[str, float | int | None]:
    """Count and mean iterations and solve time of solved rows."""
    if not rows:
        return {"count": 0, "mean_iterations": None, "mean_solve_time_s": None}
    return {
        "count": len(rows),
        "mean_iterations": float(np.mean([r["iterations"] for r in rows])),
        "mean_solve_time_s": float(np.mean([r["solve_time_s"] for r in rows])),
    }


def read_results(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a results.parquet file (dicts; for tests and scripts)."""
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()
