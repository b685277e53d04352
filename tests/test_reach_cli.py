"""`workbench reach` end to end: real IPOPT solves, real files, exit codes.

The default problem's result files are checked for content (shapes, PNG
size, a meshcat scene, the CSV header); an unreachable target and a bad
problem file write nothing. The co-design problem must lower the
objective of the same task, and re-solving that task with the optimised
link inertias held fixed must reproduce its objective.
"""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from matplotlib.image import imread

from workbench.cli import main
from workbench.closed_chains import load
from workbench.closed_chains.kinematics import solve_passive
from workbench.closed_chains.task_space import reach_bound, task
from workbench.errors import WorkbenchError
from workbench.inertia import matrix_from_phi
from workbench.ocp import reach
from workbench.ocp.problem import ReachProblem
from workbench.resources import shipped


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("reach") / "results"
    code = main(["reach", "--out", str(out), "--quiet"])
    return code, out


def test_default_problem_writes_all_results(default_run):
    code, out = default_run
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "solved"
    assert summary["max_constraint_violation"] <= 1e-8
    assert summary["model"] == "fivebar"
    assert 0 <= summary["final_pointing_error_rad"] < 5e-3
    assert summary["warnings"] == [] and 0 < summary["transcription_error_rad"] < 5e-3
    data = np.load(out / "trajectory.npz")
    K = summary["knots"]
    assert data["t"].shape == (K,) and data["tau"].shape == (K, 2)
    for key in ("q", "dq", "ddq"):
        assert data[key].shape == (K, 5)  # the tree's joints 1..5
    table = np.loadtxt(out / "trajectory.csv", delimiter=",", skiprows=1)
    assert table.shape == (K, 1 + 15 + 2)
    assert np.allclose(table[:, 16:], data["tau"], rtol=1e-15, atol=0)
    header = (out / "trajectory.csv").read_text().splitlines()[0].split(",")
    assert header[:2] == ["t", "q1"] and header[-2:] == ["tau1", "tau4"]
    for name in ("joint_angles", "motor_torques", "power_energy"):
        image = imread(out / f"{name}.png")
        assert image.shape[:2] == (700, 1000) and image[..., :3].std() > 0.01
    html = (out / "animation.html").read_text()
    assert "<html" in html.lower() and "meshcat" in html.lower()
    page = (out / "report.html").read_text()
    assert "final_pointing_error_rad" in page and "data:image/png;base64" in page
    assert not list(out.parent.glob(".*staging*"))


def test_unreachable_target_is_infeasible_and_writes_nothing(tmp_path, capsys):
    text = (shipped("problems") / "fivebar_reach.toml").read_text()
    problem = tmp_path / "unreachable.toml"
    # within the arcs' reach of motor 1's axis (63 deg from it), but no closed configuration
    # points there: the inverse kinematics finds none
    goal = [0.3, 0.3, -1.0]
    assert reach_bound(load("fivebar")).beyond(goal) is None
    problem.write_text(text.replace("goal = [0.5, 0.3, 0.812]", f"goal = {goal}"))
    out = tmp_path / "out"
    assert main(["reach", str(problem), "--out", str(out), "--quiet"]) == 1
    assert not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "infeasible" in err[0] and "workspace" in err[0]


def test_a_goal_beyond_the_reach_is_refused_before_any_solve(tmp_path, capsys):
    """Straight opposite motor 1's axis (pi from it) is beyond the sum of the angles between
    the axes on the tool's path (75 + 90 deg): one line, exit 2, before any solve."""
    text = (shipped("problems") / "fivebar_reach.toml").read_text()
    problem = tmp_path / "unreachable.toml"
    w1 = load("fivebar").tree.twists[0, :3]
    problem.write_text(text.replace("goal = [0.5, 0.3, 0.812]", f"goal = {(-w1).tolist()}"))
    out = tmp_path / "out"
    assert main(["reach", str(problem), "--out", str(out), "--quiet"]) == 2
    assert not out.exists()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert err[0].startswith(f"workbench reach: error: {problem}: [task] goal [0.7071, ")
    assert "out of reach of spherical_fivebar: it is 3.142 rad from the axis of joint_1" in err[0]
    assert "beyond the 2.88 rad" in err[0]  # acos(w1 . w2) + acos(w2 . w3) = 75 + 90 deg


@pytest.mark.slow  # 15-20 s per chain: a 25-point grid of reach solves
@pytest.mark.parametrize("model", ["fivebar", "planar_fivebar", "fourbar"])
def test_the_reach_bound_holds_and_is_tight_over_the_workspace(model):
    """Every closed configuration on a grid of motor values keeps the tool within the bound,
    and the farthest comes within 2 % of it (the bound refuses no reachable goal, and is not
    vacuous)."""
    chain = load(model)
    bound = reach_bound(chain)
    lower, upper = chain.tree.lower[chain.active], chain.tree.upper[chain.active]
    axes = [np.linspace(a, b, 25) for a, b in zip(lower, upper, strict=True)]
    grid = np.stack(np.meshgrid(*axes), -1).reshape(-1, len(lower))
    farthest = 0.0
    for motors in grid:
        try:
            q = solve_passive(chain, motors[None], guess=chain.home[None])
        except WorkbenchError:  # no closed configuration there
            continue
        x = task(chain, q)[0][0]
        assert bound.beyond(x) is None
        farthest = max(farthest, bound.distance(x))
    assert 0.98 * bound.radius < farthest <= bound.radius * (1 + 1e-9)


def test_a_goal_barely_within_the_reach_still_solves(tmp_path, capsys):
    """A goal 1e-5 (relative) inside the bound, at a closed configuration with leg 1 almost
    stretched out, is not refused and solves."""
    chain = load("fivebar")
    q = solve_passive(chain, np.array([[np.pi / 8, 5 * np.pi / 6]]), guess=chain.home[None])
    goal = task(chain, q)[0][0]
    bound = reach_bound(chain)
    assert 1 - 1e-5 < bound.distance(goal) / bound.radius < 1
    text = (shipped("problems") / "fivebar_reach.toml").read_text()
    problem = tmp_path / "barely.toml"
    problem.write_text(text.replace("goal = [0.5, 0.3, 0.812]", f"goal = {goal.tolist()}"))
    assert main(["reach", str(problem), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    assert capsys.readouterr().out.startswith(f"solved {problem}: objective ")


def test_bad_problem_file_is_an_error(tmp_path, capsys):
    problem = tmp_path / "bad.toml"
    problem.write_text("[task]\nstart = [0, 0, 1]\nduration = 1.0\n")
    assert main(["reach", str(problem), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert "[task] goal is required" in err and str(problem) in err
    assert not (tmp_path / "out").exists()


def test_coarse_knots_warn_and_the_knots_error_falls_like_h_squared(tmp_path, capsys):
    """Too few knots solve but cannot be trusted: the summary and the console say so. The
    transcription error (interval-wise integration of the true dynamics) falls at least like
    h^2 with the knot spacing h."""
    text = (shipped("problems") / "fivebar_reach.toml").read_text()
    problem = tmp_path / "coarse.toml"
    problem.write_text(text.replace("knots = 100", "knots = 8"))
    assert main(["reach", str(problem), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    warning = capsys.readouterr().err
    assert "workbench reach: warning: the knots are too far apart" in warning
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["warnings"] and summary["transcription_error_rad"] > 0.05
    nominal = ReachProblem.from_toml(shipped("problems") / "fivebar_reach.toml")
    # 3 knots: one RK4 step per interval diverges; the simulation retries with smaller steps
    # and ends, the plan flagged (a warning), it does not run forever
    three = reach.solve(replace(nominal, knots=3), progress=False)
    assert three.status == "solved" and "knots are too far apart" in three.warnings[0]
    errors = [reach.solve(replace(nominal, knots=K), progress=False).transcription_error
              for K in (40, 80)]  # fmt: skip
    assert errors[0] / errors[1] > 3.0  # h halves (measured: 8.3)


def test_codesign_lowers_the_objective_and_is_consistent(default_run):
    _, out = default_run
    nominal = json.loads((out / "summary.json").read_text())["objective"]
    problem = ReachProblem.from_toml(shipped("problems") / "fivebar_codesign.toml")
    fivebar = load("fivebar")
    result = reach.solve(problem, fivebar, progress=False)
    assert result.status == "solved"
    assert result.objective < 0.9 * nominal
    assert result.design["moving_mass_kg"]["after"] <= result.design["mass_budget_kg"] + 1e-9
    redesigned = fivebar.with_inertias(matrix_from_phi(np.array(result.design["link_phi"])))
    fixed = reach.solve(replace(problem, design=None), redesigned, progress=False)
    assert fixed.status == "solved"
    assert abs(fixed.objective - result.objective) <= 1e-6 * result.objective


def test_warm_start_from_a_previous_result(default_run, tmp_path):
    _, out = default_run
    cold = json.loads((out / "summary.json").read_text())
    text = (shipped("problems") / "fivebar_reach.toml").read_text()
    warm_line = f'warm_start = "{out / "trajectory.npz"}"'
    problem = tmp_path / "warm.toml"
    problem.write_text(text.replace('# warm_start = "results/trajectory.npz"', warm_line))
    result = reach.solve(ReachProblem.from_toml(problem), progress=False)
    assert result.status == "solved"
    assert abs(result.objective - cold["objective"]) <= 1e-6 * cold["objective"]
    assert result.iterations < cold["iterations"]


def test_minimum_time_is_faster_and_saturates_a_motor():
    nominal = ReachProblem.from_toml(shipped("problems") / "fivebar_reach.toml")
    problem = replace(nominal, knots=25, minimum_time=True)
    fivebar = load("fivebar")
    result = reach.solve(problem, fivebar, progress=False)
    assert result.status == "solved"
    assert result.t[-1] < nominal.duration
    limit = fivebar.tree.effort_limit[fivebar.active]
    assert np.abs(result.tau).max() >= 0.99 * limit.min()  # time-optimal: torques at a bound
    assert np.all(np.abs(result.tau) <= limit + 1e-8)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("tolerance = 1e-9", "tolerance = -1"), "tolerance = -1.0 must be positive"),
        (("duration_bounds = [0.05, 5.0]", "duration_bounds = [5.0, 0.05]"), "increasing"),
        (("minimum_time = false", 'minimum_time = "false"'), "must be true or false"),
        (("knots = 100", "knots = 100.7"), "must be an integer"),
        (("duration = 0.6 ", "duration = 1e6 "), "duration = 1000000.0 must be at most"),
        (("duration = 0.6 ", "duration = nan "), "duration = nan must be finite"),
        (
            ('# warm_start = "results/trajectory.npz"', 'warm_start = "missing.npz"'),
            "no trajectory",
        ),
        (("[solver]", "[design]\nmass_budget = 1.0\n\n[solver]"), "at least one design variable"),
        (("[solver]", '[solver]\nbarrier = "fast"'), "barrier = 'fast' must be one of"),
    ],
)
def test_bad_problem_values_name_the_key(tmp_path, capsys, change, message):
    text = (shipped("problems") / "fivebar_reach.toml").read_text()
    assert change[0] in text
    problem = tmp_path / "bad.toml"
    problem.write_text(text.replace(change[0], change[1]))
    assert main(["reach", str(problem), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and str(problem) in err
    assert not (tmp_path / "out").exists()


def test_bad_warm_start_and_unphysical_design_are_errors(tmp_path, capsys):
    warm = tmp_path / "warm.npz"
    np.savez(warm, t=np.linspace(0, 1, 5), q=np.zeros((5, 4)), dq=np.zeros((5, 4)),
             ddq=np.zeros((5, 4)))  # fmt: skip
    text = (shipped("problems") / "fivebar_reach.toml").read_text()
    problem = tmp_path / "warm.toml"
    problem.write_text(
        text.replace('# warm_start = "results/trajectory.npz"', 'warm_start = "warm.npz"')
    )
    with pytest.raises(WorkbenchError, match=r"must be \(K, 5\)"):
        reach.solve(ReachProblem.from_toml(problem), progress=False)
    design = (shipped("problems") / "fivebar_codesign.toml").read_text()
    bad = tmp_path / "design.toml"
    bad.write_text(
        design.replace("arc_width = [-0.008, 0.010]", "arc_width = [-0.021, 0.010]").replace(
            '"../models/fivebar/design.toml"', f'"{shipped("models") / "fivebar" / "design.toml"}"'
        )
    )
    assert main(["reach", str(bad), "--out", str(tmp_path / "out"), "--quiet"]) == 2
    assert "physical range" in capsys.readouterr().err


def _failing(exception):
    """A model-function factory whose torque callback raises ``exception`` on its 5th call."""
    from workbench.ocp.model_functions import model_callbacks

    def functions(model, knots, rows, design=None):
        built = model_callbacks(model, knots, rows, design)
        torque = built["torque"]
        original, calls = torque.evaluate, []

        def evaluate(X, P, jacobian):
            calls.append(1)
            if len(calls) == 5:
                raise exception
            return original(X, P, jacobian)

        torque.evaluate = evaluate
        return built

    return functions


def test_an_error_inside_a_callback_stops_the_solve_with_one_message():
    problem = replace(ReachProblem.from_toml(shipped("problems") / "fivebar_reach.toml"), knots=20)
    with pytest.raises(WorkbenchError, match="the model failed during the solve: boom"):
        reach.solve(problem, progress=False, functions=_failing(ValueError("boom")))


def test_ctrl_c_during_ipopt_is_an_interrupt():
    problem = replace(ReachProblem.from_toml(shipped("problems") / "fivebar_reach.toml"), knots=20)
    with pytest.raises(KeyboardInterrupt):
        reach.solve(problem, progress=False, functions=_failing(KeyboardInterrupt()))
