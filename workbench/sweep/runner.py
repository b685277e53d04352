"""Run a sweep on Dask: submit the tasks, warm-start from neighbours, store results as they come.

Cluster: a :class:`distributed.LocalCluster` with one worker process per core
and one thread per worker (IPOPT and the compiled kernels are single-threaded
per task), or a running scheduler (``scheduler="tcp://host:port"``; its
workers need workbench installed and see the base problem's files at the
same paths). Tasks are plain functions of their inputs
(:func:`workbench.sweep.tasks.solve_task`); the scheduler hands them to free
workers, and when a worker process dies (killed, out of memory) its nanny
starts a new one and the scheduler runs the lost task again elsewhere; a task
that has killed ``distributed.scheduler.allowed-failures`` workers (3) is a
row with status "error".

Starts (``warm_start``, :mod:`workbench.sweep.spec`): with "rescue" (the
default) every task starts from the minimum-jerk guess, all submitted at
once; with "neighbours" the seeds go first and every other task waits until a
task within 1.5 steps is solved, then starts from the trajectory of the
nearest solved task (or from the guess, once every seed near it has ended
unsolved). In both, a second wave gives the tasks that IPOPT did not solve
(or that timed out after a warm start) one more attempt: from the nearest
solved neighbour when they started from the guess, from the guess when they
were warm-started; the row keeps the solved attempt, else the first
(``attempts`` and ``first_status`` say what happened). "none": every task
once, from the guess.

A task that runs longer than the sweep file's ``task_timeout_s`` (each task
logs its start on the scheduler) is cancelled, its worker restarted, and
it is a row with status "timeout"; so is a task that ended between two
checks (every ``POLL_S``) but ran longer than that on its worker, whatever
it found.

Results directory (written by this process only, each file atomically):
``tasks/<id>/trajectory.npz`` (the result's arrays: t, q, dq, ddq, tau for
reaching) and
``tasks/<id>/row.json`` (the row, written last: a task is done when it is
there), then ``results.parquet``, ``results.csv``, ``effort_map.png`` and
``sweep.json``. A sweep run again into the same directory (after Ctrl-C, a
kill, a crash) reuses every row whose problem is unchanged and solves only
the missing tasks. Ctrl-C or SIGTERM cancels the tasks, writes the table of
the rows done so far, shuts the local cluster down (its worker processes
end with it) and re-raises.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import math
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from workbench.errors import WorkbenchError
from workbench.io import atomic_write, atomic_write_text, check_output_directory, json_ready
from workbench.runtime import available_cores
from workbench.sweep.spec import Sweep, Task, neighbours
from workbench.sweep.table import write_outputs
from workbench.sweep.tasks import START_EVENT, solve_task

UNSOLVED_RETRY = ("failed", "infeasible")
POLL_S = 2.0  # s between checks for overdue tasks while waiting for results
WORKER_ENV = {"NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


@dataclass
class SweepOutcome:
    """What a run did: the rows in task order and what was solved now or reused."""

    out: Path
    rows: list[dict[str, Any]]
    solved_now: list[str] = field(default_factory=list)  # ids run in this call
    reused: list[str] = field(default_factory=list)  # ids whose rows were on disk
    retried: list[str] = field(default_factory=list)
    wall_time_s: float = 0.0
    workers: int = 0
    dashboard: str | None = None
    warm_start: str = "rescue"  # the strategy used (the sweep file's or the override)

    @property
    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        return counts


# ----------------------------------------------------------------- cluster
def cores() -> int:
    return available_cores()


@contextlib.contextmanager
def connect(workers: int | None = None, scheduler: str | None = None, dashboard: str = ":8787"):
    """A Dask client: on a new LocalCluster (``workers`` processes, default one per core,
    one thread each), or on the running scheduler at ``scheduler``. The local cluster
    is shut down on exit, also on Ctrl-C and SIGTERM."""
    from distributed import Client, LocalCluster

    if scheduler is not None:
        try:
            client = Client(scheduler, timeout="10s")
        except (OSError, TimeoutError, ValueError) as exc:
            raise WorkbenchError(f"--scheduler {scheduler}: cannot reach it: {exc}") from None
        try:
            yield client
        finally:
            client.close()
        return
    n = workers or cores()
    if n < 1:
        raise WorkbenchError(f"--workers {n} must be at least 1")
    # The worker processes start with SIGINT ignored (a disposition they inherit): Ctrl-C
    # reaches the whole process group, and this process, not each worker, stops the sweep.
    main = threading.current_thread() is threading.main_thread()  # signals: main thread only
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=1,
            processes=True,
            silence_logs=logging.CRITICAL,
            dashboard_address=_free(dashboard),
            env=WORKER_ENV,
        )
    finally:
        if main:
            signal.signal(signal.SIGINT, previous)
    try:
        client = Client(cluster)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


def _free(address: str) -> str:
    """``address`` (":port"), or ":0" (any free port) when its port is taken."""
    host, _, port = address.rpartition(":")
    with socket.socket() as probe:
        try:
            probe.bind((host or "", int(port)))
        except (OSError, ValueError):
            return f"{host}:0"
    return address


def dashboard_address(client) -> str | None:
    """The dashboard URL, or None when bokeh (the dashboard's server) is not installed."""
    link = getattr(client, "dashboard_link", None)
    if not link or importlib.util.find_spec("bokeh") is None:
        return None
    return link


# --------------------------------------------------------------------- run
def run_sweep(
    sweep: Sweep,
    out: str | os.PathLike,
    *,
    workers: int | None = None,
    scheduler: str | None = None,
    client=None,
    progress: bool = True,
    warm_start: str | None = None,
    on_result: Callable[[dict[str, Any]], None] | None = None,
    echo: Callable[[str], None] = print,
) -> SweepOutcome:
    """Solve the sweep's missing tasks into ``out`` (module docstring) and write the table.

    ``client`` (a ``distributed.Client``) is used as given and not closed;
    otherwise :func:`connect` makes one from ``workers`` / ``scheduler``.
    ``warm_start`` overrides the sweep file's choice; ``on_result(row)`` is
    called after each row is stored; ``echo`` prints the dashboard line.

    From a script, call it under ``if __name__ == "__main__":``: the local
    cluster's worker processes start by importing the main module
    (multiprocessing's spawn), which must not start another sweep.
    """
    out = check_output_directory(out)
    run = _Run(sweep, out, warm_start or sweep.warm_start, on_result)
    started = time.perf_counter()
    context = contextlib.nullcontext(client) if client is not None else connect(workers, scheduler)
    try:
        with context as active:
            try:  # only once the cluster is there: a sweep that cannot start writes nothing
                (out / "tasks").mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise WorkbenchError(
                    f"--out {out}: cannot create it: {exc.strerror or exc}"
                ) from None
            run.outcome.workers = len(active.scheduler_info(n_workers=-1)["workers"])
            run.outcome.dashboard = dashboard_address(active)
            if run.outcome.dashboard:
                echo(f"Dask dashboard: {run.outcome.dashboard}")
            else:
                echo("Dask dashboard: not served (install bokeh>=3.1 to get one)")
            run.execute(active, progress)
    finally:
        run.outcome.wall_time_s = time.perf_counter() - started
        run.finish()  # the table of the rows done so far, also after Ctrl-C
    return run.outcome


class _Run:
    """The state of one run: rows done, tasks waiting, futures running."""

    def __init__(self, sweep: Sweep, out: Path, warm: str, on_result) -> None:
        self.sweep, self.out, self.warm, self.on_result = sweep, out, warm, on_result
        self.tasks = {t.id: t for t in sweep.tasks}
        self.rows: dict[str, dict[str, Any]] = read_rows(out, sweep)
        self.outcome = SweepOutcome(out, [], reused=sorted(self.rows), warm_start=warm)
        self.failed = sum(r["status"] != "solved" for r in self.rows.values())
        self.near = neighbours(sweep.tasks)  # id -> [(distance, id)] within the radius

    # ------------------------------------------------------------ schedule
    def execute(self, client, progress: bool) -> None:
        from tqdm import tqdm

        todo = [t for t in self.sweep.tasks if t.id not in self.rows]
        if self.warm == "neighbours":
            first = [t for t in todo if t.id in self.sweep.seeds or self._warm_source(t)]
            waiting = [t for t in todo if t not in first]
        else:
            first, waiting = todo, []
        bar = tqdm(
            total=len(self.sweep.tasks), initial=len(self.rows), desc="sweep", unit="task",
            file=sys.stderr, disable=not progress, dynamic_ncols=True, smoothing=0.1,
            bar_format="{desc} {bar:20} {n_fmt}/{total_fmt} tasks done{postfix} "
            "[{elapsed} elapsed, {remaining} left]",
        )  # fmt: skip
        bar.set_postfix_str(f"{self.failed} failed", refresh=False)
        running: dict[Any, tuple[Task, int, str | None]] = {}
        try:
            for task in first:
                self._submit(client, running, task, 1, warm=self.warm == "neighbours")
            self._drain(client, running, waiting, bar, retry=False)
            retries = [
                self.tasks[i] for i, row in self.rows.items()
                if i in self.tasks and _retry_worthy(row) and self.warm != "none"
            ]  # fmt: skip
            for task in retries:
                was_warm = bool(self.rows[task.id]["warm_start_from"])
                if was_warm or self._nearest_solved(task) is not None:
                    self.outcome.retried.append(task.id)
                    self._submit(client, running, task, 2, warm=not was_warm)
            self._drain(client, running, [], bar, retry=True)
        except BaseException:
            client.cancel(list(running))
            raise
        finally:
            bar.close()

    def _drain(self, client, running, waiting, bar, retry: bool) -> None:
        """Store results as they arrive, start waiting tasks that became ready, time out."""
        from distributed import wait

        while running:
            try:
                done = wait(list(running), timeout=POLL_S, return_when="FIRST_COMPLETED").done
            except TimeoutError:
                done = set()
            for future in sorted(done, key=lambda f: running[f][0].index):
                task, _, _ = running.pop(future)
                self._arrived(task, self._in_time(task, _result(future, task)), bar, retry)
                for other in list(waiting):
                    if self._ready(other):
                        waiting.remove(other)
                        self._submit(client, running, other, 1, warm=True)
            for future in self._overdue(client, running):
                task, _, source = running.pop(future)
                result = self._timed_out(client, future, task)
                result["row"]["warm_start_from"] = source or ""
                self._arrived(task, result, bar, retry)
        if waiting:  # cannot happen: every waiting task has a seed near it
            raise RuntimeError(f"sweep: tasks never became ready: {[t.id for t in waiting]}")

    def _arrived(self, task: Task, result: dict[str, Any], bar, retry: bool) -> None:
        row = result["row"]
        if retry:
            row = self._better(task, row, result)
            if row is None:  # the first attempt stays
                return
        else:
            row["attempts"], row["first_status"] = 1, row["status"]
        self._store(task, row, result["arrays"])
        if not retry:
            bar.update()
        self.failed = sum(r["status"] != "solved" for r in self.rows.values())
        bar.set_postfix_str(f"{self.failed} failed")
        if self.on_result is not None:
            self.on_result(dict(row, id=task.id))

    def _overdue(self, client, running) -> list:
        """Running futures whose task started more than ``task_timeout_s`` ago."""
        limit = self.sweep.task_timeout_s
        if not limit or not running:
            return []
        started = {msg["key"]: when for when, msg in client.get_events(START_EVENT)}
        now = time.time()
        return [f for f in running if f.key in started and now - started[f.key] > limit]

    def _in_time(self, task: Task, result: dict[str, Any]) -> dict[str, Any]:
        """``result``, or a timeout row when its task ran longer than ``task_timeout_s``."""
        limit = self.sweep.task_timeout_s
        took = result["row"].get("task_time_s", math.nan)
        if not limit or not took > limit:
            return result
        message = f"timeout: the task ran {took:.3g} s, longer than task_timeout_s = {limit:g} s"
        timed_out = _error_result(task, message, status="timeout")
        timed_out["row"]["task_time_s"] = took
        return timed_out

    def _timed_out(self, client, future, task: Task) -> dict[str, Any]:
        """An error row for a task over its time; its worker is restarted to stop it."""
        where = [w for w, keys in client.processing().items() if future.key in keys]
        client.cancel([future])
        if where:
            with contextlib.suppress(Exception):
                client.restart_workers(where, timeout=60)
        limit = self.sweep.task_timeout_s
        message = (
            f"timeout: the task ran longer than task_timeout_s = {limit:g} s; its worker was "
            "restarted"
        )
        return _error_result(task, message, status="timeout")

    def _better(self, task: Task, row: dict, result: dict) -> dict | None:
        first = self.rows[task.id]
        row["attempts"], row["first_status"] = 2, first["status"]
        if row["status"] == "solved":
            return row
        first["attempts"] = 2
        self._write_row(task, first)
        return None

    def _submit(self, client, running, task: Task, attempt: int, warm: bool) -> None:
        """Submit ``task``, from its nearest solved neighbour's trajectory when ``warm``."""
        source = self._nearest_solved(task) if warm else None
        payload = {
            "id": task.id,
            "kind": self.sweep.kind,
            "raw": task.raw,
            "source": f"{self.sweep.problem} ({task.label})",
            "base": str(self.sweep.base),
            "warm": None if source is None else self._trajectory(source),
            "warm_from": source,
        }
        future = client.submit(solve_task, payload, pure=False, key=f"sweep-{task.id}-{attempt}-"
                               f"{os.urandom(4).hex()}")  # fmt: skip
        running[future] = (task, attempt, source)

    def _ready(self, task: Task) -> bool:
        """A waiting task starts when a task near it is solved, or every seed near it ended."""
        if self._warm_source(task):
            return True
        seeds = self.sweep.seeds
        return all(i in self.rows for _, i in self.near[task.id] if i in seeds)

    def _warm_source(self, task: Task) -> bool:
        return self._nearest_solved(task) is not None

    def _nearest_solved(self, task: Task) -> str | None:
        """The id of the solved task nearest to ``task`` within the neighbour radius."""
        for _, i in self.near[task.id]:
            row = self.rows.get(i)
            if row is not None and row["status"] == "solved":
                return i
        return None

    def _trajectory(self, task_id: str) -> dict[str, np.ndarray]:
        path = self.out / "tasks" / task_id / "trajectory.npz"
        try:
            with np.load(path) as data:
                return {key: np.asarray(data[key]) for key in data.files}
        except (OSError, KeyError, ValueError) as exc:
            raise WorkbenchError(f"sweep: cannot read the warm start {path}: {exc}") from None

    # --------------------------------------------------------------- store
    def _store(self, task: Task, row: dict[str, Any], arrays) -> None:
        folder = self.out / "tasks" / task.id
        row["trajectory"] = ""
        if arrays is not None:
            path = folder / "trajectory.npz"

            def write(tmp: Path) -> None:
                with open(tmp, "wb") as fh:
                    np.savez(fh, **arrays)

            atomic_write(path, write)
            row["trajectory"] = str(Path("tasks") / task.id / "trajectory.npz")
        self._write_row(task, row)

    def _write_row(self, task: Task, row: dict[str, Any]) -> None:
        row = dict(row, key=task.key)
        atomic_write_text(self.out / "tasks" / task.id / "row.json", _json(row) + "\n")
        self.rows[task.id] = row

    def finish(self) -> None:
        rows = [
            {"id": t.id, **t.inputs, **self.rows[t.id]} for t in self.sweep.tasks
            if t.id in self.rows
        ]  # fmt: skip
        self.outcome.rows = rows
        self.outcome.solved_now = sorted(set(self.rows) - set(self.outcome.reused))
        if rows:
            write_outputs(self.sweep, self.out, rows, self.outcome)


def _result(future, task: Task) -> dict[str, Any]:
    """The task's result; a task that could not run (killed workers, ...) is an error row."""
    try:
        return future.result()
    except Exception as exc:
        name = type(exc).__name__
        text = " ".join(str(exc).split())
        if name == "KilledWorker":
            text = (
                f"the task killed {text or 'its workers'} (distributed.scheduler.allowed-failures)"
            )
        return _error_result(task, f"{name}: {text}")


def _error_result(task: Task, message: str, status: str = "error") -> dict[str, Any]:
    row = {
        "status": status, "message": message, "objective": math.nan,
        "iterations": 0, "solve_time_s": math.nan, "task_time_s": math.nan,
        "warning": "", "warm_start_from": "",
        "worker": "",
    }  # fmt: skip
    return {"id": task.id, "row": row, "arrays": None}


def _retry_worthy(row: dict[str, Any]) -> bool:
    """On the first attempt: IPOPT ran and did not solve, or a warm-started task timed out."""
    if row.get("attempts", 1) != 1:
        return False
    if row["status"] in ("timeout", "error"):
        return row["status"] == "timeout" and bool(row["warm_start_from"])
    return row["status"] in UNSOLVED_RETRY and int(row.get("iterations") or 0) > 0


# ------------------------------------------------------------------- files
def _json(row: dict[str, Any]) -> str:
    """JSON with NaN as null (and read back as NaN)."""
    return json.dumps(json_ready(row), sort_keys=True)


def read_rows(out: Path, sweep: Sweep) -> dict[str, dict[str, Any]]:
    """Rows on disk whose problem is the task's (same key); others are solved again."""
    rows = {}
    for task in sweep.tasks:
        path = out / "tasks" / task.id / "row.json"
        try:
            row = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(row, dict) or row.get("key") != task.key or "status" not in row:
            continue
        trajectory = row.get("trajectory") or ""
        if trajectory and not (out / trajectory).is_file():
            continue
        rows[task.id] = {k: (math.nan if v is None else v) for k, v in row.items()}
    return rows
