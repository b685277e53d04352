"""Drive gains identified with the dynamic parameters from a log with a known payload.

Ground truth: torques from Pinocchio's rnea on a perturbed model (with the
payload appended to the last link's joint as a body, for the payload log)
plus viscous and Coulomb friction; efforts ``e = tau / k`` with gains k drawn
per joint, log-uniform in [0.05, 20].

Noise model (``measured``): efforts with white noise of 1 % of each channel's
RMS; joint positions quantised by an 18-bit encoder (2 pi / 2^18 rad), then
low-passed (zero-phase Butterworth, 20 Hz at 100 Hz) and differentiated by
central differences as a log description does; filter borders dropped.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest

import workbench as wb
from workbench.calibration.fitting.drive_gains import identify_drive_gains, with_payload
from workbench.calibration.simulation.simulate import exciting_trajectory, perturbed_truth
from workbench.identification.drives import Drives
from workbench.identification.torque_model import TorqueModel
from workbench.recordings import signals
from workbench.recordings.log import Log

RATE = 100.0  # Hz


def payload_phi() -> np.ndarray:
    """3 kg, COM off the last joint's axis, a rigid body's inertia about the COM."""
    return wb.inertia.phi_from_com(3.0, [0.05, -0.04, 0.08], np.diag([0.02, 0.03, 0.015]))


def pinocchio_torques(chain, truth, q, dq, ddq, payload: bool, phi: np.ndarray | None = None):
    """Joint torques of the truth (Pinocchio rnea; the payload ``phi``, by default
    :func:`payload_phi`, as a body on the last joint) plus its friction."""
    model = wb.to_pinocchio(truth.chain)
    if payload:
        phi = payload_phi() if phi is None else phi
        inertia = pin.Inertia.FromDynamicParameters(wb.inertia.phi_to_pinocchio(phi))
        model.appendBodyToJoint(chain.n, inertia, pin.SE3.Identity())
    data = model.createData()
    tau = np.array([pin.rnea(model, data, *s).copy() for s in zip(q, dq, ddq, strict=True)])
    return tau + truth.viscous * dq + truth.coulomb * np.sign(dq)


def measured(chain, t, q, efforts, rng, noise: bool = True) -> Log:
    """A log as a robot records it (module docstring); exact q and derivatives without noise."""
    if noise:
        quantum = 2 * np.pi / 2**18
        q = signals.lowpass(np.round(q / quantum) * quantum, RATE, 20.0)
        efforts = efforts + 0.01 * np.sqrt(np.mean(efforts**2, axis=0)) * rng.normal(
            size=efforts.shape
        )
    dq, ddq = signals.derivatives(q, 1.0 / RATE)
    return Log(
        t=t, q=q, dq=dq, ddq=ddq, tau=efforts, joint_names=chain.joint_names,
        border=signals.border(1), min_speed=np.full(chain.n, 0.02),
    )  # fmt: skip


def gain_logs(chain, samples: int, noise: bool, seed: int = 0):
    """(log without payload, log with the payload, gains, truth)."""
    rng = np.random.default_rng(seed)
    gains = np.exp(rng.uniform(np.log(0.05), np.log(20.0), size=chain.n))
    truth = perturbed_truth(chain, "dynamic", 0.05, friction=0.5, seed=seed + 1)
    logs = []
    for k, payload in enumerate((False, True)):
        t, q, dq, ddq = exciting_trajectory(chain, samples, 1.0 / RATE, seed=seed + 2 + k)
        tau = pinocchio_torques(chain, truth, q, dq, ddq, payload)
        log = measured(chain, t, q, tau / gains, rng, noise)
        if not noise:
            log = replace(log, dq=dq, ddq=ddq, border=0, min_speed=None)
        logs.append(replace(log, payload=(chain.n - 1, payload_phi()) if payload else None))
    return logs, gains, truth


@pytest.fixture(scope="module")
def iiwa() -> wb.Chain:
    return wb.models.load("iiwa", moving=True)


def test_gains_under_realistic_noise(iiwa):
    """iiwa, 10 s without and 10 s with the payload: every gain within 2 % (and within four
    standard deviations); the identified torques match the truth's on a third trajectory."""
    logs, gains, truth = gain_logs(iiwa, 1000, noise=True)
    fit = identify_drive_gains(iiwa, logs)
    error = fit.gains / gains - 1.0
    assert np.abs(error).max() < 0.02, error
    assert np.all(np.abs(fit.gains - gains) < 4.0 * fit.gains_std), (
        fit.gains - gains
    ) / fit.gains_std
    assert fit.beta_std.shape == fit.beta.shape and np.all(fit.beta_std > 0)
    _, q, dq, ddq = exciting_trajectory(iiwa, 300, 1.0 / RATE, seed=11)
    expected = pinocchio_torques(iiwa, truth, q, dq, ddq, payload=False)
    model = TorqueModel(iiwa, Drives(iiwa.n))
    predicted = model.columns(q, dq, ddq, select=fit.base.independent) @ fit.beta
    relative = np.linalg.norm(predicted - expected) / np.linalg.norm(expected)
    assert relative < 0.02, relative
    assert f"{fit.gains[0]:.6g}" in fit.scale_text() and "N m" in fit.scale_text()
    np.testing.assert_allclose(fit.scaled(logs[0]).tau, logs[0].tau * fit.gains)
    assert list(fit.summary()["gains"].values()) == fit.gains.tolist()


def test_exact_data_give_exact_gains():
    """planar_2r, exact derivatives, no noise, one log whose second half carries the payload
    (split with with_payload): gains and base parameters exact."""
    chain = wb.models.load("planar_2r", moving=True)
    rng = np.random.default_rng(4)
    gains = np.exp(rng.uniform(np.log(0.05), np.log(20.0), size=chain.n))
    truth = perturbed_truth(chain, "dynamic", 0.05, friction=0.5, seed=5)
    t, q, dq, ddq = exciting_trajectory(chain, 600, 1.0 / RATE, seed=6)
    half = 300
    tau = np.concatenate([
        pinocchio_torques(chain, truth, q[:half], dq[:half], ddq[:half], payload=False),
        pinocchio_torques(chain, truth, q[half:], dq[half:], ddq[half:], payload=True),
    ])  # fmt: skip
    log = Log(t=t, q=q, dq=dq, ddq=ddq, tau=tau / gains, joint_names=chain.joint_names)
    fit = identify_drive_gains(chain, with_payload(log, half, (chain.n - 1, payload_phi())))
    np.testing.assert_allclose(fit.gains, gains, rtol=1e-8)
    friction = np.ravel(np.column_stack([truth.viscous, truth.coulomb]))  # fv1 fs1 fv2 fs2
    beta = fit.base.matrix @ TorqueModel(truth.chain, Drives(chain.n)).values(friction)
    np.testing.assert_allclose(fit.beta, beta, rtol=1e-7, atol=1e-9 * np.abs(beta).max())


def test_a_payload_is_needed():
    chain = wb.models.load("planar_2r", moving=True)
    logs, _, _ = gain_logs(chain, 200, noise=False)
    with pytest.raises(wb.WorkbenchError, match="known payload"):
        identify_drive_gains(chain, logs[:1])


TIAGO_ARM = ("torso_lift_joint", *(f"arm_{i}_joint" for i in range(1, 8)))
TIAGO_GAINS = np.array([20.0, 0.5, 2.0, -1.5, 0.8, 0.05, 0.1, 0.12])  # arm_3 sign-flipped


def with_gap(pieces: list[Log], gap: float = 0.3) -> Log:
    """One log of ``pieces`` recorded one after the other with ``gap`` seconds between them:
    one segment each, filtered and decimated on its own (as a reader splits a clock gap)."""
    stops = np.cumsum([len(p) for p in pieces])
    starts = np.concatenate([[0], stops[:-1]])
    t, offset = [], 0.0
    for piece in pieces:
        t.append(piece.t - piece.t[0] + offset)
        offset = t[-1][-1] + gap
    joined = {f: np.concatenate([getattr(p, f) for p in pieces]) for f in ("q", "dq", "ddq", "tau")}
    segments = tuple(zip(starts.tolist(), stops.tolist(), strict=True))
    return replace(pieces[0], t=np.concatenate(t), segments=segments, **joined)


def tiago_logs(transmission: np.ndarray | None = None) -> tuple[wb.Chain, list[Log]]:
    """TIAGo torso and arm, a run log with a 0.3 s gap in its clock (two segments, filter
    borders dropped in each) and a payload log carrying 1.5 kg on arm_7_link; 1 % torque noise
    plus 0.02 N m (N), 18-bit encoders. Efforts ``e = tau / TIAGO_GAINS``, or with a
    ``transmission`` R the motors' ``R^-T tau / TIAGO_GAINS`` logged joint side (times R^T),
    as a log description with ``side = "motor"`` reads them."""
    chain = wb.models.load("tiago", joints=list(TIAGO_ARM))
    rng = np.random.default_rng(7)
    truth = perturbed_truth(chain, "dynamic", 0.02, friction=0.1, seed=3)
    phi = wb.inertia.phi_from_com(1.5, [0.0, 0.0, 0.08], np.diag([0.004, 0.004, 0.002]))
    T = np.eye(chain.n) if transmission is None else transmission.T  # joint from motor
    logs = []
    for seeds, payload in (((20, 21), None), ((22,), (chain.n - 1, phi))):
        pieces = []
        for seed in seeds:
            t, q, dq, ddq = exciting_trajectory(chain, 800, 1.0 / RATE, seed=seed)
            tau = pinocchio_torques(chain, truth, q, dq, ddq, payload is not None, phi)
            tau = tau + 0.02 * rng.normal(size=tau.shape)  # and 1 % of the RMS in measured
            motors = np.linalg.solve(T, tau.T).T / TIAGO_GAINS
            pieces.append(measured(chain, t, q, motors, rng))
        log = replace(with_gap(pieces), payload=payload, transmission=transmission)
        logs.append(replace(log, tau=log.tau @ T.T))
    return chain, logs


def test_gains_of_a_log_with_a_gap():
    """Every gain within four standard deviations and 1 % of the truth (tiago_logs). (Efforts
    off the regressor's samples after the gap gave gains off by up to 370 standard
    deviations.)"""
    chain, logs = tiago_logs()
    fit = identify_drive_gains(chain, logs)
    assert fit.side == "joint"
    error = fit.gains - TIAGO_GAINS
    assert np.all(np.abs(error) < 4.0 * fit.gains_std), error / fit.gains_std
    assert np.abs(error / TIAGO_GAINS).max() < 0.01, error / TIAGO_GAINS


def test_motor_gains_behind_a_differential_wrist():
    """arm_6 and arm_7 driven by a differential (R = [[-1, 1], [1, 1]]), the gains on the
    motors (0.1 and 0.12): identified motor side, every gain within four standard deviations
    and 1 %; gains on the joints' efforts fit the wrist worse."""
    R = np.eye(len(TIAGO_ARM))
    R[6:, 6:] = [[-1.0, 1.0], [1.0, 1.0]]
    chain, logs = tiago_logs(R)
    fit = identify_drive_gains(chain, logs)
    assert fit.side == "motor" and "motor side" in fit.scale_text()
    error = fit.gains - TIAGO_GAINS
    assert np.all(np.abs(error) < 4.0 * fit.gains_std), error / fit.gains_std
    assert np.abs(error / TIAGO_GAINS).max() < 0.01, error / TIAGO_GAINS
    joint_side = identify_drive_gains(chain, [replace(log, transmission=None) for log in logs])
    assert np.all(joint_side.sigma[6:] > 1.3 * fit.sigma[6:])
