"""Results of a reaching solve on disk: summary, trajectory, plots and animation.

Files (written into a staging directory that :func:`workbench.io.results_directory`
publishes whole):

* ``summary.json``: :meth:`ReachResult.summary` plus the problem file;
* ``trajectory.npz`` and ``trajectory.csv``: t (K,), q (K, 5) in joint order
  1..5, dq, ddq, tau (K, 2) for joints 1 and 4 (CSV columns t, q1..q5,
  dq1..dq5, ddq1..ddq5, tau1, tau4);
* ``joint_angles.png``, ``motor_torques.png``, ``power_energy.png`` and,
  for co-design, ``design.png`` (:mod:`workbench.viz.plots`);
* ``animation.html``: the self-contained meshcat scene of the motion
  (meshes of the nominal design).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from workbench.fivebar import ACTIVE, FiveBar
from workbench.ocp.reach import ReachProblem, ReachResult, objective_unit

JOINT_LABELS = ("q1", "q2", "q3", "q4", "q5")


def write_results(
    stage: Path, problem: ReachProblem, result: ReachResult, fivebar: FiveBar
) -> None:
    """Write every result file of a solved problem into ``stage``."""
    from workbench.viz import plots, viewer
    from workbench.viz.scene import Robot

    summary = {"problem": problem.source, **result.summary()}
    summary["objective_unit"] = objective_unit(problem)
    (stage / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    arrays = {"t": result.t, "q": result.q, "dq": result.dq, "ddq": result.ddq, "tau": result.tau}
    np.savez(stage / "trajectory.npz", **arrays)
    header = ["t", *JOINT_LABELS, *(f"d{j}" for j in JOINT_LABELS)]
    header += [*(f"dd{j}" for j in JOINT_LABELS), "tau1", "tau4"]
    table = np.column_stack([result.t, result.q, result.dq, result.ddq, result.tau])
    np.savetxt(stage / "trajectory.csv", table, delimiter=",", header=",".join(header), comments="")

    chain = fivebar.chain
    upper = np.concatenate([chain.upper, chain.upper[2:3]])  # joint 5 shares joint 3's limits
    plots.plot_joint_trajectories(
        stage / "joint_angles.png", result.t, result.q, JOINT_LABELS,
        title="Joint angles (1, 4 motors)", ylabel="rad", limits=(-upper, upper),
    )  # fmt: skip
    motors = [JOINT_LABELS[i].replace("q", "tau") for i in ACTIVE]
    plots.plot_torques(
        stage / "motor_torques.png", result.t, result.tau, motors, limits=chain.effort_limit[ACTIVE]
    )
    plots.plot_power_energy(stage / "power_energy.png", result.t, result.tau, result.dq[:, ACTIVE])
    if result.design:
        variables = result.design["variables"]
        names = list(variables)
        plots.plot_design(
            stage / "design.png",
            [f"{name.replace('_offset', ' distance').replace('_', ' ')} [mm]" for name in names],
            [1e3 * variables[name]["before"] for name in names],
            [1e3 * variables[name]["after"] for name in names],
        )
    robot = Robot.from_urdf(fivebar.urdf_path)
    q_tree = fivebar.tree_configuration(result.q)
    viewer.write_html(stage / "animation.html", robot, result.t, q_tree, tool_frame="end_effector")
