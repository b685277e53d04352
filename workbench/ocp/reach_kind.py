"""The problem kind ``reach``: reaching and co-design of a closed chain under the contract.

The contract's three functions (:mod:`workbench.ocp.contract`) over the
reaching problem file (:class:`~workbench.ocp.problem.ReachProblem`, with an
optional ``[design]`` table for co-design), its solve
(:func:`workbench.ocp.reach.solve`) and its result files
(:func:`workbench.ocp.report.write_results`). Copy this module for a new kind.
"""

from __future__ import annotations

from pathlib import Path

from workbench.lie import Array
from workbench.ocp import reach
from workbench.ocp.problem import ReachProblem, ReachResult
from workbench.ocp.report import draw_figures, write_results

NAME = "reach"


def read(raw: dict, source: str, base: Path) -> ReachProblem:
    """The reaching problem of a problem file's table (:mod:`workbench.ocp.problem`)."""
    return ReachProblem.from_dict(raw, source, base)


def solve(
    problem: ReachProblem, progress: bool = True, warm: dict[str, Array] | None = None
) -> ReachResult:
    """Solve on the problem's closed chain (:func:`workbench.ocp.reach.solve`); the figures
    are drawn from the solve on (in the drawing worker when there is one)."""
    return reach.solve(problem, progress=progress, warm=warm, on_solved=_draw)


def _draw(result: ReachResult) -> None:
    result.drawings = draw_figures(result)


def write(result: ReachResult, stage: Path) -> None:
    """summary.json, trajectory files, plots, animation and report page
    (:mod:`workbench.ocp.report`)."""
    write_results(stage, result.problem, result, result.model)
