"""Run one ``workbench`` command in this process; print its wall time, the CPU time of
this process and of its children (the drawing worker), and the heavy packages it imported.

    PYTHONPATH=TREE python benchmarks/command_cpu.py reach --out /tmp/r --quiet

CPU seconds (user + system, ``resource.getrusage``) are the figure to compare on a shared
machine, where wall times scatter with the other jobs.
"""

from __future__ import annotations

import resource
import runpy
import sys
import time

HEAVY = ("scipy.signal", "scipy.stats", "scipy.optimize", "scipy.linalg", "scipy.interpolate",
         "matplotlib", "meshcat", "IPython", "casadi", "pinocchio", "numba", "trimesh",
         "mujoco", "dask", "yaml")  # fmt: skip


def main() -> None:
    start = time.perf_counter()
    sys.argv = ["workbench", *sys.argv[1:]]
    try:
        runpy.run_module("workbench.cli", run_name="__main__")
    except SystemExit:
        pass
    finally:
        own, children = (
            resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        )
        cpu, worker = own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime
        print(
            f"wall {time.perf_counter() - start:.2f} s, CPU self {cpu:.2f} s, "
            f"children {worker:.2f} s; imported: " + " ".join(m for m in HEAVY if m in sys.modules),
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
