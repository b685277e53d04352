"""The CasADi bridge and the design map against CasADi AD, finite differences and physics.

The batched callbacks hand IPOPT analytic Jacobians and second derivatives,
either exact (CasADi AD of workbench.ocp.model_sx) or from central
differences of the Jacobians (exact along velocities and accelerations, in
which the maps are at most quadratic; 1e-10 relative along positions);
here both are compared with CasADi's own AD of the pure-SX model functions
(workbench/testing/ocp_reference.py, written out
independently of workbench.closed_chains) on random closed states and
multipliers, on every shipped closed chain. The design map
p -> link phi is compared with central differences, and the closed chain's
torque regressor with its torques.
"""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

from workbench import inertia
from workbench.closed_chains import load
from workbench.closed_chains.dynamics import motor_torques, torque_regressor
from workbench.closed_chains.kinematics import (
    accelerations,
    independent_rows,
    solve_passive,
    velocities,
)
from workbench.models.fivebar_design import FiveBarDesign
from workbench.ocp.design import DesignSpace, DesignVariable
from workbench.ocp.model_functions import model_callbacks
from workbench.ocp.model_sx import knot_functions
from workbench.resources import shipped
from workbench.testing import central_differences
from workbench.testing.ocp_reference import sx_functions

KNOTS = 6
MODELS = ["fivebar", "planar_fivebar", "fourbar", "delta"]


def closed_knots(model, seed: int = 7) -> np.ndarray:
    """Closed states (K, 3 n) near home with random motor velocities and accelerations."""
    rng = np.random.default_rng(seed)
    a = len(model.active)
    qa = model.home[model.active] + rng.uniform(-0.3, 0.3, size=(KNOTS, a))
    q = solve_passive(model, qa)
    dq = velocities(model, q, rng.normal(size=(KNOTS, a)))
    ddq = accelerations(model, q, dq, rng.normal(size=(KNOTS, a)))
    return np.concatenate([q, dq, ddq], axis=1)


def _derivatives(function: ca.Function, x: np.ndarray, lam: np.ndarray):
    """Value, Jacobian and Hessian of lam . f(x) through CasADi's MX machinery."""
    X = ca.MX.sym("x", x.size)
    y = function(X)
    J = ca.jacobian(y, X)
    H = ca.hessian(ca.dot(lam, y), X)[0]
    values = ca.Function("d", [X], [y, J, H])(x)
    return [np.asarray(ca.DM(v)) for v in values]


@pytest.mark.parametrize("exact_hessian", [True, False], ids=["exact", "differences"])
@pytest.mark.parametrize("model_name", MODELS)
@pytest.mark.parametrize("name", ["torque", "closure"])
def test_callback_derivatives_match_casadi_ad(model_name, name, exact_hessian):
    model = load(model_name)
    knots = closed_knots(model)
    rows = independent_rows(model)
    callbacks = model_callbacks(model, KNOTS, rows, exact_hessian=exact_hessian)
    reference = sx_functions(model, KNOTS, rows)
    rng = np.random.default_rng(3)
    x = knots.ravel()
    lam = rng.normal(size=reference[name].size1_out(0))
    ours = _derivatives(callbacks[name], x, lam)
    theirs = _derivatives(reference[name], x, lam)
    tolerances = {"value": 1e-12, "Jacobian": 1e-11, "Hessian": 1e-9}
    for (what, tol), a, b in zip(tolerances.items(), ours, theirs, strict=True):
        scale = max(np.abs(b).max(), 1.0)
        assert np.abs(a - b).max() / scale <= tol, what
    # Hessian sparsity is block diagonal in the knots (one 3 n x 3 n block each)
    H = ours[2].copy()
    w = 3 * model.n
    for k in range(KNOTS):
        H[w * k : w * k + w, w * k : w * k + w] = 0.0
    assert not H.any()


@pytest.mark.parametrize("exact_hessian", [True, False], ids=["exact", "differences"])
@pytest.mark.parametrize("model_name", MODELS)
def test_task_callback_matches_casadi_ad(model_name, exact_hessian):
    model = load(model_name)
    q = closed_knots(model)[0, : model.n]
    rows = independent_rows(model)
    lam = np.random.default_rng(4).normal(size=3)
    callbacks = model_callbacks(model, KNOTS, rows, exact_hessian=exact_hessian)
    ours = _derivatives(callbacks["task"], q, lam)
    theirs = _derivatives(sx_functions(model, KNOTS, rows)["task"], q, lam)
    hessian_tolerance = 1e-11 if exact_hessian else 1e-8
    for a, b, tol in zip(ours, theirs, (1e-14, 1e-12, hessian_tolerance), strict=True):
        assert np.abs(a - b).max() <= tol * max(np.abs(b).max(), 1.0)


@pytest.mark.parametrize("model_name", MODELS)
def test_sx_model_values_are_the_kernels(model_name):
    """workbench.ocp.model_sx differentiates the functions the kernels evaluate."""
    model = load(model_name)
    knots = closed_knots(model)
    knots[:, : model.n] += np.random.default_rng(5).normal(scale=0.05, size=(KNOTS, model.n))
    rows = independent_rows(model)
    functions = knot_functions(model, tuple(int(i) for i in rows))
    callbacks = model_callbacks(model, KNOTS, rows)
    for name in ("torque", "closure"):
        ours = np.asarray(callbacks[name](knots.ravel())).reshape(KNOTS, -1)
        zero = np.zeros(ours.shape[1])
        sx = np.stack([np.asarray(functions[name](x, zero)[0]).ravel() for x in knots])
        np.testing.assert_allclose(sx, ours, rtol=0, atol=1e-11 * max(np.abs(ours).max(), 1))
    q = knots[-1, : model.n]
    np.testing.assert_allclose(
        np.asarray(functions["task"](q, np.zeros(3))[0]).ravel(),
        np.asarray(callbacks["task"](q)).ravel(), rtol=0, atol=1e-12,
    )  # fmt: skip


def test_design_torque_second_derivatives(space):
    """With the links' phi an input: the state block at the model's own phi is CasADi's AD
    of the independent SX reference; the mixed block is the state derivative of the
    analytic regressor's J_phi^T lam = Y^T lam (central differences), and phi-phi is 0."""
    model = load("fivebar")
    knots = closed_knots(model)
    rows = independent_rows(model)
    n, phi = model.n, model.tree.phi.ravel()
    rng = np.random.default_rng(6)
    lam = rng.normal(size=(KNOTS, len(model.active)))
    callbacks = model_callbacks(model, KNOTS, rows, design=space)
    xx, xp, pp = callbacks["torque"].adjoint_derivatives(knots, phi, lam)
    theirs = _derivatives(sx_functions(model, KNOTS, rows)["torque"], knots.ravel(), lam.ravel())
    w = 3 * n
    for k in range(KNOTS):
        block = theirs[2][w * k : w * k + w, w * k : w * k + w]
        assert np.abs(xx[k] - block).max() <= 1e-9 * max(np.abs(block).max(), 1.0)
    assert not pp.any()

    def adjoint_by_phi(x):
        state = x[:n][None], x[n : 2 * n][None], x[2 * n :][None]
        return torque_regressor(model, *state)[0].T @ lam[0]

    difference = central_differences(adjoint_by_phi, knots[0], 1e-6)  # (10 n, 3 n)
    assert np.abs(xp[0] - difference.T).max() <= 1e-6 * np.abs(difference).max()


@pytest.fixture(scope="module")
def space() -> DesignSpace:
    design = FiveBarDesign.from_toml(shipped("models") / "fivebar" / "design.toml")
    bounds = [("arc_width", -0.008, 0.01), ("payload_offset", -0.05, 0.05)]
    bounds += [("rotor_1_offset", -0.05, 0.05)]
    return DesignSpace(design, [DesignVariable(*b) for b in bounds], mass_budget=1.0)


def test_design_map_matches_finite_differences_and_model(space):
    fb = load("fivebar")
    p = np.array([0.003, -0.02, 0.01])
    dphi = space.link_phi(p)[1]
    h = 1e-6

    def phi(x):
        return space.link_phi(x)[0]

    fd = central_differences(phi, p, h)
    assert np.abs(fd - dphi).max() <= 1e-6 * np.abs(dphi).max()
    nominal = space.link_phi(np.zeros(3))[0]
    assert np.allclose(nominal, inertia.phi_from_matrix(fb.tree.inertias), rtol=0, atol=1e-15)
    # a wider arc is heavier (its mass grows with its width)
    wider = space.link_phi(np.array([0.001, 0.0, 0.0]))[0][:4, 0] - nominal[:4, 0]
    assert np.all(wider > 0)


@pytest.mark.parametrize("model_name", MODELS)
def test_torque_regressor_reproduces_torques(model_name):
    model = load(model_name)
    knots = closed_knots(model)
    n = model.n
    state = knots[:, :n], knots[:, n : 2 * n], knots[:, 2 * n :]
    Y = torque_regressor(model, *state)
    tau = motor_torques(model, *state)
    assert np.abs(Y @ model.tree.phi.ravel() - tau).max() <= 1e-12 * np.abs(tau).max()


def test_rotor_offset_along_its_fixed_axis_leaves_torques_unchanged(space):
    """Physical identity: an axially symmetric rotor slid along its motor's fixed axis keeps
    its moment of inertia about that axis and its centre of mass on it."""
    fb = load("fivebar")
    knots = closed_knots(fb)
    state = knots[:, :5], knots[:, 5:10], knots[:, 10:]
    tau = motor_torques(fb, *state)
    moved = space.link_phi(np.array([0.0, 0.0, 0.04]))[0]
    rotor = motor_torques(fb.with_inertias(inertia.matrix_from_phi(moved)), *state)
    assert np.abs(rotor - tau).max() <= 1e-14
    phi_payload = space.link_phi(np.array([0.0, 0.04, 0.0]))[0]
    payload = motor_torques(fb.with_inertias(inertia.matrix_from_phi(phi_payload)), *state)
    assert np.abs(payload - tau).max() > 1e-4  # the payload rides link 3
