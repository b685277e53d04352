"""Results of a reaching solve on disk: summary, trajectory, plots, animation, report page.

Files (written into a staging directory that :func:`workbench.io.results_directory`
publishes whole):

* ``summary.json``: :meth:`ReachResult.summary` plus the problem file and model;
* ``trajectory.npz`` (t (K,), q, dq, ddq (K, n) in the tree's joint order,
  tau (K, a) in the order of the actuated joints) and ``trajectory.csv``
  with columns t, q<j>, dq<j>, ddq<j> for every joint and tau<j> for every
  motor, ``<j>`` the joint name without a leading ``joint_`` (q1 ... q5,
  tau1, tau4 for the spherical five-bar) or ``_<name>``;
* ``joint_angles.png``, ``motor_torques.png``, ``power_energy.png`` and,
  for co-design, ``design.png`` (:mod:`workbench.viz.plots`);
* ``animation.html``: the self-contained meshcat scene of the motion;
* ``report.html``: the summary, the plots and the animation in one page.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from workbench.closed_chains.model import ClosedChain
from workbench.closed_chains.robot_folder import is_robot_folder
from workbench.ocp.problem import ReachProblem, ReachResult
from workbench.urdf import urdf_string
from workbench.viz import plots, viewer
from workbench.viz.report_page import write_report_page
from workbench.viz.scene import Robot


def joint_label(name: str) -> str:
    """``joint_3`` -> ``3``, any other name -> ``_name`` (CSV column suffixes)."""
    return name[len("joint_") :] if name.startswith("joint_") else f"_{name}"


def write_results(
    stage: Path, problem: ReachProblem, result: ReachResult, model: ClosedChain
) -> None:
    """Write every result file of a solved problem into ``stage``."""

    summary = {"problem": problem.source, "model": problem.model, **result.summary()}
    summary["objective_unit"] = problem.objective_unit
    (stage / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    arrays = {"t": result.t, "q": result.q, "dq": result.dq, "ddq": result.ddq, "tau": result.tau}
    np.savez(stage / "trajectory.npz", **arrays)
    tree = model.tree
    labels = [joint_label(name) for name in tree.joint_names]
    motors = [joint_label(name) for name in model.actuated]
    header = ["t", *(f"{p}{j}" for p in ("q", "dq", "ddq") for j in labels)]
    header += [f"tau{j}" for j in motors]
    table = np.column_stack([result.t, result.q, result.dq, result.ddq, result.tau])
    np.savetxt(stage / "trajectory.csv", table, delimiter=",", header=",".join(header), comments="")

    images = [
        plots.plot_joint_trajectories(
            stage / "joint_angles.png", result.t, result.q, [f"q{j}" for j in labels],
            title=f"Joint values (motors: {', '.join(model.actuated)})", ylabel="rad or m",
            limits=(tree.lower, tree.upper),
        ),
        plots.plot_torques(
            stage / "motor_torques.png", result.t, result.tau, [f"tau{j}" for j in motors],
            limits=tree.effort_limit[model.motor_indices],
        ),
        plots.plot_power_energy(
            stage / "power_energy.png", result.t, result.tau, result.dq[:, model.motor_indices]
        ),
    ]  # fmt: skip
    if result.design:
        variables = result.design["variables"]
        names = list(variables)
        images.append(
            plots.plot_design(
                stage / "design.png",
                [
                    f"{name.replace('_offset', ' distance').replace('_', ' ')} [mm]"
                    for name in names
                ],
                [1e3 * variables[name]["before"] for name in names],
                [1e3 * variables[name]["after"] for name in names],
            )
        )
    urdf = model.urdf_path
    if model.source is not None and is_robot_folder(model.source):  # its tree: joints replaced
        urdf = stage / "tree.urdf"
        urdf.write_text(urdf_string(model.tree), encoding="utf-8")
    robot = Robot.from_urdf(urdf)
    animation = viewer.static_html(robot, result.t, result.q, tool_frame=tree.tool_name)
    (stage / "animation.html").write_text(animation, encoding="utf-8")
    rows = [(key, value) for key, value in summary.items() if key != "design"]
    write_report_page(
        stage / "report.html", f"Reaching with {model.name}: {problem.source}", rows, images,
        warnings=result.warnings, animation=animation,
    )  # fmt: skip
