"""One sweep task on a Dask worker: build the problem, solve it, return its row and trajectory.

The task goes through the problem contract only (:mod:`workbench.ocp.kinds`:
read, solve, and the result's :meth:`~workbench.ocp.contract.Result.row`
and :meth:`~workbench.ocp.contract.Result.arrays`), so any registered
problem kind can be swept. :func:`solve_task` never raises for a problem of
the task itself: an unreachable goal, an infeasible or failed solve and any
exception are rows with their status ("solved", "infeasible", "failed" or
"error") and message. It writes nothing: the sweep process stores each result
(atomically) as it arrives, so workers need no access to the results directory
and a worker that dies leaves no file behind. A warm start travels with the
task as arrays.
"""

from __future__ import annotations

import os
import socket
import time
import traceback
from pathlib import Path
from typing import Any

from workbench.ocp import kinds
from workbench.ocp.contract import Infeasible
from workbench.runtime import set_num_threads

START_EVENT = "workbench-sweep-start"  # logged on the scheduler when a task starts (timeouts)


def solve_task(payload: dict[str, Any]) -> dict[str, Any]:
    """Solve one task. ``payload``: id, raw (problem dict), source, base (directory for
    relative paths), warm (a solved neighbour's result arrays, or None), warm_from (its
    id) and optionally kind (``[name, module]``: registered on the worker first, for kinds
    defined outside the package). Returns ``{"row": {...}, "arrays": {...} or None}``."""
    started = time.perf_counter()
    _announce_start()
    row: dict[str, Any] = {
        "status": "error",
        "message": "",
        "objective": float("nan"),
        "iterations": 0,
        "solve_time_s": float("nan"),
        "task_time_s": float("nan"),
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
            warning=" | ".join(result.warnings),
            **result.row(),
        )
        arrays = result.arrays()
    except Infeasible as exc:  # shown impossible before any solve
        row.update(status="infeasible", message=" ".join(str(exc).split()))
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
    if payload.get("kind"):
        kinds.register(*payload["kind"])
    problem = kinds.read_dict(payload["raw"], payload["source"], Path(payload["base"]))
    return kinds.solve(problem, progress=False, warm=payload.get("warm"))
