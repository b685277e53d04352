"""Sweeps of optimal-control problems on Dask: a base problem, axes to vary, one task each.

Any problem kind of :mod:`workbench.ocp.kinds` can be swept (the tasks use
only the problem contract); a ``[goal]`` grid needs a kind with a goal
(reaching).

:class:`~workbench.sweep.spec.Sweep` reads a sweep file and expands it into
validated tasks; :func:`~workbench.sweep.runner.run_sweep` solves the missing
ones on a Dask cluster (local or remote), warm-starting from solved
neighbours, and writes one row per task (``results.parquet``,
``results.csv``), each task's trajectory and the effort map
(:mod:`workbench.sweep.table`, :mod:`workbench.sweep.plots`). The command
line is ``workbench sweep`` (:mod:`workbench.commands.sweep`).
"""

from workbench.exports import exports

_NAMES = {
    "Sweep": "spec",
    "Task": "spec",
    "SweepOutcome": "runner",
    "connect": "runner",
    "run_sweep": "runner",
}

__all__, __getattr__ = exports(__name__, _NAMES)
