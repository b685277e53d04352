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

from workbench import errors as errors
from workbench.errors import WorkbenchError as WorkbenchError
from workbench.errors import WorkbenchWarning as WorkbenchWarning
from workbench.exports import exports

__version__ = "0.1.0"

_NAMES: dict[str, str | None] = {
    "calibration": None,
    "closed_chains": None,
    "dynamics": None,
    "eta": None,
    "excitation": None,
    "identification": None,
    "inertia": None,
    "lie": None,
    "mesh": None,
    "mjcf": None,
    "models": None,
    "ocp": None,
    "pinocchio_conversion": None,
    "recordings": None,
    "sweep": None,
    "testing": None,
    "urdf": None,
    "viz": None,
    "Chain": "workbench.chain",
    "coriolis_matrix": "workbench.dynamics.matrices",
    "flexible_joint_motor_trajectory": "workbench.dynamics.time_derivatives",
    "forward_dynamics_derivatives": "workbench.dynamics.derivatives",
    "forward_kinematics": "workbench.dynamics.kinematics",
    "from_pinocchio": "workbench.pinocchio_conversion",
    "gravity_torques": "workbench.dynamics.matrices",
    "identifiable_eta_basis": "workbench.eta",
    "inverse_dynamics": "workbench.dynamics.inverse_dynamics",
    "load_robot": "workbench.urdf",
    "load_urdf": "workbench.urdf",
    "mass_matrix": "workbench.dynamics.matrices",
    "mass_matrix_derivatives": "workbench.dynamics.time_derivatives",
    "results_directory": "workbench.io",
    "rnea_derivatives": "workbench.dynamics.derivatives",
    "task_space_dynamics": "workbench.dynamics.matrices",
    "time_derivatives": "workbench.dynamics.time_derivatives",
    "to_pinocchio": "workbench.pinocchio_conversion",
    "torque_regressor": "workbench.dynamics.regressor",
    "twist_derivatives": "workbench.dynamics.derivatives",
    "write_urdf": "workbench.urdf",
}

__all__, __getattr__ = exports(
    __name__, _NAMES, ("WorkbenchError", "WorkbenchWarning", "errors", "__version__")
)
