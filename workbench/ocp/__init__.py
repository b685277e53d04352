"""Optimisation layer: CasADi problems that call the project's analytic derivatives.

* :mod:`workbench.ocp.bridge` hands batched numpy functions with analytic
  Jacobians to CasADi;
* :mod:`workbench.ocp.reach` is the five-bar point-to-point reaching
  problem (problem files, transcription, IPOPT, results).
"""
