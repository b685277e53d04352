"""The stage-ordered reaching NLP (workbench.ocp.stages) for FATROP and SQP-HPIPM.

Its variables map one to one onto the knot values; solved by FATROP it must
reach IPOPT's optimum of the knot-ordered transcription (itself checked
against the pure-SX formulation in test_reach_sx.py) and a motion that
closes the chain at three levels and meets the boundary conditions.
"""

from __future__ import annotations

from dataclasses import replace

import casadi as ca
import numpy as np
import pytest

from workbench.closed_chains import load
from workbench.closed_chains.kinematics import (
    Closures,
    accelerations,
    independent_rows,
    solve_passive,
    velocities,
)
from workbench.closed_chains.task_space import reach_configuration, task
from workbench.errors import WorkbenchError
from workbench.ocp import reach
from workbench.ocp.model_functions import model_callbacks
from workbench.ocp.problem import ReachProblem
from workbench.ocp.stages import transcribe_stagewise
from workbench.resources import shipped

KNOTS = 20


@pytest.fixture(scope="module")
def planar():
    problem = ReachProblem.from_toml(shipped("problems") / "planar_fivebar_reach.toml")
    return replace(problem, knots=KNOTS), load(problem.model)


def _stagewise(problem, model, sign=1.0):
    start, goal = reach.task_targets(problem, model)
    q_start = reach_configuration(model, start)
    q_goal = reach_configuration(model, goal, guess=q_start)
    functions = model_callbacks(model, problem.knots, independent_rows(model, q_start))
    nlp = transcribe_stagewise(
        problem, model, functions, q_start, goal, reach.goal_rows(model, q_goal), sign
    )
    return nlp, functions, q_start, q_goal


def piecewise_cubic_motion(model, q_start, h):
    """Knots (K, 3 n) of a closed motion from rest at q_start whose motor accelerations are
    linear between knots (integrated exactly), passive joints following."""
    a = model.active
    t = h * np.arange(KNOTS)
    ddqa = 0.5 * np.sin(np.outer(t / t[-1] * np.pi, np.arange(1, len(a) + 1)))
    qa, dqa = [q_start[a]], [np.zeros(len(a))]
    for k in range(KNOTS - 1):
        qa.append(qa[-1] + h * dqa[-1] + h**2 / 6 * (2 * ddqa[k] + ddqa[k + 1]))
        dqa.append(dqa[-1] + h / 2 * (ddqa[k] + ddqa[k + 1]))
    q = solve_passive(model, np.array(qa), guess=q_start)
    dq = velocities(model, q, np.array(dqa))
    return np.concatenate([q, dq, accelerations(model, q, dq, ddqa)], axis=1)


def test_stage_variables_and_constraints_are_the_knots(planar):
    problem, model = planar
    nlp, _, q_start, q_goal = _stagewise(problem, model)
    knots = piecewise_cubic_motion(model, q_start, problem.duration / (KNOTS - 1))
    x = nlp["from_knots"](knots)
    np.testing.assert_array_equal(np.asarray(nlp["to_knots"](x)).T, knots)
    s = nlp["structure"]
    assert s["N"] == KNOTS - 1 and s["nu"][-1] == 0
    assert sum(s["nx"]) + sum(s["nu"]) == x.size == nlp["lbx"].size
    gaps = sum(s["nx"][1:])
    assert gaps + sum(s["ng"]) == nlp["lbg"].size
    assert s["equality"] == (nlp["lbg"] == nlp["ubg"]).tolist()
    # a closed motion with piecewise-linear motor accelerations from the start: every
    # equality holds but the last knot's (zero motor velocity and the goal)
    g = np.asarray(ca.Function("g", [nlp["nlp"]["x"]], [nlp["nlp"]["g"]])(x)).ravel()
    equal = np.array(s["equality"])
    last = len(model.active) + len(reach.goal_rows(model, q_goal))
    assert np.abs((g - nlp["lbg"])[equal][:-last]).max() <= 1e-9
    assert np.abs((g - nlp["lbg"])[equal][-last:]).max() > 1e-3  # the check can fail


def test_fatrop_reaches_the_ipopt_optimum_and_a_closed_motion(planar):
    problem, model = planar
    ipopt = reach.solve(problem, model, progress=False)
    fatrop = reach.solve(replace(problem, solver="fatrop"), model, progress=False)
    assert ipopt.status == fatrop.status == "solved", fatrop.message
    assert abs(fatrop.objective - ipopt.objective) <= 1e-7 * abs(ipopt.objective)
    closures = Closures(model, fatrop.q)
    assert np.abs(closures.residual()).max() <= 1e-8
    assert np.abs(closures.jacobian() @ fatrop.dq[..., None]).max() <= 1e-8
    a = model.active
    np.testing.assert_allclose(fatrop.dq[[0, -1]][:, a], 0.0, atol=1e-8)
    start, goal = reach.task_targets(problem, model)
    np.testing.assert_allclose(task(model, fatrop.q[[0, -1]])[0], [start, goal], atol=1e-8)
    assert fatrop.max_constraint_violation <= 1e-8


def test_stagewise_solvers_refuse_minimum_time_and_design(planar):
    problem, model = planar
    with pytest.raises(WorkbenchError, match="name = 'fatrop' needs a fixed duration"):
        reach.solve(replace(problem, solver="fatrop", minimum_time=True), model, progress=False)


def test_unknown_solver_names_the_key(tmp_path):
    raw = {"task": {"start": [0.1, 0.0, 0.0], "goal": [0.2, 0.0, 0.0]}, "solver": {"name": "x"}}
    with pytest.raises(WorkbenchError, match=r"\[solver\] name = 'x' must be one of"):
        ReachProblem.from_dict(raw, "p.toml", tmp_path)
