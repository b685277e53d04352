"""Timing helpers shared by the benchmark scripts (not part of the library)."""

from __future__ import annotations

import platform
import statistics
import time
from collections.abc import Callable


def median_seconds(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` over ``repeats`` runs after ``warmup`` untimed runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def timed(fn: Callable[[], object], repeats: int) -> tuple[object, float, float]:
    """(last result, min, median) seconds of ``fn()`` over ``repeats`` runs after a warm-up run
    (compiled kernels loaded)."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return out, min(times), statistics.median(times)


def machine() -> str:
    """One line describing the machine and the library versions."""
    import casadi
    import numba
    import numpy
    import pinocchio

    from workbench.runtime import available_cores

    return (
        f"{platform.processor() or platform.machine()}, {available_cores()} "
        f"cores, Python {platform.python_version()}, numpy {numpy.__version__}, "
        f"numba {numba.__version__}, pinocchio {pinocchio.__version__}, casadi {casadi.__version__}"
    )


def row(*cells: object) -> str:
    """A markdown table row."""
    return "| " + " | ".join(str(c) for c in cells) + " |"
