"""Experiment design for calibration: optimal excitation trajectories and calibration postures.

``workbench excite`` and the Python API::

    import workbench as wb
    from workbench.excitation import excite, read_problem

    chain = wb.models.load("iiwa")
    result = excite(chain, "dynamic", read_problem("problems/excite_dynamic.toml", chain))
    result.design.log_det, result.prediction.relative_std

Modules, one job each: :mod:`~workbench.excitation.trajectory` (Fourier
series, rest constraints, the Bernstein margin that keeps limits between
collocation points), :mod:`~workbench.excitation.information` (information
matrices, criteria and their analytic gradients), :mod:`~workbench.excitation.twist_sx`
(state derivatives of d tau / d eta by CasADi AD), :mod:`~workbench.excitation.design`
(the IPOPT problem), :mod:`~workbench.excitation.postures` (D-optimal postures
with a gap bound), :mod:`~workbench.excitation.problem` (the problem file),
:mod:`~workbench.excitation.experiment` (one experiment end to end, simulated
checks) and :mod:`~workbench.excitation.report` (output files).
"""

from __future__ import annotations

from workbench.exports import exports

_NAMES = {
    "FourierSpace": "trajectory",
    "FourierTrajectory": "trajectory",
    "margin_factor": "trajectory",
    "DynamicInformation": "information",
    "TwistInformation": "information",
    "criterion": "information",
    "criterion_gradient": "information",
    "Limits": "design",
    "DesignOptions": "design",
    "Design": "design",
    "TorqueFunction": "design",
    "design_trajectory": "design",
    "evaluate_design": "design",
    "random_parameters": "design",
    "posture_information": "postures",
    "select_postures": "postures",
    "random_postures": "postures",
    "read_postures": "postures",
    "ExcitationProblem": "problem",
    "read_problem": "problem",
    "excite": "experiment",
    "ExcitationResult": "experiment",
    "dynamic_information": "experiment",
    "twist_information": "experiment",
    "predict": "experiment",
    "simulate_torques": "experiment",
    "identification_errors": "experiment",
    "write_results": "report",
    "design_payload_excitation": "payload",
}

__all__, __getattr__ = exports(__name__, _NAMES)
