"""Motor trajectory of an iiwa with flexible (series-elastic) joints (issue 9, seed 003 §1).

    python examples/flexible_joint.py

For a smooth desired link trajectory q(t), Spong's flexible-joint model needs
the motor position theta = q + K^-1 tau and the motor torque
u = B ddtheta + tau, so the joint torques tau and their first two time
derivatives (hence q up to its fourth derivative). Prints a short table.
"""

from __future__ import annotations

import numpy as np

import workbench as wb


def link_trajectory(chain: wb.Chain, t: np.ndarray) -> list[np.ndarray]:
    """q(t) = q0 + A (1 - cos(w t)) per joint, and its first four derivatives, (T, n) each."""
    amplitude = np.linspace(0.6, 0.2, chain.n)
    w = np.linspace(1.0, 2.0, chain.n)
    phase = w * t[:, None]
    q = 0.3 + amplitude * (1.0 - np.cos(phase))
    derivatives = [amplitude * w**k * -np.cos(phase + k * np.pi / 2) for k in range(1, 5)]
    return [q, *derivatives]


def main() -> None:
    chain = wb.models.load("iiwa")
    t = np.linspace(0.0, 3.0, 7)
    stiffness = np.array([5000.0, 5000.0, 3000.0, 3000.0, 1000.0, 1000.0, 1000.0])  # N m / rad
    rotor_inertia = 0.4  # kg m^2, reflected through the gearbox
    motor = wb.flexible_joint_motor_trajectory(
        chain, stiffness, rotor_inertia, *link_trajectory(chain, t)
    )
    deflection = np.degrees(motor.theta - link_trajectory(chain, t)[0])
    print("  t [s]   max |theta - q| [deg]   max |u| [N m]   max |u - tau| [N m]")
    for k, time in enumerate(t):
        print(
            f"{time:7.2f} {np.abs(deflection[k]).max():23.4f} {np.abs(motor.u[k]).max():15.2f}"
            f" {np.abs(motor.u[k] - motor.tau[k]).max():21.3f}"
        )


if __name__ == "__main__":
    main()
