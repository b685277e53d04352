"""One sweep task on a Dask worker: build the problem, solve it, return its row and trajectory.

:func:`solve_task` never raises for a problem of the task itself: an
unreachable goal, an infeasible or failed solve and any exception are rows
with their status ("solved", "infeasible", "failed" or "error") and message.
It writes nothing: the sweep process stores each result (atomically) as it
arrives, so workers need no access to the results directory and a worker
that dies leaves no file behind. A warm start travels with the task as
arrays and is written to a temporary file on the worker for
:func:`workbench.ocp.reach.solve`.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from workbench.closed_chains import load
from workbench.ocp.problem import ReachProblem
from workbench.ocp.reach import solve
from workbench.runtime import set_num_threads

TRAJECTORY_KEYS = ("t", "q", "dq", "ddq", "tau")
START_EVENT = "workbench-sweep-start"  # logged on the scheduler when a task starts (timeouts)


def solve_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Solve one task. ``payload``: id, raw (problem dict), source, base (directory for
    relative paths), warm (t, q, dq, ddq arrays of a solved neighbour, or None) and
    warm_from (its id). Returns ``{"row": {...}, "arrays": {...} or None}``."""
    started = time.perf_counter()
    _announce_start()
    row: dict[str, Any] = {
        "status": "error",
        "message": "",
        "objective": float("nan"),
        "iterations": 0,
        "solve_time_s": float("nan"),
        "task_time_s": float("nan"),
        "peak_torque": float("nan"),
        "max_constraint_violation": float("nan"),
        "task_error": float("nan"),
        "tracking_error": float("nan"),
        "transcription_error": float("nan"),
        "warning": "",
        "warm_start_from": payload.get("warm_from") or "",
        "worker": f"{socket.gethostname()}:{os.getpid()}",
    }
    arrays = None
    try:
        result = _solve(payload)
        row.update(
            status=result.status,
            message=" ".join(str(result.message).split()),
            objective=float(result.objective),
            iterations=int(result.iterations),
            solve_time_s=float(result.solve_time_s),
            peak_torque=_peak(result.tau),
            max_constraint_violation=float(result.max_constraint_violation),
            task_error=float(result.task_error),
            tracking_error=float(result.tracking_error),
            transcription_error=float(result.transcription_error),
            warning=" | ".join(result.warnings),
        )
        design = result.design or {}
        for name, values in design.get("variables", {}).items():
            row[f"design.{name}"] = float(values["after"])
        if "moving_mass_kg" in design:
            row["moving_mass_kg"] = float(design["moving_mass_kg"]["after"])
        if np.all(np.isfinite(result.q)):
            arrays = {key: np.asarray(getattr(result, key)) for key in TRAJECTORY_KEYS}
    except Exception as exc:  # a task's own failure is a row, never a crash of the sweep
        text = " ".join(str(exc).split()) or type(exc).__name__
        where = traceback.extract_tb(exc.__traceback__)[-1]
        row["message"] = (
            f"{type(exc).__name__}: {text} ({Path(where.filename).name}:{where.lineno})"
        )
    row["task_time_s"] = time.perf_counter() - started
    return {"id": payload["id"], "row": row, "arrays": arrays}


def _announce_start() -> None:
    """Log the task's start on the scheduler (the sweep process times tasks out from it)."""
    try:
        from distributed import get_worker

        worker = get_worker()
        worker.log_event(START_EVENT, {"key": worker.get_current_task()})
    except (ImportError, ValueError):  # not on a Dask worker (tests call the function directly)
        pass


def _solve(payload: dict[str, Any]):
    set_num_threads(1)  # one task per core: the kernels' thread pool would oversubscribe
    problem = ReachProblem.from_dict(payload["raw"], payload["source"], Path(payload["base"]))
    model = load(problem.model)
    warm = payload.get("warm")
    if warm is None:
        return solve(problem, model, progress=False)
    with tempfile.TemporaryDirectory(prefix="workbench-sweep-") as folder:
        path = Path(folder) / "warm.npz"
        np.savez(path, **warm)
        problem = replace(problem, warm_start=path)
        return solve(problem, model, progress=False)


def _peak(tau) -> float:
    tau = np.asarray(tau, dtype=float)
    return float(np.max(np.abs(tau))) if tau.size and np.all(np.isfinite(tau)) else float("nan")
