"""Twist calibration of a closed chain from a simulated motor-torque log (planar five-bar).

Only the motors are logged. The ground truth moves the twists along the
directions the motor torques determine well at the nominal (the right
singular vectors of d tau_a / d eta over the log, singular values above
1e-2 of the largest); the fit must recover them to 1e-8 from exact torques,
and within 4 reported standard deviations with noise. The log and the
truth come from workbench's own simulation; what is checked against is the
truth that produced the log, and a held-out trajectory.
"""

from __future__ import annotations

import numpy as np
import pytest

from workbench.calibration.fitting.closed_chain import (
    ClosedChainTwistProblem,
    motor_trajectory,
    simulate_closed_log,
)
from workbench.calibration.fitting.twist import calibrate_twist
from workbench.closed_chains import load
from workbench.closed_chains.derivatives import closed_chain_derivatives
from workbench.closed_chains.dynamics import motor_torques
from workbench.closed_chains.kinematics import accelerations, solve_passive, velocities
from workbench.eta import identifiable_eta_basis

SAMPLES = 400


@pytest.fixture(scope="module")
def setting():
    model = load("planar_fivebar")
    _, _, dqa, ddqa, q = motor_trajectory(model, SAMPLES, 0.01, seed=0)
    dq = velocities(model, q, dqa)
    ddq = accelerations(model, q, dq, ddqa)
    J = closed_chain_derivatives(model, q, dq, ddq).dtau_deta.reshape(-1, 6 * (model.n + 1))
    basis = identifiable_eta_basis(model.tree)
    _, s, Vt = np.linalg.svd(J @ basis, full_matrices=False)
    strong = basis @ Vt[: int(np.sum(s > 1e-2 * s[0]))].T
    return model, strong


def _fit(model, strong, noise):
    log, truth, eta, viscous, coulomb = simulate_closed_log(
        model, samples=SAMPLES, perturb=1e-2, friction=0.02, noise=noise, directions=strong
    )
    fit = calibrate_twist(model, ClosedChainTwistProblem(log), directions=strong)
    return fit, truth, eta, viscous, coulomb


def test_exact_torques_recover_the_identifiable_twists(setting):
    model, strong = setting
    assert strong.shape[1] >= 5  # the in-plane geometry of the two branches
    fit, truth, eta, viscous, coulomb = _fit(model, strong, noise=0.0)
    assert np.abs(strong.T @ (fit.eta - eta)).max() <= 1e-8
    drives = dict(zip(("fv1", "fs1", "fv2", "fs2"), fit.model.drive, strict=True))
    np.testing.assert_allclose([drives["fv1"], drives["fv2"]], viscous, rtol=0, atol=1e-9)
    np.testing.assert_allclose([drives["fs1"], drives["fs2"]], coulomb, rtol=0, atol=1e-9)
    # a trajectory the fit never saw: the calibrated chain predicts the truth's torques
    _, qa, dqa, ddqa, _ = motor_trajectory(model, 200, 0.013, seed=5)
    predicted, expected = [], []
    for chain, out in ((fit.model.chain, predicted), (truth, expected)):
        q = solve_passive(chain, qa)
        dq = velocities(chain, q, dqa)
        out.append(motor_torques(chain, q, dq, accelerations(chain, q, dq, ddqa)))
    assert np.abs(predicted[0] - expected[0]).max() <= 1e-8 * np.abs(expected[0]).max()


def test_noisy_torques_recover_the_twists_within_their_standard_deviations(setting):
    model, strong = setting
    fit, _, eta, _, _ = _fit(model, strong, noise=0.01)
    p = 6 * (model.n + 1)
    error = strong.T @ (fit.eta - eta)
    std = np.sqrt(np.diag(strong.T @ fit.covariance[:p, :p] @ strong))
    assert np.all(std > 0)
    assert np.all(np.abs(error) <= 4.0 * std)
