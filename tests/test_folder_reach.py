"""Reaching with example-parallel-robots folders, in the problem-file form of the issue.

``[task] model = "DIR/robot.yaml"``, ``tool``, ``start``, ``goal``,
``duration`` and ``[limits] torque`` (one per motor) through
``python -m workbench.cli reach FILE --out OUT --quiet``. The plan's final
configuration is checked with Pinocchio's forward kinematics of the folder's
own URDF (the tool frame at the goal to 1 mm), and ``summary.json``'s
``final_position_error_m`` (the open-loop simulation of the planned torques)
must be within 1 mm too.

The 5bar_linkage weighs 1.3e6 kg (its README): its open-loop dynamics are
unstable (linearised eigenvalues up to +60 1/s) and stiff (reduced inertia
eigenvalues from 2 to 1.6e5), so its problem is a short, fast move with large
torques (on 0.1 s and longer moves one RK4 step per knot interval of the
simulation diverges, and the reach then simulates with 8 or 64). The delta's three
rods spin freely between ball joints (idle joints, planned with zero force; from its
home on this Levenberg-Marquardt grid, on 60 knots its simulated end is 1.1 mm from the
goal, on 100 3.2e-5 m), as
cassie_like's two rods do (reduced inertia 4.7e-6 kg m^2 against the hip's 0.4),
whose ball joints are three revolutes near gimbal lock at its closed configuration
(these folders are planned on their independent coordinates).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pinocchio as pin
import pytest

from workbench.closed_chains import load
from workbench.errors import WorkbenchError
from workbench.ocp.bridge import BatchedCallback
from workbench.ocp.problem import ReachProblem
from workbench.ocp.reach import interpolate_knots, solve
from workbench.resources import shipped
from workbench.testing.pinocchio_reference import configuration

FOLDERS = shipped("models") / "parallel_robots"
# name: tool frame, start, goal (m), duration (s), torque limit per motor (N m), knots
PROBLEMS = {
    "5bar_linkage": ("effector", [0.1, 0.0225, -0.9237], [0.1, 0.0275, -0.9237], 0.05,
                     [1e8, 1e8], 20),
    "robot_delta": ("effector", [0.005, 0.078, 0.0035], [0.005, 0.0754, -0.0012], 0.5,
                    [1.0, 1.0], 100),
    "5bar_linkage_iso3d": ("effector", [0.1410619, -0.2, -0.6161157],
                           [0.1460619, -0.2, -0.6161157], 0.5, [1e4, 1e4], 60),
    "cassie_like": ("foot", [-0.21228033, -0.13804196, -0.12716530],
                    [-0.21228033, -0.13804196, -0.11716530], 0.5, [50.0] * 5, 100),
    "5bar_linkage_iso6d": ("effector", [-0.02457855, -0.2, -0.71738199],
                           [-0.01957855, -0.2, -0.71738199], 0.5, [1e4, 1e4], 20),
}  # fmt: skip


def problem_file(tmp_path, name: str, knots: int | None = None):
    """The folder's problem of PROBLEMS in the issue's form (its knots, or ``knots``)."""
    tool, start, goal, duration, torque, default = PROBLEMS[name]
    problem = tmp_path / f"{name}.toml"
    problem.write_text(
        "[task]\n"
        f'model = "{FOLDERS / name / "robot.yaml"}"\n'
        f'tool = "{tool}"\n'
        f"start = {start}\n"
        f"goal = {goal}\n"
        f"duration = {duration}\n"
        "[limits]\n"
        f"torque = {torque}\n"
        "[transcription]\n"
        f"knots = {knots or default}\n"
    )
    return problem


def reach(tmp_path, name: str) -> tuple[int, dict, dict]:
    """Run the command line on the folder's problem: exit code, summary, trajectory."""
    problem = problem_file(tmp_path, name)
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "workbench.cli", "reach", str(problem), "--out", str(out),
         "--quiet"], capture_output=True, text=True,
    )  # fmt: skip
    summary = json.loads((out / "summary.json").read_text())
    with np.load(out / "trajectory.npz") as data:
        trajectory = {key: data[key] for key in data.files}
    return done.returncode, summary, trajectory


def pinocchio_tool(name: str, joint_names, q: np.ndarray) -> np.ndarray:
    """The tool frame's position by Pinocchio's forward kinematics of the folder's URDF."""
    model = pin.buildModelFromUrdf(str(FOLDERS / name / "robot.urdf"))
    data = model.createData()
    x = configuration(model, joint_names, q)
    pin.framesForwardKinematics(model, data, x)
    return data.oMf[model.getFrameId(PROBLEMS[name][0])].translation.copy()


def check(tmp_path, name: str) -> None:
    code, summary, trajectory = reach(tmp_path, name)
    assert code == 0 and summary["status"] == "solved", summary
    assert summary["final_position_error_m"] <= 1e-3
    chain = load(FOLDERS / name / "robot.yaml", tool=PROBLEMS[name][0])
    for k, target in ((0, PROBLEMS[name][1]), (-1, PROBLEMS[name][2])):
        position = pinocchio_tool(name, chain.joint_names, trajectory["q"][k])
        assert np.linalg.norm(position - target) <= 1e-3


def test_the_heavy_five_bar_reaches_its_goal_to_a_millimetre(tmp_path):
    check(tmp_path, "5bar_linkage")


@pytest.mark.parametrize("name", ["5bar_linkage_iso3d", "5bar_linkage_iso6d"])
def test_the_five_bars_with_point_and_weld_closures_reach_their_goals(tmp_path, name):
    """The point closure needs 60 knots: on 20 the plan's open-loop simulation misses by
    2.5 mm (the reach warns that the knots are too far apart)."""
    check(tmp_path, name)


@pytest.mark.slow
def test_the_delta_with_three_idle_rods_reaches_its_goal_to_a_millimetre(tmp_path):
    check(tmp_path, "robot_delta")


@pytest.mark.slow
def test_the_cassie_leg_with_idle_rods_and_ball_joints_reaches_its_goal(tmp_path):
    """The foot 1 cm up in 0.5 s with 50 N m per motor, reached from the home in another
    posture than the one the start was taken at (with the posture and acceleration terms of
    a redundant leg: 148 iterations, 40 s, simulated end 6.1e-6 m; without them 218
    iterations, about 2 min)."""
    check(tmp_path, "cassie_like")


def test_a_model_failure_at_the_initial_guess_of_idle_joints_is_one_error(tmp_path, monkeypatch):
    """The objective at the initial guess (which scales IPOPT's objective with idle joints)
    is the model's first evaluation: a failure there (e.g. a singular configuration of
    the guess) is the reach's error naming it, not a CasADi RuntimeError."""
    path = problem_file(tmp_path, "robot_delta", knots=5)

    def fails(*args):
        raise WorkbenchError("the guess is singular")

    built = BatchedCallback.__init__

    def failing(self, name, evaluate, *args, **kwargs):
        built(self, name, fails, *args, **kwargs)

    monkeypatch.setattr(BatchedCallback, "__init__", failing)
    with pytest.raises(WorkbenchError, match="failed during the solve: the guess is singular"):
        solve(ReachProblem.from_toml(path), progress=False)


@pytest.mark.slow
def test_a_trial_point_where_the_passive_joints_are_not_fixed_is_no_model_error(tmp_path):
    """robot_delta with its four spheres 5 g, centres of mass 1 cm off their joints: IPOPT
    tries knots where the closure no longer fixes the passive joints (K_p condition number
    1e7); they are NaN to IPOPT, which steps back, and the reach ends as a solver's outcome
    (exit 0 or 1), not as a failure of the model (exit 2: it stopped the solve with an
    error)."""
    import shutil
    import xml.etree.ElementTree as ET

    folder = tmp_path / "robot_delta"
    shutil.copytree(FOLDERS / "robot_delta", folder)
    root = ET.parse(folder / "robot.urdf").getroot()
    for link in root.iter("link"):
        if link.get("name", "").startswith("sphere"):
            inertial = link.find("inertial")
            inertial.find("origin").set("xyz", "0.01 0.01 0.01")
            inertial.find("mass").set("value", "0.005")
            for axis in ("ixx", "iyy", "izz"):
                inertial.find("inertia").set(axis, "1e-07")
            for product in ("ixy", "ixz", "iyz"):
                inertial.find("inertia").set(product, "0")
    ET.ElementTree(root).write(folder / "robot.urdf")
    tool, start, goal, duration, torque, _ = PROBLEMS["robot_delta"]
    problem = tmp_path / "problem.toml"
    problem.write_text(
        f'[task]\nmodel = "{folder / "robot.yaml"}"\ntool = "{tool}"\nstart = {start}\n'
        f"goal = {goal}\nduration = {duration}\n[limits]\ntorque = {torque}\n"
        "[transcription]\nknots = 30\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "workbench.cli", "reach", str(problem), "--out",
         str(tmp_path / "out"), "--quiet"], capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    assert "the model failed" not in done.stderr and "Traceback" not in done.stderr


def test_redundant_legs_are_regularised_and_report_the_torque_integral(tmp_path):
    """cassie_like (five motors for the foot's three coordinates) gets the posture and
    acceleration terms, weighted by the static torques at the start (Pinocchio's gravity
    through the closures' velocity map) and the largest reduced inertia there; the five-bar
    and the delta (as many motors as directions) get none. The summary's objective is the
    trapezoid torque integral of the plan's torques, and its regularisation the two terms
    evaluated on the plan's motor positions and accelerations."""
    from workbench.closed_chains.dynamics import reduced_inertia
    from workbench.closed_chains.kinematics import Closures, PassiveSolver
    from workbench.ocp.reach import ARMATURE, POSTURE, regularisation_weights

    for name in ("5bar_linkage", "robot_delta"):
        chain = load(FOLDERS / name / "robot.yaml", tool=PROBLEMS[name][0])
        assert regularisation_weights(chain, chain.home) == (0.0, 0.0)
    path = problem_file(tmp_path, "cassie_like", knots=12)
    result = solve(ReachProblem.from_toml(path), progress=False)
    assert result.status == "solved"
    chain = result.model
    motors = chain.motor_indices
    q0 = result.q[0]
    model = pin.buildModelFromUrdf(str(FOLDERS / "cassie_like" / "robot.urdf"))
    gravity = pin.computeGeneralizedGravity(
        model, model.createData(), configuration(model, chain.joint_names, q0)
    )
    order = [model.joints[model.getJointId(j)].idx_v for j in chain.joint_names]
    S = PassiveSolver(chain, Closures(chain, q0[None]).jacobian()).velocity_map()[0]
    static = (S.T @ gravity[order])[: len(motors)]
    largest = np.linalg.eigvalsh(reduced_inertia(chain, q0)[: len(motors), : len(motors)])[-1]
    w, b = regularisation_weights(chain, q0)
    assert w == pytest.approx(POSTURE * static @ static, rel=1e-9) and w > 0
    assert b == pytest.approx(ARMATURE * largest, rel=1e-12) and b > 0
    h = result.t[1] - result.t[0]
    weights = np.full(len(result.t), h)
    weights[[0, -1]] = h / 2
    assert result.objective == pytest.approx(weights @ np.sum(result.tau**2, axis=1), rel=1e-9)
    moved = result.q[:, motors] - q0[motors]
    terms = w * np.sum(moved**2, axis=1) + b**2 * np.sum(result.ddq[:, motors] ** 2, axis=1)
    assert result.regularisation == pytest.approx(weights @ terms, rel=1e-9)
    assert result.regularisation > 0


def test_knots_interpolate_as_the_cubic_hermite_spline_of_scipy():
    """Knots that satisfy the integration rows (accelerations linear between knots) are
    interpolated onto any grid as the C2 cubic through them, which is scipy's cubic Hermite
    spline of their values and velocities; old knots keep their values."""
    from scipy.interpolate import CubicHermiteSpline

    rng = np.random.default_rng(3)
    t_old = np.sort(np.concatenate([[0.0, 0.7], rng.uniform(0.0, 0.7, 6)]))
    ddq = rng.standard_normal((len(t_old), 2))
    q, dq = [rng.standard_normal(2)], [rng.standard_normal(2)]
    for k, h in enumerate(np.diff(t_old)):  # the transcription's integration rows
        q.append(q[-1] + h * dq[-1] + h**2 / 6 * (2 * ddq[k] + ddq[k + 1]))
        dq.append(dq[-1] + h / 2 * (ddq[k] + ddq[k + 1]))
    q, dq = np.array(q), np.array(dq)
    t = np.concatenate([np.linspace(0.0, 0.7, 23), t_old])
    spline = CubicHermiteSpline(t_old, q, dq)
    # 1e-9: scipy's second derivative on intervals of a few ms rounds at about 1e-11
    for mine, nu in zip(interpolate_knots(t_old, q, dq, ddq, t), range(3), strict=True):
        assert np.abs(mine - spline(t, nu)).max() <= 1e-9 * max(1.0, np.abs(spline(t, nu)).max())


def test_a_fine_reach_on_independent_coordinates_starts_from_a_coarse_solve(monkeypatch):
    """On more than twice COARSE_KNOTS knots the reach solves on COARSE_KNOTS first: the
    same optimum as the solve from the minimum-jerk guess (the weld five-bar, 70 knots),
    the plan's end at the goal by Pinocchio's forward kinematics of the folder's URDF;
    where the fine solve fails from there, the solve from the minimum-jerk guess follows."""
    from workbench.ocp import reach

    tool, start, goal, duration, torque, _ = PROBLEMS["5bar_linkage_iso6d"]
    problem = ReachProblem(
        start=np.array(start), goal=np.array(goal), duration=duration, knots=70, tool=tool,
        model=str(FOLDERS / "5bar_linkage_iso6d" / "robot.yaml"), torque=tuple(torque),
    )  # fmt: skip
    grids = []
    inner = reach._solve
    monkeypatch.setattr(reach, "_solve", lambda p, *a: grids.append(p.knots) or inner(p, *a))
    refined = solve(problem, progress=False)
    assert grids == [70, reach.COARSE_KNOTS]
    # a fine solve that fails from the coarse solution (here: its knots NaN) is followed
    # by the solve from the minimum-jerk guess
    grids.clear()
    with monkeypatch.context() as patch:
        nan = lambda t_old, q, dq, ddq, t: [np.full((len(t), q.shape[1]), np.nan)] * 3  # noqa: E731
        patch.setattr(reach, "interpolate_knots", nan)
        again = solve(problem, progress=False)
    assert grids == [70, reach.COARSE_KNOTS, 70]
    monkeypatch.setattr(reach, "COARSE_KNOTS", problem.knots)  # no coarse solve
    cold = solve(problem, progress=False)
    assert refined.status == again.status == cold.status == "solved"
    assert abs(refined.objective - cold.objective) <= 1e-6 * cold.objective
    assert again.objective == cold.objective
    chain = load(FOLDERS / "5bar_linkage_iso6d" / "robot.yaml", tool=tool)
    end = pinocchio_tool("5bar_linkage_iso6d", chain.joint_names, refined.q[-1])
    assert np.linalg.norm(end - goal) <= 1e-6
    assert refined.task_error <= 1e-3
