"""Lie-group identities (hypothesis) and agreement with Pinocchio's exp6/log6."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from workbench import lie

finite = st.floats(-3.0, 3.0, allow_nan=False, allow_infinity=False)
twists = arrays(np.float64, 6, elements=finite)
rotations_near_pi = st.floats(np.pi - 1e-6, np.pi)


@settings(max_examples=200, deadline=None)
@given(twists)
def test_exp_log_round_trip(V):
    T = lie.exp_se3(V)
    np.testing.assert_allclose(lie.exp_se3(lie.log_se3(T)), T, atol=1e-12)


@settings(max_examples=50, deadline=None)
@given(arrays(np.float64, 3, elements=finite), rotations_near_pi)
def test_log_so3_near_pi(axis, angle):
    if np.linalg.norm(axis) < 1e-3:
        axis = np.array([1.0, 0.0, 0.0])
    w = angle * axis / np.linalg.norm(axis)
    R = lie.exp_so3(w)
    np.testing.assert_allclose(lie.exp_so3(lie.log_so3(R)), R, atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(twists, twists)
def test_adjoint_is_a_homomorphism(V1, V2):
    T1, T2 = lie.exp_se3(V1), lie.exp_se3(V2)
    np.testing.assert_allclose(lie.Ad(T1 @ T2), lie.Ad(T1) @ lie.Ad(T2), atol=1e-10)
    np.testing.assert_allclose(lie.Ad(lie.inverse(T1)), np.linalg.inv(lie.Ad(T1)), atol=1e-9)


@settings(max_examples=200, deadline=None)
@given(twists, twists)
def test_dual_adjoint_swaps_arguments(A, F):
    # seed 000 eq. 10: ad_A^T F = ad*_F A
    np.testing.assert_allclose(lie.ad(A).T @ F, lie.ad_star(F) @ A, atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(twists, twists)
def test_ad_is_the_lie_bracket(X, Y):
    bracket = lie.hat(X) @ lie.hat(Y) - lie.hat(Y) @ lie.hat(X)
    np.testing.assert_allclose(lie.ad(X) @ Y, lie.vee(bracket), atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(twists, twists)
def test_adjoint_derivative_eq7(V, X):
    """d/dt Ad_T = Ad_T ad_{T^-1 dT} along T(t) = exp(t X) T0 (seed 000 eq. 7)."""
    T0 = lie.exp_se3(V)
    h = 1e-6
    numeric = (lie.Ad(lie.exp_se3(h * X) @ T0) - lie.Ad(lie.exp_se3(-h * X) @ T0)) / (2 * h)
    body = lie.vee(lie.inverse(T0) @ lie.hat(X) @ T0)  # T^-1 dT/dt at t = 0
    np.testing.assert_allclose(numeric, lie.Ad(T0) @ lie.ad(body), atol=1e-7)


@settings(max_examples=100, deadline=None)
@given(twists)
def test_agrees_with_pinocchio_exp6_log6(V):
    T = lie.exp_se3(V)
    T_pin = pin.exp6(pin.Motion(lie.pinocchio_vector(V))).homogeneous
    np.testing.assert_allclose(T, T_pin, atol=1e-12)
    log_pin = lie.pinocchio_vector(pin.log6(pin.SE3(T)).vector)
    np.testing.assert_allclose(lie.exp_se3(log_pin), T, atol=1e-12)
    np.testing.assert_allclose(lie.log_se3(T), log_pin, atol=1e-9)
    Ad_pin = pin.SE3(T).action
    np.testing.assert_allclose(lie.Ad(T), lie.pinocchio_matrix(Ad_pin), atol=1e-12)


@settings(max_examples=100, deadline=None)
@given(twists, twists)
def test_left_jacobian_by_finite_differences(V, dV):
    h = 1e-6
    T = lie.exp_se3(V)
    plus, minus = lie.exp_se3(V + h * dV), lie.exp_se3(V - h * dV)
    numeric = lie.vee((plus - minus) / (2 * h) @ lie.inverse(T))
    np.testing.assert_allclose(lie.left_jacobian_se3(V) @ dV, numeric, atol=1e-6)


def test_batched_shapes_are_kept():
    V = np.random.default_rng(0).normal(size=(4, 5, 6))
    assert lie.exp_se3(V).shape == (4, 5, 4, 4)
    assert lie.Ad(lie.exp_se3(V)).shape == (4, 5, 6, 6)
    np.testing.assert_allclose(lie.exp_se3(V)[2, 3], lie.exp_se3(V[2, 3]))
