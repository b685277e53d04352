"""workbench: optimal control, design and calibration of robots.

Pinocchio provides the baseline kinematics and dynamics, CasADi hosts the
optimisation layer, and this package adds the derivatives no library has:
joint torques with respect to joint twists ([Kwon], Algorithm 1), motor
torques of closed chains with their derivatives, mesh inertia with vertex
derivatives and the moved-inertia derivative.

The public API lives here::

    import workbench as wb
    chain = wb.load_urdf("robot.urdf")
    tau = wb.inverse_dynamics(chain, q, dq, ddq)
    d = wb.twist_derivatives(chain, q, dq, ddq)

Everything but the errors is imported on first use, so that ``import
workbench`` stays light (Pinocchio, numba, CasADi and trimesh load when needed).
"""

from __future__ import annotations

import importlib
from typing import Any

from workbench import errors
from workbench.errors import WorkbenchError, WorkbenchWarning

__version__ = "0.1.0"

_LAZY_SUBMODULES = {
    "calibration",
    "closed_chains",
    "dynamics",
    "eta",
    "pinocchio_conversion",
    "urdf",
    "excitation",
    "inertia",
    "lie",
    "mesh",
    "models",
    "ocp",
    "viz",
}
_LAZY_ATTRIBUTES = {
    "Chain": "workbench.chain",
    "load_urdf": "workbench.urdf",
    "write_urdf": "workbench.urdf",
    "from_pinocchio": "workbench.pinocchio_conversion",
    "to_pinocchio": "workbench.pinocchio_conversion",
    "inverse_dynamics": "workbench.dynamics.inverse_dynamics",
    "twist_derivatives": "workbench.dynamics.derivatives",
    "rnea_derivatives": "workbench.dynamics.derivatives",
    "forward_dynamics_derivatives": "workbench.dynamics.derivatives",
    "identifiable_eta_basis": "workbench.eta",
    "time_derivatives": "workbench.dynamics.time_derivatives",
    "mass_matrix_derivatives": "workbench.dynamics.time_derivatives",
    "flexible_joint_motor_trajectory": "workbench.dynamics.time_derivatives",
    "mass_matrix": "workbench.dynamics.matrices",
    "coriolis_matrix": "workbench.dynamics.matrices",
    "gravity_torques": "workbench.dynamics.matrices",
    "task_space_dynamics": "workbench.dynamics.matrices",
}

__all__ = [
    "WorkbenchError",
    "WorkbenchWarning",
    "errors",
    *sorted(_LAZY_ATTRIBUTES),
    *sorted(_LAZY_SUBMODULES),
]


def __getattr__(name: str) -> Any:
    if name in _LAZY_SUBMODULES:
        return importlib.import_module(f"workbench.{name}")
    if name in _LAZY_ATTRIBUTES:
        return getattr(importlib.import_module(_LAZY_ATTRIBUTES[name]), name)
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")
