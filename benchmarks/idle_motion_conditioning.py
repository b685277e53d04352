"""Where closed-chain forward dynamics and Pinocchio 4's constraint solvers part: idle motions.

For the three example-parallel-robots folders, 5 closed states of the benchmark
``bench_closed_chain_dynamics.py`` (random velocities of motors and idle joints, random motor
torques): the eigenvalues of the reduced inertia ``S^T M S`` in the independent coordinates
(motors, then idle joints) and, for our ``forward_dynamics``, ``constraintDynamics`` (mu
1e-10 and 1e-12) and ``lcaba`` (mu 1e-4 .. 1e-8, 1000 or 10000 iterations; the iterations
it used in brackets): the largest difference of ddq from ours (all joints, motors, idle
joints; relative to max(1, |ddq|)), the closures' residual at acceleration level
``K ddq + c''[dq, dq]``, and the equations of motion at that ddq (our forces on the
independent coordinates minus the motor torques, relative; the idle joints' forces, N m).

    python benchmarks/idle_motion_conditioning.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pinocchio as pin

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_closed_chain_dynamics import FOLDERS, constrained_states

from workbench.closed_chains import load
from workbench.closed_chains.dynamics import coordinate_forces, forward_dynamics
from workbench.closed_chains.kinematics import Closures, vectors, velocity_map


def report(label: str, x: np.ndarray, state: tuple) -> None:
    """One line: ``x`` (N, n) against our ddq (module docstring)."""
    chain, q, dq, ddq, tau, K, bias = state
    a = len(chain.actuated)
    scale = max(1.0, np.abs(ddq).max())
    motors, idle = chain.motor_indices, chain.idle_indices
    forces = coordinate_forces(chain, q, dq, x)
    closure = np.abs((K @ x[..., None])[..., 0] + bias).max()
    print(f"  {label:32s} ddq {np.abs(x - ddq).max() / scale:.1e} motors "
          f"{np.abs(x - ddq)[:, motors].max() / scale:.1e} idle "
          f"{np.abs(x - ddq)[:, idle].max(initial=0.0) / scale:.1e} | closure "
          f"{closure:.1e} | motor forces "
          f"{np.abs(forces[:, :a] - tau).max() / np.abs(tau).max():.1e} idle forces "
          f"{np.abs(forces[:, a:]).max(initial=0.0):.1e}")  # fmt: skip


def main() -> None:
    rng = np.random.default_rng(0)
    for path in FOLDERS:
        chain = load(path / "robot.yaml")
        model, data, cms, cds, q, dqa, tau, dq, torque = constrained_states(chain, 5, rng)
        _, ddq = forward_dynamics(chain, q, dqa, tau)
        S = velocity_map(chain, q)
        M = np.array([pin.crba(model, data, x) for x in q])
        M = np.triu(M) + np.swapaxes(np.triu(M, 1), 1, 2)
        eigenvalues = np.linalg.eigvalsh(np.swapaxes(S, 1, 2) @ M @ S)
        print(f"{path.name}: S^T M S eigenvalues {eigenvalues[:, 0].min():.2g} .. "
              f"{eigenvalues[:, -1].max():.2g}, condition "
              f"{(eigenvalues[:, -1] / eigenvalues[:, 0]).max():.2g}")  # fmt: skip
        closures = Closures(chain, q)
        K = closures.jacobian()
        bias = closures.second(vectors(dq), vectors(dq))[:, 0]

        state = chain, q, dq, ddq, tau, K, bias
        report("ours", ddq, state)
        for mu in (1e-10, 1e-12):
            settings = pin.ProximalSettings(1e-14, mu, 200)
            report(f"constraintDynamics mu {mu:g}", np.array([
                pin.constraintDynamics(model, data, q[k], dq[k], torque[k], cms, cds, settings)
                for k in range(len(q))]), state)  # fmt: skip
        pin.computeJointMinimalOrdering(model, data, cms)
        for mu, iterations in ((1e-4, 1000), (1e-6, 1000), (1e-8, 1000), (1e-4, 10000)):
            settings = pin.ProximalSettings(1e-14, mu, iterations)
            x = np.array([pin.lcaba(model, data, q[k], dq[k], torque[k], cms, cds, settings)
                          for k in range(len(q))])  # fmt: skip
            report(f"lcaba mu {mu:g}, {iterations} ({settings.iter})", x, state)


if __name__ == "__main__":
    main()
