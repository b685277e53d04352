"""Inertial parameters: conventions against Pinocchio, eq. 29-34 against differences, regressor."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import workbench as wb
from tests.conftest import random_state
from workbench import inertia, lie
from workbench.dynamics.regressor import torque_regressor
from workbench.testing import central_differences


@pytest.fixture
def rng():
    return np.random.default_rng(21)


def random_phi(rng) -> np.ndarray:
    return inertia.phi_from_pinocchio(pin.Inertia.Random().toDynamicParameters())


def test_phi_matches_pinocchio_inertia(rng):
    for _ in range(20):
        I = pin.Inertia.Random()
        phi = inertia.phi_from_pinocchio(I.toDynamicParameters())
        np.testing.assert_allclose(
            inertia.matrix_from_phi(phi), lie.pinocchio_matrix(I.matrix()), atol=1e-13
        )
        m, c, I_c = inertia.com_from_phi(phi)
        assert (
            m == pytest.approx(I.mass) and np.allclose(c, I.lever) and np.allclose(I_c, I.inertia)
        )
        np.testing.assert_allclose(inertia.phi_from_com(m, c, I_c), phi, atol=1e-13)
        np.testing.assert_allclose(inertia.phi_to_pinocchio(phi), I.toDynamicParameters(), atol=0)
    # tensor convention: I_xy is the matrix entry, -integral x y dm (point mass at (1, 1, 0))
    point = inertia.phi_from_com(np.array(2.0), np.array([1.0, 1.0, 0.0]), np.zeros((3, 3)))
    assert point[7] == pytest.approx(-2.0)


def test_moved_inertia_matches_pinocchio_se3_act(rng):
    for _ in range(10):
        I, T = pin.Inertia.Random(), pin.SE3.Random()
        phi = inertia.phi_from_pinocchio(I.toDynamicParameters())
        expected = inertia.phi_from_pinocchio(T.act(I).toDynamicParameters())
        np.testing.assert_allclose(inertia.moved_phi(phi, T.homogeneous), expected, atol=1e-12)
        np.testing.assert_allclose(inertia.motion_matrix(T.homogeneous) @ phi, expected, atol=1e-12)


def test_dphi_deta_against_finite_differences_of_eq29(rng):
    h = 1e-6
    for _ in range(10):
        phi_bar = random_phi(rng)
        T = lie.exp_se3(rng.normal(size=6))
        phi = inertia.moved_phi(phi_bar, T)
        numeric = central_differences(
            lambda e, phi_bar=phi_bar, T=T: inertia.moved_phi(phi_bar, lie.exp_se3(e) @ T),
            np.zeros(6),
            h,
        )
        assert np.abs(inertia.dphi_deta(phi) - numeric).max() < 1e-7 * np.abs(numeric).max()


def test_dphi_deta_at_nonzero_eta_uses_the_left_jacobian(rng):
    phi_bar, eta, h = random_phi(rng), rng.normal(scale=0.5, size=6), 1e-6
    analytic = inertia.dphi_deta(
        inertia.moved_phi(phi_bar, lie.exp_se3(eta))
    ) @ lie.left_jacobian_se3(eta)
    numeric = central_differences(lambda x: inertia.moved_phi(phi_bar, lie.exp_se3(x)), eta, h)
    assert np.abs(analytic - numeric).max() < 1e-7 * np.abs(numeric).max()


@pytest.mark.parametrize("name", ("iiwa", "talos_upper_body"))
def test_regressor_times_phi_reproduces_tau(chains, name):
    chain = chains[name]
    q, dq, ddq, _ = random_state(chain, 30, seed=22)
    Y = torque_regressor(chain, q, dq, ddq)
    tau = wb.inverse_dynamics(chain, q, dq, ddq)
    assert np.abs(Y @ chain.phi.ravel() - tau).max() < 1e-10 * np.abs(tau).max()
    # and d tau / d phi is the regressor: perturb one link's parameters
    from dataclasses import replace

    k = chain.n // 2
    dphi = np.zeros_like(chain.phi)
    dphi[k] = random_phi(np.random.default_rng(0)) * 1e-3
    heavier = replace(chain, inertias=inertia.matrix_from_phi(chain.phi + dphi))
    change = wb.inverse_dynamics(heavier, q, dq, ddq) - tau
    assert np.abs(Y @ dphi.ravel() - change).max() < 1e-10 * np.abs(tau).max()


@settings(max_examples=50, deadline=None)
@given(arrays(np.float64, 10, elements=st.floats(-10, 10)))
def test_pseudo_inertia_round_trip(phi):
    """phi <-> J is linear and one to one (10 numbers each)."""
    back = inertia.phi_from_pseudo_inertia(inertia.pseudo_inertia(phi))
    assert np.abs(back - phi).max() <= 1e-12 * max(1.0, np.abs(phi).max())
