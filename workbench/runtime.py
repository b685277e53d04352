"""How the compiled kernels run in a process: compile options, threads, BLAS.

* :data:`jit` and :data:`leaf` are the numba options of every kernel of the
  project: cached on disk (``__pycache__`` beside the modules), numpy's
  error model, and either released GIL (``jit``, a kernel run on threads) or
  inlined at the numba IR level (``leaf``, a helper called in a kernel:
  LLVM does not inline across the array-struct calling convention, and the
  helpers are 3x faster inlined).
* :func:`run_batched` splits a batch of samples across a thread pool with one
  worker per available core (:func:`set_num_threads` changes it).
* While that pool takes every core, numpy's BLAS (OpenBLAS) runs on one
  thread: the linear algebra between kernel calls (least squares, SVD, QR)
  would otherwise start a second set of threads on the same cores, which
  costs little on a quiet machine and multiplies wall times several times
  over next to other CPU-bound processes (threads spinning for each other).
  :func:`set_num_threads` with fewer workers than cores gives BLAS its
  default threads back.
* When numba has to compile (the disk cache has no entry), one line says so
  on stderr; :func:`set_compile_message` turns it off. On a first run (the
  cache holds no kernel at all, :func:`cache_is_empty`) the command line says
  it at its start (:func:`announce_first_compile`), before the imports and
  model loading that precede the first compilation, so that a new user sees
  what is happening within about a second.
  :func:`workbench.warm_up.warm_up` compiles (or loads) every kernel.
"""

from __future__ import annotations

import atexit
import functools
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numba as nb
import numpy as np
from numba.core import event
from threadpoolctl import threadpool_limits

jit = nb.njit(cache=True, error_model="numpy", nogil=True)
leaf = nb.njit(cache=True, error_model="numpy", inline="always")


def run_batched(kernel, n_samples: int, *args) -> None:
    """Run ``kernel(*args, start, stop)`` over ``range(n_samples)``, split across threads.

    Kernels are compiled with ``nogil=True``, so contiguous chunks of samples
    run in parallel on a thread pool with one worker per core; small batches
    run in the calling thread. A kernel that a second process compiles
    (:func:`compile_beside`) is called once that process is done.
    """
    if _BESIDE:
        _wait_beside(kernel)
    chunks = max(1, min(_POOL_SIZE, n_samples // 256))
    if chunks == 1:
        kernel(*args, 0, n_samples)
        return
    bounds = np.linspace(0, n_samples, chunks + 1).astype(np.int64)
    jobs = [_pool().submit(kernel, *args, bounds[c], bounds[c + 1]) for c in range(chunks)]
    for job in jobs:
        job.result()


def available_cores() -> int:
    """Cores this process may run on (the default size of the kernel thread pool)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


_POOL_SIZE = available_cores()
_BLAS_LIMIT: threadpool_limits | None = None


def set_num_threads(threads: int) -> None:
    """Use ``threads`` worker threads for batched kernels (default: one per available core).

    BLAS runs on one thread while the pool takes every core (module docstring).
    """
    global _POOL_SIZE
    _POOL_SIZE = max(1, int(threads))
    _pool.cache_clear()
    _limit_blas(_POOL_SIZE >= available_cores())


def _limit_blas(single: bool) -> None:
    """One BLAS thread (``single``) or BLAS's own default."""
    global _BLAS_LIMIT
    if single and _BLAS_LIMIT is None:
        _BLAS_LIMIT = threadpool_limits(limits=1, user_api="blas")
    elif not single and _BLAS_LIMIT is not None:
        _BLAS_LIMIT.restore_original_limits()
        _BLAS_LIMIT = None


@functools.cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=_POOL_SIZE, thread_name_prefix="workbench-kernel")


COMPILE_MESSAGE = (
    "workbench: compiling the numerical kernels for this machine (first run only, up to a "
    "minute)..."
)


class _CompileAnnouncer(event.Listener):
    """Prints :data:`COMPILE_MESSAGE` once, when numba starts compiling a workbench function.

    numba fires the ``numba:compile`` event only after its disk cache had no
    entry, so a cached kernel never prints anything.
    """

    enabled = True
    said = False

    def on_start(self, event_: event.Event) -> None:
        module = getattr(event_.data["dispatcher"].py_func, "__module__", "") or ""
        if module.startswith("workbench."):
            self.say()

    def say(self) -> None:
        """Print :data:`COMPILE_MESSAGE`, once per process, unless turned off."""
        if self.enabled and not self.said:
            self.said = True
            print(COMPILE_MESSAGE, file=sys.stderr, flush=True)

    def on_end(self, event_: event.Event) -> None:
        pass


_ANNOUNCER = _CompileAnnouncer()
if __name__ != "__main__":  # run as a script, this file is a second copy of the module
    event.register("numba:compile", _ANNOUNCER)
_limit_blas(_POOL_SIZE >= available_cores())


def set_compile_message(enabled: bool) -> None:
    """Print (default) or keep quiet the one line that says the kernels are being compiled."""
    _ANNOUNCER.enabled = bool(enabled)


# the modules that define kernels (with :data:`jit` or :data:`leaf`), under workbench/
KERNEL_MODULES = (
    "models/mesh.py",
    "dynamics/kernels.py",
    "dynamics/inverse_dynamics.py",
    "dynamics/derivatives.py",
    "dynamics/regressor.py",
    "dynamics/time_derivatives.py",
    "closed_chains/loop_kernels.py",
    "calibration/fitting/kinematic_kernels.py",
)


def _locate() -> None:  # stands for a kernel of a module when locating its cache
    pass


def cache_is_empty() -> bool:
    """Whether numba's disk cache, where this process would read it (``NUMBA_CACHE_DIR``,
    ``__pycache__`` beside the modules, or the user-wide cache), holds no kernel of
    :data:`KERNEL_MODULES` for this Python: a first run after installing. False when it
    cannot tell."""
    try:
        from numba.core import caching  # numba's own choice of cache directory

        locators = (getattr(caching, "CacheImpl", None) or caching._CacheImpl)._locator_classes
        tag = f"py{sys.version_info[0]}{sys.version_info[1]}{getattr(sys, 'abiflags', '')}"
        for name in KERNEL_MODULES:
            module = Path(__file__).parent / name
            for locator_class in locators:
                locator = locator_class.from_function(_locate, str(module))
                if locator is not None:
                    break
            else:
                return False
            if any(Path(locator.get_cache_path()).glob(f"{module.stem}.*.{tag}.nbi")):
                return False
        return True
    except (ImportError, AttributeError, TypeError, OSError):
        return False


def announce_first_compile() -> None:
    """Print the compile line now when the disk cache is empty (:func:`cache_is_empty`), so
    that a first run says what it does before its imports and model loading; the line is
    printed once per process either way."""
    if _ANNOUNCER.enabled and not _ANNOUNCER.said and cache_is_empty():
        _ANNOUNCER.say()


# kernels (module.qualified_name) that a second process compiles, and that process
_BESIDE: dict[str, subprocess.Popen] = {}


def compile_beside(kernels: tuple[str, ...], argv: tuple[str, ...]) -> None:
    """On a first run (:func:`cache_is_empty`), compile ``kernels`` in a second process.

    ``python argv`` (e.g. ``-m workbench.warm_up --derivatives``) runs beside
    this process and writes the kernels ``kernels`` (``module.qualified_name``)
    to numba's disk cache, on the second core, while this process imports,
    reads its inputs and compiles the other kernels; :func:`run_batched`
    waits for it before the first call of one of them, which then loads from
    the cache. The second process is stopped if this one exits first. Does
    nothing when the cache holds any kernel (not a first run) or when a
    second process already runs.
    """
    if _BESIDE or not cache_is_empty():
        return
    process = subprocess.Popen(
        [sys.executable, *argv], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    atexit.register(_stop, process)
    _BESIDE.update(dict.fromkeys(kernels, process))


def _wait_beside(kernel) -> None:
    """Wait for the process compiling ``kernel`` (:func:`compile_beside`), if any."""
    function = getattr(kernel, "py_func", kernel)
    process = _BESIDE.pop(f"{function.__module__}.{function.__qualname__}", None)
    if process is not None:
        process.wait()


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        process.wait()
