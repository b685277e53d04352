"""Reaching problems solved on the analytic callbacks and on pure CasADi SX.

Both formulations define the same NLP (tests/ocp_reference.py writes the
model functions out in SX independently of workbench.closed_chains), so
IPOPT must reach the same optimum, on the spherical five-bar's default
problem and on the planar five-bar's. The analytic solution is then
checked against the model directly: closure at three levels, boundary
conditions, torques re-evaluated by the SX reference, effort limits,
forward dynamics at the knots and an open-loop forward simulation of the
optimal motor torques.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from workbench.closed_chains import load
from workbench.closed_chains.dynamics import forward_dynamics, simulate
from workbench.closed_chains.kinematics import Closures, independent_rows
from workbench.closed_chains.task_space import task, task_distance
from workbench.ocp import reach
from workbench.ocp.problem import ReachProblem
from workbench.resources import shipped
from workbench.testing.ocp_reference import sx_functions

# Open-loop simulation of the knot torques, interpolated linearly, vs the plan: the
# plan's torque between knots is not linear, so the simulated motion drifts by O(h^2).
# Measured final pointing angle of the five-bar at K = 25, 50, 100, 200: 8.5e-3,
# 3.4e-3, 1.21e-3, 2.9e-4 rad; the bound is about twice the K = 100 value.
SIMULATION_TOLERANCE_RAD = 2.5e-3
PROBLEMS = {"fivebar": "fivebar_reach.toml", "planar_fivebar": "planar_fivebar_reach.toml"}


@pytest.fixture(scope="module", params=list(PROBLEMS))
def case(request):
    problem = ReachProblem.from_toml(shipped("problems") / PROBLEMS[request.param])
    if request.param != "fivebar":
        problem = replace(problem, knots=40)
    model = load(problem.model)
    analytic = reach.solve(problem, model, progress=False)
    return problem, model, analytic


def test_analytic_and_sx_reach_the_same_optimum(case):
    # The SX functions are compiled per knot count: 40 knots keep the comparison short.
    problem, model, _ = case
    problem = replace(problem, knots=40)
    analytic = reach.solve(problem, model, progress=False)
    pure_sx = reach.solve(problem, model, progress=False, functions=sx_functions)
    assert analytic.status == "solved", analytic.message
    assert pure_sx.status == "solved", pure_sx.message
    assert analytic.q.shape == pure_sx.q.shape == (problem.knots, model.n)
    difference = abs(analytic.objective - pure_sx.objective) / abs(pure_sx.objective)
    assert difference <= 1e-8


def test_analytic_solution_closes_the_chain_at_every_knot(case):
    _, model, analytic = case
    closures = Closures(model, analytic.q)
    assert np.abs(closures.residual()).max() <= 1e-8
    K = closures.jacobian()
    assert np.abs(K @ analytic.dq[..., None]).max() <= 1e-8
    bias = closures.second((analytic.dq[:, None], None), (analytic.dq[:, None], None))[:, 0]
    assert np.abs((K @ analytic.ddq[..., None])[..., 0] + bias).max() <= 1e-8


def test_analytic_solution_meets_the_boundary_conditions(case):
    problem, model, analytic = case
    start, goal = reach.task_targets(problem, model)
    a = model.active
    np.testing.assert_allclose(analytic.dq[[0, -1]][:, a], 0.0, rtol=0, atol=1e-8)
    x = task(model, analytic.q[[0, -1]])[0]
    np.testing.assert_allclose(x[0], start, rtol=0, atol=1e-8)
    np.testing.assert_allclose(x[1], goal, rtol=0, atol=1e-8)


def test_analytic_torques_are_the_reference_torques_within_limits(case):
    _, model, analytic = case
    knots = np.concatenate([analytic.q, analytic.dq, analytic.ddq], axis=1)
    rows = independent_rows(model, analytic.q[0])
    torque = sx_functions(model, len(knots), rows)["torque"]
    tau_sx = np.asarray(torque(knots.ravel())).reshape(len(knots), -1)
    assert np.abs(analytic.tau - tau_sx).max() <= 1e-10 * np.abs(tau_sx).max()
    limit = model.tree.effort_limit[model.active]
    assert np.all(np.abs(analytic.tau) <= limit + 1e-8)


def test_forward_dynamics_at_the_knots_gives_the_planned_accelerations(case):
    _, model, analytic = case
    a = model.active
    ddqa, ddq = forward_dynamics(model, analytic.q, analytic.dq[:, a], analytic.tau)
    scale = np.abs(analytic.ddq).max()
    assert np.abs(ddqa - analytic.ddq[:, a]).max() <= 1e-9 * scale
    assert np.abs(ddq - analytic.ddq).max() <= 1e-9 * scale


def test_simulated_optimal_torques_track_the_plan(case):
    problem, model, analytic = case
    if model.task != "pointing":
        pytest.skip("the tolerance is measured on the pointing task")
    # RK4 with 2 substeps per knot interval: 4 or 16 change the final angle by < 2e-6 rad
    a = model.active
    q, _ = simulate(model, analytic.t, analytic.tau, analytic.q[0], analytic.dq[0, a], substeps=2)
    assert np.abs(Closures(model, q).residual()).max() <= 1e-10
    simulated, planned = task(model, q[-1])[0][0], task(model, analytic.q[-1])[0][0]
    final = task_distance(model, simulated, planned)
    assert final <= SIMULATION_TOLERANCE_RAD
    goal = reach.task_targets(problem, model)[1]
    assert task_distance(model, simulated, goal) <= SIMULATION_TOLERANCE_RAD
    # the solver's own tracking figure (one RK4 step per interval) agrees
    assert abs(analytic.task_error - final) <= 1e-4
