"""Chain: normal form, conversions to and from Pinocchio and URDF, eta update, errors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pinocchio as pin
import pytest

import workbench as wb
from tests.conftest import random_state
from workbench.models.urdf import load_urdf
from workbench.testing.pinocchio_reference import rnea


def test_normal_form_twists_are_pinocchio_world_jacobian_at_zero(chains):
    """Column i of Pinocchio's world-aligned Jacobian at q = 0, expressed at the origin, is A_i."""
    for name, chain in chains.items():
        model = wb.models.load_pinocchio(name)
        data = model.createData()
        J = pin.computeJointJacobians(model, data, pin.neutral(model))  # world frame, (v, w)
        np.testing.assert_allclose(chain.twists, wb.lie.pinocchio_vector(J.T), atol=1e-12)


def test_inertias_in_base_frame_match_pinocchio(chains):
    chain = chains["ur5"]
    model = wb.models.load_pinocchio("ur5")
    data = model.createData()
    pin.forwardKinematics(model, data, pin.neutral(model))
    for i in range(chain.n):
        world = data.oMi[i + 1].act(model.inertias[i + 1])
        np.testing.assert_allclose(
            chain.inertias[i], wb.lie.pinocchio_matrix(world.matrix()), atol=1e-12
        )


def test_unaligned_and_prismatic_joints_round_trip():
    model = pin.Model()
    rng = np.random.default_rng(0)
    axis = rng.normal(size=3)
    joints = [
        pin.JointModelRevoluteUnaligned(axis / np.linalg.norm(axis)),
        pin.JointModelPrismaticUnaligned(np.array([0.6, 0.0, 0.8])),
        pin.JointModelPZ(),
    ]
    parent = 0
    for k, joint in enumerate(joints):
        parent = model.addJoint(parent, joint, pin.SE3.Random(), f"j{k}")
        model.appendBodyToJoint(parent, pin.Inertia.Random(), pin.SE3.Identity())
        model.addBodyFrame(f"body{k}", parent, pin.SE3.Identity(), model.addJointFrame(parent))
    model.addFrame(pin.Frame("tool", parent, pin.SE3.Random(), pin.FrameType.OP_FRAME))
    chain = wb.from_pinocchio(model)
    assert chain.joint_kinds == ("revolute", "prismatic", "prismatic")
    assert chain.tool_name == "tool"
    q, dq, ddq, f = random_state(chain, 30, seed=1)
    expected = rnea(model, q, dq, ddq, "tool", f)
    ours = wb.inverse_dynamics(chain, q, dq, ddq, f)
    np.testing.assert_allclose(ours, expected, rtol=1e-11, atol=1e-11)
    back = wb.to_pinocchio(chain)
    np.testing.assert_allclose(rnea(back, q, dq, ddq, "tool", f), expected, rtol=1e-11, atol=1e-11)


def test_to_pinocchio_keeps_names_frames_and_limits(chains):
    chain = chains["panda_arm"]
    model = wb.to_pinocchio(chain)
    original = wb.models.load_pinocchio("panda_arm")
    assert list(model.names) == list(original.names)
    assert model.frames[model.nframes - 1].name == chain.tool_name
    for frame in original.frames:
        if frame.type in (pin.FrameType.BODY, pin.FrameType.OP_FRAME) and frame.name != "universe":
            assert model.existFrame(frame.name), frame.name
    np.testing.assert_array_equal(model.lowerPositionLimit, original.lowerPositionLimit)
    np.testing.assert_array_equal(model.effortLimit, original.effortLimit)
    data, odata = model.createData(), original.createData()
    q = pin.randomConfiguration(original)
    pin.framesForwardKinematics(model, data, q)
    pin.framesForwardKinematics(original, odata, q)
    for frame in original.frames:
        if model.existFrame(frame.name) and frame.type != pin.FrameType.JOINT:
            np.testing.assert_allclose(
                data.oMf[model.getFrameId(frame.name)].homogeneous,
                odata.oMf[original.getFrameId(frame.name)].homogeneous,
                atol=1e-12,
            )


def test_with_eta_moves_twists_and_tool_not_inertias(chains):
    chain = chains["iiwa"]
    rng = np.random.default_rng(3)
    eta = rng.normal(scale=0.1, size=6 * (chain.n + 1))
    moved = chain.with_eta(eta)
    X = wb.lie.exp_se3(eta.reshape(-1, 6))
    expected = np.einsum("nij,nj->ni", wb.lie.Ad(X[:-1]), chain.twists)
    np.testing.assert_allclose(moved.twists, expected, atol=1e-14)
    np.testing.assert_array_equal(moved.inertias, chain.inertias)
    np.testing.assert_allclose(moved.tool_frame, X[-1] @ chain.tool_frame, atol=1e-14)
    # zero eta is the identity
    same = chain.with_eta(np.zeros_like(eta))
    np.testing.assert_allclose(same.twists, chain.twists, atol=0)


def test_tool_frame_choice_and_errors(chains):
    chain = wb.models.load("ur5", tool_frame="wrist_3_link")
    assert chain.tool_name == "wrist_3_link" and chain.tool_parent == 5
    with pytest.raises(wb.WorkbenchError, match="unknown tool frame 'nope'"):
        wb.models.load("ur5", tool_frame="nope")
    with pytest.raises(wb.WorkbenchError, match=r"eta has shape \(3,\); expected \(48,\)"):
        chains["iiwa"].with_eta(np.zeros(3))


def test_unknown_model_and_missing_urdf():
    with pytest.raises(wb.WorkbenchError, match="unknown model 'kuka'; known models:"):
        wb.models.load("kuka")
    with pytest.raises(wb.WorkbenchError, match=r"URDF file not found: /nonexistent\.urdf"):
        load_urdf("/nonexistent.urdf")


def test_continuous_joints_load_and_other_types_are_named(tmp_path):
    """A continuous joint is a revolute joint without limits; a planar one is named."""
    urdf = tmp_path / "continuous.urdf"
    text = """<robot name="r"><link name="base"/><link name="wheel">
        <inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/>
        </inertial></link>
        <joint name="spin" type="continuous"><parent link="base"/><child link="wheel"/>
        <axis xyz="0 0 1"/></joint></robot>"""
    urdf.write_text(text)
    chain = load_urdf(urdf)
    assert chain.joint_kinds == ("revolute",) and np.isinf(chain.upper[0])
    tau = wb.inverse_dynamics(chain, np.zeros((1, 1)), np.zeros((1, 1)), np.ones((1, 1)))
    assert tau[0, 0] == pytest.approx(1.0, rel=1e-12)  # izz about the axis through the origin
    urdf.write_text(text.replace('type="continuous"', 'type="planar"'))
    with pytest.raises(wb.WorkbenchError, match="joint 'spin' is a planar joint"):
        load_urdf(urdf)


def test_info_command_prints_model_and_fails_in_one_line():
    out = subprocess.run(
        [sys.executable, "-m", "workbench.cli", "info", "iiwa"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert "iiwa_joint_7" in out.stdout and "flange" in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "workbench.cli", "info", "kuka"], capture_output=True, text=True
    )
    assert bad.returncode == 2
    assert bad.stderr.count("\n") == 1 and "unknown model 'kuka'" in bad.stderr
