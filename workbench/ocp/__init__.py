"""Optimisation layer: CasADi problems that call the project's analytic derivatives.

The Python API::

    import workbench as wb
    from workbench.ocp import ReachProblem, solve, write_results

    problem = ReachProblem.from_toml("problems/fivebar_reach.toml")
    model = wb.closed_chains.load(problem.model)
    result = solve(problem, model)
    with wb.results_directory("results/reach") as stage:  # replaced whole, atomically
        write_results(stage, problem, result, model)

:mod:`~workbench.ocp.bridge` hands batched numpy functions with analytic
Jacobians to CasADi; :mod:`~workbench.ocp.nlp` collects constraints and
solver options; :mod:`~workbench.ocp.reach` is the point-to-point reaching
and co-design problem on any closed chain (transcription, IPOPT, results).
"""

from __future__ import annotations

from workbench.exports import exports

_NAMES = {
    "ReachProblem": "problem",
    "ReachResult": "problem",
    "solve": "reach",
    "write_results": "report",
}

__all__, __getattr__ = exports(__name__, _NAMES)
