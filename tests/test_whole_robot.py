"""Whole robots: a part of a robot's full URDF calibrated, the rest locked, written back whole.

References: Pinocchio's own model of the whole URDF (RNEA and frame poses
with the locked joints held at their values), the URDF text, and a CLI run
on a simulated log.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest

import workbench as wb
from workbench.calibration.simulation.simulate import simulate_log
from workbench.dynamics.kinematics import forward_kinematics
from workbench.models import urdf_path
from workbench.models.urdf import load_robot, reload_urdf, write_urdf
from workbench.recordings.log_files import write_log

TIAGO_ARM = ("torso_lift_joint", *(f"arm_left_{i}_joint" for i in range(1, 8)))
PR2_ARM = (
    "torso_lift_joint",
    *(
        f"r_{j}_joint"
        for j in (
            "shoulder_pan shoulder_lift upper_arm_roll elbow_flex forearm_roll wrist_flex "
            "wrist_roll"
        ).split()
    ),
)
LOCKED = {"head_2_joint": 0.3, "gripper_left_finger_joint": 0.4, "arm_right_2_joint": -0.5}


def _full_configuration(model, chain, q_chain, locked_values):
    """A configuration of the whole Pinocchio model: chain joints from q_chain, others locked."""
    q = pin.neutral(model)
    values = dict(locked_values) | dict(zip(chain.joint_names, q_chain, strict=True))
    for name, value in values.items():
        jid = model.getJointId(name)
        iq, nq = model.idx_qs[jid], model.nqs[jid]
        if nq == 1:
            q[iq] = value
        elif nq == 2:
            q[iq : iq + 2] = np.cos(value), np.sin(value)
    return q


@pytest.mark.parametrize(
    "name, joints, locked", [("tiago_pro", TIAGO_ARM, LOCKED), ("pr2", PR2_ARM, {})]
)
def test_reduced_chain_torques_equal_whole_robot_pinocchio(name, joints, locked):
    """The chain's inverse dynamics equals Pinocchio's RNEA of the whole URDF (locked at rest)."""
    chain = wb.models.load(name, joints=list(joints), locked=locked)
    assert chain.joint_names == joints
    model = pin.buildModelFromUrdf(str(urdf_path(name)))
    values = dict(chain.reduction.locked)
    assert all(values[k] == v for k, v in locked.items())
    rng = np.random.default_rng(3)
    lower = np.maximum(chain.lower, -np.pi)
    upper = np.minimum(chain.upper, np.pi)
    q = rng.uniform(lower, upper, size=(20, chain.n))
    dq, ddq = rng.normal(size=(2, 20, chain.n))
    tau = wb.inverse_dynamics(chain, q, dq, ddq)
    data = model.createData()
    index = [model.idx_vs[model.getJointId(j)] for j in joints]
    for k in range(20):
        v = np.zeros(model.nv)
        a = np.zeros(model.nv)
        v[index], a[index] = dq[k], ddq[k]
        full = pin.rnea(model, data, _full_configuration(model, chain, q[k], values), v, a)
        np.testing.assert_allclose(
            tau[k], full[index], rtol=0, atol=1e-9 * (1 + np.abs(full).max())
        )


def test_continuous_joints_have_no_position_limits():
    chain = wb.models.load("pr2", joints=list(PR2_ARM))
    continuous = [chain.joint_index(j) for j in ("r_forearm_roll_joint", "r_wrist_roll_joint")]
    assert np.all(np.isinf(chain.lower[continuous])) and np.all(np.isinf(chain.upper[continuous]))
    model = pin.buildModelFromUrdf(str(urdf_path("pr2")))
    jid = model.getJointId("r_elbow_flex_joint")
    assert (
        chain.lower[chain.joint_index("r_elbow_flex_joint")]
        == model.lowerPositionLimit[model.idx_qs[jid]]
    )


def test_mimic_joints_follow_their_locked_joint():
    """A locked gripper: its mimic joints are locked at multiplier * value + offset."""
    chain = wb.models.load("tiago_pro", joints=list(TIAGO_ARM), locked=LOCKED)
    values = dict(chain.reduction.locked)
    text = urdf_path("tiago_pro").read_text()
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text)
    followers = 0
    for joint in root.findall("joint"):
        mimic = joint.find("mimic")
        if mimic is not None and mimic.get("joint") == "gripper_left_finger_joint":
            expected = float(mimic.get("multiplier", "1")) * 0.4 + float(mimic.get("offset", "0"))
            assert values[joint.get("name")] == pytest.approx(expected, abs=1e-15)
            followers += 1
    assert followers >= 3


def test_written_whole_robot_is_the_calibrated_chain_and_keeps_the_rest(tmp_path):
    """Moved twists, tool and inertias reload to 1e-9; every other part of the robot stays."""
    chain = wb.models.load("tiago_pro", joints=list(TIAGO_ARM), locked=LOCKED)
    rng = np.random.default_rng(0)
    moved = chain.with_eta(rng.normal(scale=2e-3, size=6 * (chain.n + 1)))
    G = moved.inertias.copy()
    G[2] *= 1.2
    point = wb.inertia.phi_from_com(0.1, [0.01, 0.0, 0.02], np.zeros((3, 3)))  # 100 g more
    G[7] = wb.inertia.matrix_from_phi(moved.phi[7] + point)
    moved = replace(moved, inertias=G)
    out = write_urdf(moved, tmp_path / "tiago_pro.urdf")
    back = reload_urdf(moved, out)
    assert np.abs(back.twists - moved.twists).max() < 1e-9
    assert np.abs(back.tool_frame - moved.tool_frame).max() < 1e-9
    assert np.abs(back.phi - moved.phi).max() < 1e-9
    before = pin.buildModelFromUrdf(str(urdf_path("tiago_pro")))
    after = pin.buildModelFromUrdf(str(out))
    assert list(after.names) == list(before.names)
    # every link that is not carried by a calibrated joint sits where it was, with its inertia
    q = _full_configuration(before, chain, np.zeros(chain.n), dict(chain.reduction.locked))
    data_b, data_a = before.createData(), after.createData()
    pin.framesForwardKinematics(before, data_b, q)
    pin.framesForwardKinematics(after, data_a, q)
    carried = {before.getJointId(j) for j in TIAGO_ARM}
    subtree = {j for j in range(1, before.njoints) if set(before.supports[j]) & carried}
    checked = 0
    for fid, frame in enumerate(before.frames):
        if frame.type == pin.FrameType.BODY and frame.parentJoint not in subtree:
            other = after.getFrameId(frame.name, pin.FrameType.BODY)
            np.testing.assert_allclose(
                data_a.oMf[other].homogeneous, data_b.oMf[fid].homogeneous, atol=1e-12
            )
            checked += 1
    assert checked > 5
    for j in range(1, before.njoints):
        if j not in subtree:
            np.testing.assert_allclose(
                after.inertias[j].toDynamicParameters(),
                before.inertias[j].toDynamicParameters(),
                atol=1e-12,
            )


def test_floating_root_is_locked_and_named_when_not(tmp_path):
    urdf = tmp_path / "floating.urdf"
    urdf.write_text(
        """<robot name="r">
  <link name="world"/>
  <joint name="root" type="floating"><parent link="world"/><child link="base"/></joint>
  <link name="base"><inertial><mass value="5"/>
    <inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="wheel" type="continuous"><parent link="base"/><child link="w"/>
    <axis xyz="0 1 0"/></joint>
  <link name="w"><inertial><mass value="1"/>
    <inertia ixx="0.1" iyy="0.1" izz="0.1" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="arm"/>
    <origin xyz="0 0 0.5"/><axis xyz="0 0 1"/>
    <limit lower="-2" upper="2" effort="10" velocity="2"/></joint>
  <link name="arm"><inertial><origin xyz="0.2 0 0"/><mass value="2"/>
    <inertia ixx="0.01" iyy="0.02" izz="0.02" ixy="0" ixz="0" iyz="0"/></inertial></link>
</robot>
"""
    )
    with pytest.raises(wb.WorkbenchError, match=r"root.*name the joints"):
        wb.models.load(str(urdf))
    chain = load_robot(urdf, ["shoulder"])
    assert chain.joint_names == ("shoulder",)
    tau = wb.inverse_dynamics(chain, np.zeros((1, 1)), np.zeros((1, 1)), np.ones((1, 1)))
    assert tau[0, 0] == pytest.approx(0.02 + 2 * 0.2**2, rel=1e-12)  # Izz about the axis
    with pytest.raises(wb.WorkbenchError, match="no movable joint named 'elbow'"):
        load_robot(urdf, ["shoulder", "elbow"])
    with pytest.raises(wb.WorkbenchError, match="neutral configuration"):
        load_robot(urdf, ["shoulder"], {"root": 1.0})


def test_calibrate_cli_on_a_whole_robot_writes_the_whole_robot(tmp_path):
    """A log of the arm joints only calibrates the arm of the whole robot (CLI, exit 0)."""
    chain = wb.models.load("tiago_pro", joints=list(TIAGO_ARM))
    log, truth = simulate_log(
        chain, kind="kinematic", samples=300, perturb=1e-3, noise=1e-5, seed=2
    )
    path = write_log(tmp_path / "arm.csv", log)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "workbench.cli", "calibrate", "--model", "tiago_pro", "--log",
         str(path), "--kind", "kinematic", "--out", str(out), "--quiet"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    whole = pin.buildModelFromUrdf(str(out / "calibrated.urdf"))
    assert whole.njoints == pin.buildModelFromUrdf(str(urdf_path("tiago_pro"))).njoints
    back = wb.models.load(str(out / "calibrated.urdf"), joints=list(TIAGO_ARM))
    q = log.q  # the motion the log excites (random postures need an exciting log)
    tool = forward_kinematics(back, q)[:, :3, 3]
    true = forward_kinematics(truth.chain, q)[:, :3, 3]
    nominal = forward_kinematics(chain, q)[:, :3, 3]
    error = np.linalg.norm(tool - true, axis=1).max()
    assert error < 1e-4 < np.linalg.norm(nominal - true, axis=1).max()


def test_description_columns_name_the_missing_joints(tmp_path):
    chain = wb.models.load("tiago_pro", joints=list(TIAGO_ARM))
    log, _ = simulate_log(chain, kind="kinematic", samples=50, perturb=0.0, noise=0.0, seed=0)
    write_log(tmp_path / "arm.csv", log)
    (tmp_path / "arm.toml").write_text(
        '[positions]\nfile = "arm.csv"\ncolumns = ["q_torso_lift_joint", "q_arm_left_1_joint"]\n'
    )
    from workbench.recordings.log_files import read_log

    with pytest.raises(wb.WorkbenchError, match="expected 8, one per joint in the order torso"):
        read_log(tmp_path / "arm.toml", chain)


def _posture_recording(chain, truth, postures: int, seed: int = 0):
    """Joint states at ~100 Hz (jittered) moving between random postures held 1.5 s each,
    and a tool pose at ~120 Hz from the truth with 0.2 mm noise during the whole recording."""
    rng = np.random.default_rng(seed)
    lower, upper = np.maximum(chain.lower, -2.0), np.minimum(chain.upper, 2.0)
    targets = rng.uniform(lower + 0.2 * (upper - lower), upper - 0.2 * (upper - lower),
                          size=(postures, chain.n))  # fmt: skip
    hold, move = 1.5, 1.0
    period = hold + move

    def q_at(t):
        k = np.minimum((t // period).astype(int), postures - 1)
        phase = np.clip((t - k * period - hold) / move, 0.0, 1.0)
        nxt = targets[np.minimum(k + 1, postures - 1)]
        blend = (1 - np.cos(np.pi * phase)) / 2
        return targets[k] + blend[:, None] * (nxt - targets[k])

    duration = postures * period
    t_joints = np.arange(0, duration, 0.01) + rng.uniform(
        -0.002, 0.002, int(np.ceil(duration / 0.01))
    )
    t_joints = np.sort(t_joints)[1:]
    t_poses = np.arange(0.005, duration, 1 / 120)
    T = forward_kinematics(truth, q_at(t_poses))
    position = T[:, :3, 3] + rng.normal(scale=2e-4, size=(t_poses.size, 3))
    quaternion = wb.lie.matrix_to_quaternion(T[:, :3, :3])
    return 100.0 + t_joints, q_at(t_joints), 100.0 + t_poses, position, quaternion, targets


@pytest.mark.parametrize("storage", ["ros1", "mcap"])
def test_kinematic_calibration_from_a_bag_with_mocap_postures(tmp_path, storage):
    """Joint states and a /tf mocap stream in one bag: the 25 held postures are found, averaged,
    and calibrate the arm of the whole robot (position error below the nominal model's)."""
    from workbench.calibration.cross_validation import calibrate
    from workbench.calibration.problems.problem import Options
    from workbench.calibration.selection.validation import Folds
    from workbench.recordings.log_files import read_log
    from workbench.testing.bag_writer import JointStateStream, PoseStream, write_bag

    chain = wb.models.load("tiago_pro", joints=list(TIAGO_ARM))
    truth = simulate_log(chain, kind="kinematic", samples=10, perturb=2e-3, seed=4)[1].chain
    t, q, pose_t, position, quaternion, targets = _posture_recording(chain, truth, 25)
    bag = tmp_path / ("run.bag" if storage == "ros1" else "run_mcap")
    write_bag(bag, storage, [
        JointStateStream(t, list(TIAGO_ARM), position=q, shuffle_names=True),
        PoseStream("/tf", pose_t, position, quaternion, msgtype="TFMessage",
                   child_frame="gripper_marker", frame_id="base_footprint"),
    ])  # fmt: skip
    description = tmp_path / "mocap.toml"
    description.write_text(
        f"[model]\njoints = {list(TIAGO_ARM)!r}\n".replace("'", '"')
        + f'[positions]\nfile = "{bag.name}"\n'
        f'[[markers]]\nname = "gripper"\nfile = "{bag.name}"\ntopic = "/tf"\n'
        f'child_frame = "gripper_marker"\nframe = "{chain.tool_name}"\n'
        "[postures]\nspeed = 0.01\nmin_duration = 0.8\n"
    )
    log = read_log(description, chain, require=("position",))
    assert log.clock["postures"]["found"] == 25 == len(log)
    np.testing.assert_allclose(np.sort(log.q, axis=0), np.sort(targets, axis=0), atol=1e-9)
    report = calibrate(chain, "kinematic", log, Folds(5), Options())
    held = report.summary["heldout"]
    assert held["calibrated"]["position_rms_m"] < 0.5 * held["nominal"]["position_rms_m"]


ARMS = {
    "baxter": ["left_s0", "left_s1", "left_e0", "left_e1", "left_w0", "left_w1", "left_w2"],
    "talos_full": ["torso_1_joint", "torso_2_joint", *(f"arm_left_{i}_joint" for i in range(1, 8))],
    "tiago": list(("torso_lift_joint", *(f"arm_{i}_joint" for i in range(1, 8)))),
    "pr2": list(PR2_ARM),
}


@pytest.mark.parametrize("name", sorted(ARMS))
def test_whole_robots_write_back_exactly(tmp_path, name):
    """example-robot-data robots (mimic grippers, continuous joints, wheels, heads): moved
    twists, tool and a changed inertia reload equal to 1e-12, with every joint of the robot."""
    chain = wb.models.load(name, joints=ARMS[name])
    rng = np.random.default_rng(1)
    moved = chain.with_eta(rng.normal(scale=2e-3, size=6 * (chain.n + 1)))
    G = moved.inertias.copy()
    G[-1] *= 1.1
    moved = replace(moved, inertias=G)
    back = reload_urdf(moved, write_urdf(moved, tmp_path / f"{name}.urdf"))
    for attr in ("twists", "phi", "tool_frame"):
        assert np.abs(getattr(back, attr) - getattr(moved, attr)).max() < 1e-12, attr
    whole = pin.buildModelFromUrdf(str(tmp_path / f"{name}.urdf"))
    assert list(whole.names) == list(pin.buildModelFromUrdf(str(urdf_path(name))).names)


def test_locked_values_outside_the_limits_are_refused():
    with pytest.raises(wb.WorkbenchError, match=r"head_2_joint = 5 is outside the joint's limits"):
        wb.models.load("tiago", joints=ARMS["tiago"], locked={"head_2_joint": 5.0})


def test_a_bag_given_directly_calibrates_the_joints_it_moves(tmp_path):
    """/joint_states of a whole robot: the arm moves, head and wheels stand still (the head at
    -0.3): the arm is calibrated, the others are locked where the bag holds them."""
    from workbench.recordings.log_files import logged_joints
    from workbench.testing.bag_writer import write_joint_states

    arm = ARMS["tiago"]
    chain = wb.models.load("tiago", joints=arm)
    log, _ = simulate_log(chain, kind="dynamic", samples=200, perturb=0.0, seed=3)
    still = ["head_1_joint", "head_2_joint", "wheel_left_joint"]
    q = np.column_stack([log.q, np.tile([0.1, -0.3, 0.0], (len(log), 1))])
    bag = write_joint_states(tmp_path / "run.bag", "ros1", 100.0 + log.t, [*arm, *still],
                             position=q)  # fmt: skip
    joints, locked, held = logged_joints(bag)
    assert joints == arm and locked == {}
    assert held == pytest.approx({"head_1_joint": 0.1, "head_2_joint": -0.3, "wheel_left_joint": 0})
    reduced = wb.models.load("tiago", joints=joints, held=held | {"not_in_tiago": 1.0})
    assert dict(reduced.reduction.locked)["head_2_joint"] == pytest.approx(-0.3)


def test_an_identified_body_lighter_than_its_locked_hand_is_folded_into_its_link(tmp_path):
    """The last arm link identified at 30 % of its nominal body (arm link, hand and locked
    fingers): its own URDF link cannot carry the change, so the hand's links are folded into
    it, named in a warning; the written robot is the identified model."""
    chain = wb.models.load("tiago_pro", joints=list(TIAGO_ARM), locked=LOCKED)
    G = chain.inertias.copy()
    G[7] *= 0.3  # a physical body, lighter than the links locked to the arm's last link
    light = replace(chain, inertias=G)
    with pytest.warns(wb.WorkbenchWarning, match="gripper_left_base_link.* into 'arm_left_7_link'"):
        out = write_urdf(light, tmp_path / "light.urdf")
    back = reload_urdf(light, out)
    assert np.abs(back.phi - light.phi).max() < 1e-12
    assert np.abs(back.twists - light.twists).max() < 1e-12


def test_columns_list_of_joint_names_names_the_calibrated_joints(tmp_path):
    """A description whose ``columns`` list names 8 of tiago's 48 joints (its columns called
    by the joints, in another order than the model's) calibrates those joints, the others
    locked: the calibrated whole URDF's arm (Pinocchio) predicts the truth's tool."""
    tiago_arm = ("torso_lift_joint", *(f"arm_{i}_joint" for i in range(1, 8)))
    assert len(wb.models.movable_joints("tiago")) == 48
    chain = wb.models.load("tiago", joints=list(tiago_arm))
    log, truth = simulate_log(
        chain, kind="kinematic", samples=300, perturb=1e-3, noise=1e-5, seed=4
    )
    order = list(reversed(tiago_arm))
    table = np.column_stack([log.q[:, [tiago_arm.index(j) for j in order]], log.position])
    np.savetxt(tmp_path / "arm.csv", table, delimiter=",", comments="",
               header=",".join([*order, "x", "y", "z"]))  # fmt: skip
    listed = ", ".join(f'"{j}"' for j in order)
    (tmp_path / "arm.toml").write_text(
        f'[positions]\nfile = "arm.csv"\ncolumns = [{listed}]\n\n'
        '[[markers]]\nposition = ["x", "y", "z"]\n'
    )
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "workbench.cli", "calibrate", "--model", "tiago", "--log",
         str(tmp_path / "arm.toml"), "--kind", "kinematic", "--parameters", "twists", "--out",
         str(out), "--quiet"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    back = wb.models.load(str(out / "calibrated.urdf"), joints=list(tiago_arm))
    assert back.joint_names == tiago_arm
    model = pin.buildModelFromUrdf(str(out / "calibrated.urdf"))
    tool = np.array([pin_tool(model, back, q) for q in log.q[::25]])
    true = forward_kinematics(truth.chain, log.q[::25])[:, :3, 3]
    nominal = forward_kinematics(chain, log.q[::25])[:, :3, 3]
    assert np.linalg.norm(tool - true, axis=1).max() < 1e-4
    assert np.linalg.norm(nominal - true, axis=1).max() > 1e-3


def pin_tool(model, chain: wb.Chain, q_chain: np.ndarray) -> np.ndarray:
    """The tool position of a whole robot's Pinocchio model, the chain's joints at q_chain and
    the others at zero (as the log locked them)."""
    data = model.createData()
    q = _full_configuration(model, chain, q_chain, {})
    pin.framesForwardKinematics(model, data, q)
    return data.oMf[model.getFrameId(chain.tool_name)].translation.copy()
