"""The process runtime: BLAS threads next to the kernel thread pool, compile-free runs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


@pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2 if hasattr(os, "sched_getaffinity") else True,
    reason="one core: BLAS is single-threaded anyway",
)
def test_blas_runs_on_one_thread_while_the_kernel_pool_takes_every_core():
    """threadpoolctl (not the project) reports numpy's BLAS threads in a fresh process."""
    out = _run(
        """
        import numpy
        from threadpoolctl import threadpool_info

        def blas():
            return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")

        before = blas()
        from workbench import runtime
        shared = blas()
        runtime.set_num_threads(1)
        alone = blas()
        runtime.set_num_threads(runtime.available_cores())
        print(before, shared, alone, blas())
        """
    )
    before, shared, alone, again = map(int, out)
    assert before > 1
    assert (shared, alone, again) == (1, before, 1)
