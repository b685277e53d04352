"""Optimisation layer: optimal-control problems in CasADi on the project's analytic derivatives.

Every problem kind meets one contract (:mod:`~workbench.ocp.contract`): a
problem file is read, solved and written the same way whatever its kind::

    import workbench as wb

    problem = wb.ocp.read("problems/fivebar_reach.toml")  # its kind: "reach" (the default)
    result = wb.ocp.solve(problem)  # a ReachResult: status, objective, trajectory, ...
    wb.ocp.write(result, "results/reach")  # replaced whole, atomically

:mod:`~workbench.ocp.kinds` registers the kinds (``reach``: reaching and
co-design on any closed chain, :mod:`~workbench.ocp.reach`);
:mod:`~workbench.ocp.bridge` hands batched numpy functions with analytic
Jacobians to CasADi (the closed chain's maps on its tree coordinates:
:mod:`~workbench.ocp.model_functions`; on its independent coordinates, the passive
joints solved inside: :mod:`~workbench.ocp.independent_coordinates`);
:mod:`~workbench.ocp.nlp` collects constraints and solver options.
"""

from __future__ import annotations

from workbench.exports import exports

_NAMES = {
    "read": "kinds",
    "solve": "kinds",
    "write": "kinds",
    "register": "kinds",
    "Problem": "contract",
    "Result": "contract",
    "Infeasible": "contract",
    "ReachProblem": "problem",
    "ReachResult": "problem",
    "write_results": "report",
}

__all__, __getattr__ = exports(__name__, _NAMES)
