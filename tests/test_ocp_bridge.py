"""The CasADi bridge and the design map against CasADi AD, finite differences and physics.

The batched callbacks hand IPOPT analytic Jacobians and second derivatives
from central differences of them; here they are compared with CasADi's own
AD of the pure-SX five-bar (tests/fivebar_casadi_reference.py) on random
closed states and multipliers. The design map p -> link phi is compared
with central differences, and the torque regressor with the torques.
"""

from __future__ import annotations

import casadi as ca
import numpy as np
import pytest

from tests.fivebar_casadi_reference import sx_functions
from workbench import inertia
from workbench.fivebar import FiveBar
from workbench.fivebar_design import FiveBarDesign
from workbench.ocp.design import DesignSpace, DesignVariable
from workbench.ocp.reach import model_callbacks
from workbench.resources import shipped

KNOTS = 6


@pytest.fixture(scope="module")
def fb() -> FiveBar:
    return FiveBar.default()


@pytest.fixture(scope="module")
def knots(fb):
    rng = np.random.default_rng(7)
    qa = rng.uniform(-0.8, 0.8, size=(KNOTS, 2))
    q = np.array([fb.solve_passive(x) for x in qa])
    dq = fb.velocities(q, rng.normal(size=(KNOTS, 2)))
    ddq = fb.accelerations(q, dq, rng.normal(size=(KNOTS, 2)))
    return np.concatenate([q, dq, ddq], axis=1)  # (K, 15), closed states


def _derivatives(function: ca.Function, x: np.ndarray, lam: np.ndarray):
    """Value, Jacobian and Hessian of lam . f(x) through CasADi's MX machinery."""
    X = ca.MX.sym("x", x.size)
    y = function(X)
    J = ca.jacobian(y, X)
    H = ca.hessian(ca.dot(lam, y), X)[0]
    values = ca.Function("d", [X], [y, J, H])(x)
    return [np.asarray(ca.DM(v)) for v in values]


@pytest.mark.parametrize("name", ["torque", "closure"])
def test_callback_derivatives_match_casadi_ad(fb, knots, name):
    callbacks = model_callbacks(fb, KNOTS)
    reference = sx_functions(fb, KNOTS)
    rng = np.random.default_rng(3)
    x = knots.ravel()
    lam = rng.normal(size=reference[name].size1_out(0))
    ours = _derivatives(callbacks[name], x, lam)
    theirs = _derivatives(reference[name], x, lam)
    tolerances = {"value": 1e-12, "Jacobian": 1e-12, "Hessian": 1e-8}
    for (what, tol), a, b in zip(tolerances.items(), ours, theirs, strict=True):
        scale = max(np.abs(b).max(), 1.0)
        assert np.abs(a - b).max() / scale <= tol, what
    # Hessian sparsity is block diagonal in the knots (one 15 x 15 block each)
    H = _derivatives(callbacks[name], x, lam)[2]
    off_block = H.copy()
    for k in range(KNOTS):
        off_block[15 * k : 15 * k + 15, 15 * k : 15 * k + 15] = 0.0
    assert not off_block.any()


def test_pointing_callback_matches_casadi_ad(fb, knots):
    rng = np.random.default_rng(4)
    lam = rng.normal(size=3)
    q = knots[0, :5]
    ours = _derivatives(model_callbacks(fb, KNOTS)["pointing"], q, lam)
    theirs = _derivatives(sx_functions(fb, KNOTS)["pointing"], q, lam)
    for a, b, tol in zip(ours, theirs, (1e-14, 1e-12, 1e-8), strict=True):
        assert np.abs(a - b).max() <= tol * max(np.abs(b).max(), 1.0)


@pytest.fixture(scope="module")
def space() -> DesignSpace:
    design = FiveBarDesign.from_toml(shipped("models") / "fivebar" / "design.toml")
    bounds = [("arc_width", -0.008, 0.01), ("payload_offset", -0.05, 0.05)]
    bounds += [("rotor_1_offset", -0.05, 0.05)]
    return DesignSpace(design, [DesignVariable(*b) for b in bounds], mass_budget=1.0)


def test_design_map_matches_finite_differences_and_model(fb, space):
    p = np.array([0.003, -0.02, 0.01])
    dphi = space.link_phi(p)[1]
    h = 1e-6

    def phi(x):
        return space.link_phi(x)[0]

    fd = np.stack([(phi(p + h * e) - phi(p - h * e)) / (2 * h) for e in np.eye(3)], axis=-1)
    assert np.abs(fd - dphi).max() <= 1e-6 * np.abs(dphi).max()
    nominal = space.link_phi(np.zeros(3))[0]
    assert np.allclose(nominal, inertia.phi_from_matrix(fb.chain.inertias), rtol=0, atol=1e-15)
    # a wider arc is heavier by density * thickness * arc length * change (thin-arc estimate)
    wider = space.link_phi(np.array([0.001, 0.0, 0.0]))[0][:, 0] - nominal[:, 0]
    assert np.all(wider > 0)


def test_torque_regressor_reproduces_torques(fb, knots):
    Y = fb.torque_regressor(knots[:, :5], knots[:, 5:10], knots[:, 10:])
    phi = inertia.phi_from_matrix(fb.chain.inertias).ravel()
    tau = fb.torque(knots[:, :5], knots[:, 5:10], knots[:, 10:])
    assert np.abs(Y @ phi - tau).max() <= 1e-12 * np.abs(tau).max()


def test_rotor_offset_along_its_fixed_axis_leaves_torques_unchanged(fb, space, knots):
    """Physical identity: an axially symmetric rotor slid along its motor's fixed axis keeps
    its moment of inertia about that axis and its centre of mass on it."""
    state = knots[:, :5], knots[:, 5:10], knots[:, 10:]
    moved = space.link_phi(np.array([0.0, 0.0, 0.04]))[0]
    tau = fb.with_inertias(inertia.matrix_from_phi(moved)).torque(*state)
    assert np.abs(tau - fb.torque(*state)).max() <= 1e-14
    phi_payload = space.link_phi(np.array([0.0, 0.04, 0.0]))[0]
    tau_payload = fb.with_inertias(inertia.matrix_from_phi(phi_payload)).torque(*state)
    assert np.abs(tau_payload - fb.torque(*state)).max() > 1e-4  # the payload rides link 3
