"""Logged efforts against the nominal model: raw units, signs, dead channels (effort_units).

Efforts are simulated as a drive logs them: the truth's joint torques (a
perturbed model with friction) divided by a per-joint gain the test draws,
plus noise of 1 % of each channel's RMS; the expected suggested scale is
that gain. A suggested scale is as good as the nominal model: with the
truth's links moved by 5 mm / 5 mrad and scaled by 0.5 % (perturb 0.005), the
iiwa's weakly loaded joints 3 and 5 are 8 % off; at perturb 0.01, 16 %.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import workbench as wb
from workbench.calibration.checks.effort_units import (
    RATIO_HIGH,
    RATIO_LOW,
    compare_efforts,
    nominal_torques,
)
from workbench.calibration.simulation.simulate import simulate_log
from workbench.dynamics.inverse_dynamics import inverse_dynamics
from workbench.recordings.log import Log

TIAGO_ARM = ("torso_lift_joint", *(f"arm_{i}_joint" for i in range(1, 8)))


def drive_log(chain: wb.Chain, gains, seed: int = 0, samples: int = 800):
    """(log of efforts e = tau / gains + 1 % noise, truth friction as nominal drive values)."""
    log, truth = simulate_log(
        chain, kind="dynamic", samples=samples, perturb=0.005, friction=0.3, seed=seed
    )
    rng = np.random.default_rng(seed + 10)
    efforts = log.tau / gains
    efforts += 0.01 * np.sqrt(np.mean(efforts**2, axis=0)) * rng.normal(size=efforts.shape)
    friction = {f"fv{j + 1}": v for j, v in enumerate(truth.viscous)}
    friction |= {f"fs{j + 1}": v for j, v in enumerate(truth.coulomb)}
    return replace(log, tau=efforts), friction


def test_unknown_gains_are_named_with_their_scale():
    """iiwa, gains log-uniform in [0.05, 20] per joint: every suggested scale is the gain
    within 10 %; joints whose gain is outside [0.5, 2] are flagged "scale", the others not."""
    chain = wb.models.load("iiwa", moving=True)
    rng = np.random.default_rng(3)
    gains = np.exp(rng.uniform(np.log(0.05), np.log(20.0), size=chain.n))
    log, friction = drive_log(chain, gains)
    found = compare_efforts(log, chain, friction)
    assert [f.joint for f in found] == list(chain.joint_names)
    suggested = np.array([f.suggested_scale for f in found])
    np.testing.assert_allclose(suggested, gains, rtol=0.1)
    flagged = np.array([f.verdict == "scale" for f in found])
    outside = (gains < RATIO_LOW) | (gains > RATIO_HIGH)
    assert outside.any() and (~outside).any()  # the draw has both kinds
    np.testing.assert_array_equal(flagged, outside)
    assert {f.verdict for f in found} <= {"ok", "scale"}
    message = found[int(np.argmax(outside))].message
    assert "multiply its [torques] scale by" in message and "N m per logged unit" in message


def test_the_nominal_drive_friction_enters_the_comparison():
    """Nominal torques with the drive file's friction are inverse dynamics plus fv dq + fs
    sign(dq) (a log without a speed threshold)."""
    chain = wb.models.load("planar_2r", moving=True)
    log, friction = drive_log(chain, np.ones(chain.n), samples=200)
    with_friction, gravity = nominal_torques(chain, log, friction)
    rigid = inverse_dynamics(chain, log.q, log.dq, log.ddq)
    fv = np.array([friction["fv1"], friction["fv2"]])
    fs = np.array([friction["fs1"], friction["fs2"]])
    np.testing.assert_allclose(with_friction, rigid + fv * log.dq + fs * np.sign(log.dq), atol=1e-9)
    np.testing.assert_allclose(gravity, 0.0, atol=1e-12)  # a horizontal planar robot
    with pytest.raises(wb.WorkbenchError, match="Iam1"):
        nominal_torques(chain, log, {"Iam1": 1.0})


def test_mobile_manipulator_raw_units():
    """The reported robot: a Tiago arm on its prismatic torso, efforts as motor currents.

    The torso logs about 4 where the nominal gravity load is about 178 N (gain 44 N per
    unit), arm joint 2 about 1 where 19 N m are expected (gain 19), a wrist joint logs
    noise (a differential wrist's effort on the other motor), joint 4's sign is flipped.
    """
    chain = wb.models.load("tiago", moving=True, joints=list(TIAGO_ARM))
    gains = np.ones(chain.n)
    gains[0], gains[2], gains[4] = 44.0, 19.0, -1.0
    log, friction = drive_log(chain, gains, seed=2)
    tau = log.tau.copy()
    tau[:, 6] = 0.002 * np.random.default_rng(0).normal(size=len(log))
    found = {f.joint: f for f in compare_efforts(replace(log, tau=tau), chain, friction)}
    torso = found["torso_lift_joint"]
    assert torso.verdict == "scale" and torso.kind == "prismatic" and torso.unit == "N"
    assert torso.nominal_rms > 100.0  # the arm's weight on the torso
    assert abs(torso.suggested_scale / 44.0 - 1) < 0.1 and "N per logged unit" in torso.message
    assert found["arm_2_joint"].verdict == "scale"
    assert abs(found["arm_2_joint"].suggested_scale / 19.0 - 1) < 0.1
    assert found["arm_4_joint"].verdict == "sign"
    assert abs(found["arm_4_joint"].suggested_scale + 1.0) < 0.1
    assert found["arm_6_joint"].verdict == "dead" and "dead channel" in found["arm_6_joint"].message
    assert all(found[j].verdict == "ok" for j in ("arm_1_joint", "arm_3_joint", "arm_5_joint"))


def test_joints_without_information_are_skipped():
    """A horizontal planar robot at rest: no motion, no gravity load, nothing to compare."""
    chain = wb.models.load("planar_2r", moving=True)
    t = 0.01 * np.arange(50)
    q = np.tile([0.3, -0.4], (50, 1))
    zero = np.zeros_like(q)
    tau = np.random.default_rng(1).normal(size=q.shape)
    log = Log(t=t, q=q, dq=zero, ddq=zero, tau=tau, joint_names=chain.joint_names)
    found = compare_efforts(log, chain)
    assert [f.verdict for f in found] == ["skipped", "skipped"]
    assert "not compared" in found[0].message and not found[0].suspicious
    with pytest.raises(wb.WorkbenchError, match="no efforts"):
        compare_efforts(replace(log, tau=None), chain)
