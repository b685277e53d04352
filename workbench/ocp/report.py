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

from pathlib import Path

import numpy as np

from workbench.closed_chains.model import ClosedChain
from workbench.io import json_text
from workbench.ocp.problem import ReachProblem, ReachResult
from workbench.viz import drawing
from workbench.viz.drawing import Drawing
from workbench.viz.report_page import write_report_page


def joint_label(name: str) -> str:
    """``joint_3`` -> ``3``, any other name -> ``_name`` (CSV column suffixes)."""
    return name[len("joint_") :] if name.startswith("joint_") else f"_{name}"


def write_results(
    stage: Path, problem: ReachProblem, result: ReachResult, model: ClosedChain
) -> None:
    """Write every result file of a solved problem into ``stage``."""

    summary = {"problem": problem.source, "model": problem.model, **result.summary()}
    summary["objective_unit"] = problem.objective_unit
    (stage / "summary.json").write_text(json_text(summary), encoding="utf-8")
    arrays = {"t": result.t, "q": result.q, "dq": result.dq, "ddq": result.ddq, "tau": result.tau}
    np.savez(stage / "trajectory.npz", **arrays)
    tree = model.tree
    labels = [joint_label(name) for name in tree.joint_names]
    motors = [joint_label(name) for name in model.actuated]
    header = ["t", *(f"{p}{j}" for p in ("q", "dq", "ddq") for j in labels)]
    header += [f"tau{j}" for j in motors]
    table = np.column_stack([result.t, result.q, result.dq, result.ddq, result.tau])
    np.savetxt(stage / "trajectory.csv", table, delimiter=",", header=",".join(header), comments="")

    drawings = result.drawings or draw_figures(result)
    urdf = model.urdf_path
    if "animation.html" not in drawings:  # a robot folder's tree: joints replaced
        from workbench.models.urdf import urdf_string

        urdf = stage / "tree.urdf"
        urdf.write_text(urdf_string(model.tree), encoding="utf-8")
        drawings["animation.html"] = _animation(urdf, result)
    images = [drawings[name].write(stage) for name in drawings if name.endswith(".png")]
    animation = drawings["animation.html"].write(stage).read_text(encoding="utf-8")
    rows = [(key, value) for key, value in summary.items() if key != "design"]
    write_report_page(
        stage / "report.html", f"Reaching with {model.name}: {problem.source}", rows, images,
        warnings=result.warnings, animation=animation,
    )  # fmt: skip


def draw_figures(result: ReachResult) -> dict[str, Drawing]:
    """The plots and (for a model from a URDF) the animation of a solved ``result``, by file
    name, sent to the drawing worker when the command started one (:mod:`workbench.viz.drawing`)."""
    from workbench.closed_chains.robot_folder import is_robot_folder

    model = result.model
    tree = model.tree
    labels = [joint_label(name) for name in tree.joint_names]
    motors = [joint_label(name) for name in model.actuated]
    drawings = [
        drawing.draw(
            "joint_angles.png", "workbench.viz.plots:plot_joint_trajectories", result.t, result.q,
            [f"q{j}" for j in labels],
            title=f"Joint values (motors: {', '.join(model.actuated)})", ylabel="rad or m",
            limits=(tree.lower, tree.upper),
        ),
        drawing.draw(
            "motor_torques.png", "workbench.viz.plots:plot_torques", result.t, result.tau,
            [f"tau{j}" for j in motors], limits=tree.effort_limit[model.motor_indices],
        ),
        drawing.draw(
            "power_energy.png", "workbench.viz.plots:plot_power_energy", result.t, result.tau,
            result.dq[:, model.motor_indices],
        ),
    ]  # fmt: skip
    if result.design:
        variables = result.design["variables"]
        names = list(variables)
        drawings.append(drawing.draw(
            "design.png",
            "workbench.viz.plots:plot_design",
            [f"{name.replace('_offset', ' distance').replace('_', ' ')} [mm]" for name in names],
            [1e3 * variables[name]["before"] for name in names],
            [1e3 * variables[name]["after"] for name in names],
        ))  # fmt: skip
    if model.source is None or not is_robot_folder(model.source):
        drawings.append(_animation(model.urdf_path, result))
    return {d.name: d for d in drawings}


def _animation(urdf: Path, result: ReachResult) -> Drawing:
    return drawing.draw(
        "animation.html", "workbench.viz.viewer:write_urdf_html", str(urdf), result.t, result.q,
        tool_frame=result.model.tree.tool_name,
    )  # fmt: skip
