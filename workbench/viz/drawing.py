"""Result files drawn beside the computation: a forked worker that draws while a command solves.

A command whose plots and animation are a large part of its time runs in
``with worker(modules):``, entered first (before its large imports and before any thread): one
worker process is forked and imports the drawing modules it is named
(:mod:`workbench.viz.plots`: matplotlib; :mod:`workbench.viz.viewer`: meshcat) while the command
reads its inputs and solves on the other core. :func:`draw` then hands it a
drawing (a module-level function ``function(path, *args, **kwargs)`` that
writes one file, named ``"module:function"`` so that this process need not
import its module, and its picklable arguments); the worker writes the file
into a private temporary folder and sends its bytes back, and
:meth:`Drawing.write` puts them into the results' staging folder atomically
(:func:`workbench.io.atomic_write`). Without a worker (a library call, the
sweep's tasks, or a platform without ``fork``) :meth:`Drawing.write` calls the
function in this process: the files are the same either way.

The worker ignores Ctrl-C (the command's process handles it) and ends with the
``with`` block, or with the command's process however that ends (also SIGKILL, on
Linux); a worker that died is replaced by drawing in this process.
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import multiprocessing
import os
import signal
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.io import atomic_write

_worker: ProcessPoolExecutor | None = None
PR_SET_PDEATHSIG = 1  # prctl(2)


@contextlib.contextmanager
def worker(*modules: str) -> Iterator[None]:
    """A drawing worker for the duration of the block, which imports ``modules`` (the drawing
    functions' modules) at once: forked only from a process with one thread (a fork copies no
    other thread, and a lock another thread held would stay locked in the worker) and where
    ``fork`` exists; otherwise the drawings are made in this process."""
    global _worker
    if _worker is not None or threading.active_count() > 1 or not _can_fork():
        yield
        return
    context = multiprocessing.get_context("fork")
    _worker = ProcessPoolExecutor(
        1, mp_context=context, initializer=_prepare, initargs=(os.getpid(), *modules)
    )
    _worker.submit(int)  # a fork-context pool starts its process at the first submit
    try:
        yield
    finally:
        _worker.shutdown(cancel_futures=True)
        _worker = None


def _can_fork() -> bool:
    return "fork" in multiprocessing.get_all_start_methods()


def _prepare(parent: int, *modules: str) -> None:
    """The worker: Ctrl-C is its parent's, SIGTERM (a process group's, from ``timeout`` or a
    job scheduler) ends it quietly rather than with the parent's handler and a traceback,
    it ends with its parent however that ends (:func:`_end_with_parent`), and the drawing
    libraries are imported now."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _end_with_parent(parent)
    for module in modules:
        importlib.import_module(module)


def _end_with_parent(parent: int) -> None:
    """SIGTERM to this process when ``parent`` ends, also by SIGKILL, which no handler of
    the parent sees (Linux's ``PR_SET_PDEATHSIG``; elsewhere nothing): a killed command
    left its idle worker behind (120 MB). A parent gone before the call ends it now."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return
    prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:
        os._exit(0)


@dataclass
class Drawing:
    """One result file drawn by ``function(path, *args, **kwargs)`` (``"module:function"``);
    ``name`` is its file name."""

    name: str
    function: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    pending: Future | None = field(default=None, repr=False, compare=False)

    def write(self, stage: Path) -> Path:
        """The file ``stage / name``: the worker's bytes, or drawn here without a worker."""
        path = Path(stage) / self.name
        if self.pending is not None:
            try:
                data = self.pending.result()
            except BrokenProcessPool:
                data = None
            self.pending = None
            if data is not None:
                return atomic_write(path, lambda tmp: tmp.write_bytes(data))
        _call(self.function, path, self.args, self.kwargs)
        return path

    def __getstate__(self) -> dict:
        return {**self.__dict__, "pending": None}


def draw(name: str, function: str, *args: Any, **kwargs: Any) -> Drawing:
    """The file ``name`` drawn by ``function(path, *args, **kwargs)``, sent to the worker now
    when there is one (:meth:`Drawing.write` collects it)."""
    drawing = Drawing(name, function, args, kwargs)
    if _worker is not None:
        try:
            drawing.pending = _worker.submit(_render, name, function, args, kwargs)
        except BrokenProcessPool:
            pass
    return drawing


def _render(name: str, function: str, args: tuple, kwargs: dict) -> bytes:
    """In the worker: draw into a private folder and return the file's bytes."""
    with tempfile.TemporaryDirectory(prefix="workbench-drawing-") as folder:
        path = Path(folder) / name
        _call(function, path, args, kwargs)
        return path.read_bytes()


def _call(function: str, path: Path, args: tuple, kwargs: dict) -> None:
    module, name = function.split(":")
    getattr(importlib.import_module(module), name)(path, *args, **kwargs)
