"""The default reaching problem solved on the analytic callbacks and on pure CasADi SX.

Both formulations define the same NLP (tests/fivebar_casadi_reference.py
writes the five-bar out in SX independently of workbench.fivebar), so
IPOPT must reach the same optimum. The analytic solution is then checked
against the model directly: loop closure, boundary conditions, torques
re-evaluated by ``FiveBar.torque``, effort limits, forward dynamics at the
knots and an open-loop forward simulation of the optimal motor torques.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.fivebar_casadi_reference import as_numpy, sx_functions
from workbench.fivebar import ACTIVE, FiveBar
from workbench.ocp import reach
from workbench.resources import shipped

# Open-loop simulation of the knot torques, interpolated linearly as FiveBar.simulate
# does, vs the plan: the plan's torque between knots is not linear, so the simulated
# motion drifts by O(h^2). Measured final pointing angle at K = 25, 50, 100, 200:
# 8.5e-3, 3.4e-3, 1.21e-3, 2.9e-4 rad; the bound is about twice the K = 100 value.
SIMULATION_TOLERANCE_RAD = 2.5e-3


@pytest.fixture(scope="module")
def fb() -> FiveBar:
    return FiveBar.default()


@pytest.fixture(scope="module")
def problem() -> reach.ReachProblem:
    return reach.ReachProblem.from_toml(shipped("problems") / "fivebar_reach.toml")


@pytest.fixture(scope="module")
def analytic(problem, fb) -> reach.ReachResult:
    return reach.solve(problem, fb, progress=False)


@pytest.fixture(scope="module")
def pure_sx(problem, fb) -> reach.ReachResult:
    return reach.solve(problem, fb, progress=False, functions=sx_functions(fb, problem.knots))


def _angle(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Angle between unit vectors (rows), accurate for small angles."""
    return np.arctan2(np.linalg.norm(np.cross(a, b), axis=-1), np.sum(a * b, axis=-1))


def test_analytic_and_sx_reach_the_same_optimum(analytic, pure_sx, problem):
    assert analytic.status == "solved", analytic.message
    assert pure_sx.status == "solved", pure_sx.message
    assert analytic.q.shape == pure_sx.q.shape == (problem.knots, 5)
    difference = abs(analytic.objective - pure_sx.objective) / abs(pure_sx.objective)
    assert difference <= 1e-6


def test_analytic_solution_closes_the_loop(analytic, fb):
    assert np.abs(fb.loop_residual(analytic.q)).max() <= 1e-8
    # velocity and acceleration level too: every knot is a consistent closed-chain state
    closure, _ = fb.closure(analytic.q, analytic.dq, analytic.ddq)
    assert np.abs(closure).max() <= 1e-8


def test_analytic_solution_meets_the_boundary_conditions(analytic, fb, problem):
    np.testing.assert_allclose(analytic.dq[0, ACTIVE], 0.0, rtol=0, atol=1e-8)
    np.testing.assert_allclose(analytic.dq[-1, ACTIVE], 0.0, rtol=0, atol=1e-8)
    np.testing.assert_allclose(fb.pointing(analytic.q[0]), problem.start, rtol=0, atol=1e-8)
    np.testing.assert_allclose(fb.pointing(analytic.q[-1]), problem.goal, rtol=0, atol=1e-8)


def test_analytic_torques_are_the_model_torques_within_limits(analytic, fb):
    tau = fb.torque(analytic.q, analytic.dq, analytic.ddq)
    assert np.abs(analytic.tau - tau).max() <= 1e-10 * np.abs(tau).max()
    # and by the SX reference, which shares no code with FiveBar.torque
    knots = np.concatenate([analytic.q, analytic.dq, analytic.ddq], axis=1)
    tau_sx = as_numpy(sx_functions(fb, len(knots)), knots)["torque"]
    assert np.abs(analytic.tau - tau_sx).max() <= 1e-10 * np.abs(tau_sx).max()
    limit = fb.chain.effort_limit[[0, 3]]
    assert np.all(np.abs(analytic.tau) <= limit + 1e-8)


def test_forward_dynamics_at_the_knots_gives_the_planned_accelerations(analytic, fb):
    ddqa, ddq = fb.forward_dynamics(analytic.q, analytic.dq[:, ACTIVE], analytic.tau)
    scale = np.abs(analytic.ddq).max()
    assert np.abs(ddqa - analytic.ddq[:, ACTIVE]).max() <= 1e-10 * scale
    assert np.abs(ddq - analytic.ddq).max() <= 1e-10 * scale


def test_simulated_optimal_torques_track_the_plan(analytic, fb, problem):
    # RK4 with 2 substeps per knot interval: 4 or 16 change the final angle by < 2e-6 rad
    q, _ = fb.simulate(analytic.t, analytic.tau, analytic.q[0], analytic.dq[0, ACTIVE], substeps=2)
    assert np.abs(fb.loop_residual(q)).max() <= 1e-10
    planned = fb.pointing(analytic.q[-1])
    final = _angle(fb.pointing(q[-1]), planned)
    assert final <= SIMULATION_TOLERANCE_RAD
    assert _angle(fb.pointing(q[-1]), problem.goal) <= SIMULATION_TOLERANCE_RAD
    # the solver's own tracking figure (one RK4 step per interval) agrees
    assert abs(analytic.final_pointing_error_rad - final) <= 1e-4
