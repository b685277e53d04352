"""A whole robot the calibration was not written around (example-robot-data's TIAGo: wheels,
torso, arm, hand, head), logged the way a robot logs: its failures, one test each.

References: Pinocchio's inverse dynamics of the whole URDF (the truth the logs are
generated from), the stamps and degradations the tests write themselves.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

from workbench.calibration.checks.fit_plausibility import absurd_parameters, check_fit
from workbench.calibration.cross_validation import calibrate
from workbench.calibration.selection.validation import Folds
from workbench.errors import ImplausibleFit, WorkbenchError, WorkbenchWarning
from workbench.models import load, urdf_path
from workbench.recordings.log_files import read_log
from workbench.recordings.tables import write_table
from workbench.testing.bag_writer import JointStateStream, PoseStream, write_bag

ARM = tuple(f"arm_{i}_joint" for i in range(1, 8))
HELD = {"torso_lift_joint": 0.15, "head_1_joint": 0.2, "head_2_joint": -0.3}
EPOCH = 1732540000.0  # s: stamps as a robot's clock gives them
RATE = 200.0


@pytest.fixture(scope="module")
def tiago_arm():
    return load("tiago", joints=list(ARM), locked=HELD)


def whole_robot_log(t: np.ndarray, seed: int = 0):
    """Arm on a sum of sines, torso and head held, wheels turning at 3 rad/s: (names, q, tau)
    of every joint of the whole URDF, tau from Pinocchio's RNEA, viscous friction and noise."""
    model = pin.buildModelFromUrdf(str(urdf_path("tiago")))
    data = model.createData()
    names = list(model.names)[1:]
    rng = np.random.default_rng(seed)
    q, dq, ddq = (np.zeros((t.size, len(names))) for _ in range(3))
    for name, value in HELD.items():
        q[:, names.index(name)] = value
    for name in ARM:
        j, iq = names.index(name), model.joints[model.getJointId(name)].idx_q
        lo, hi = model.lowerPositionLimit[iq], model.upperPositionLimit[iq]
        a, w, b = 0.2 * (hi - lo), 2 * np.pi * rng.uniform(0.1, 0.4), rng.uniform(0, 2 * np.pi)
        q[:, j] = 0.5 * (lo + hi) + a * np.sin(w * t + b)
        dq[:, j], ddq[:, j] = a * w * np.cos(w * t + b), -a * w**2 * np.sin(w * t + b)
    for name in ("wheel_left_joint", "wheel_right_joint"):
        q[:, names.index(name)], dq[:, names.index(name)] = 3.0 * t, 3.0
    tau = np.empty_like(q)
    for k in range(t.size):
        config = pin.neutral(model)
        for j, name in enumerate(names):
            joint = model.joints[model.getJointId(name)]
            angle = q[k, j]
            config[joint.idx_q : joint.idx_q + joint.nq] = (
                (np.cos(angle), np.sin(angle)) if joint.nq == 2 else angle
            )
        tau[k] = pin.rnea(model, data, config, dq[k], ddq[k]) + 0.5 * dq[k]
    tau += rng.normal(scale=0.05, size=tau.shape)
    return names, q, tau


def csv_description(directory, t, names, q, tau, name="log.csv"):
    columns = {"t": t} | {f"q_{n}": q[:, i] for i, n in enumerate(names)}
    columns |= {f"tau_{n}": tau[:, i] for i, n in enumerate(names)}
    write_table(directory / name, columns)
    listed, q_columns, tau_columns = (
        ", ".join(f'"{prefix}{n}"' for n in ARM) for prefix in ("", "q_", "tau_")
    )
    path = directory / f"{name}.toml"
    path.write_text(
        f"[model]\njoints = [{listed}]\n"
        f'[time]\nfile = "{name}"\ncolumn = "t"\n'
        f'[positions]\nfile = "{name}"\ncolumns = [{q_columns}]\n'
        f'[torques]\nfile = "{name}"\ncolumns = [{tau_columns}]\n'
    )
    return path


def test_a_time_column_coarser_than_the_sample_rate_is_refused_naming_it(tmp_path, tiago_arm):
    """Epoch stamps written with ten significant digits hold whole seconds: 200 samples share
    each stamp. Merging them as duplicates left 2 samples (an 'underdetermined' fit far
    downstream); the clock must say the time column is coarser than the samples."""
    t = np.arange(2000) / RATE
    names, q, tau = whole_robot_log(t)
    path = csv_description(tmp_path, np.floor(EPOCH + t), names, q, tau)
    with pytest.raises(WorkbenchError, match=r"log\.csv, column 't'.*coarser") as error:
        read_log(path, tiago_arm, require=("tau",))
    assert "\n" not in str(error.value)


def wheels_bag(directory, epoch: float, split: bool = False):
    """A bag of the whole robot with the wheels at constant speed, the chain of the joints it
    moves (as ``--log run.mcap`` without a description calibrates) and its log. ``split``:
    the arm's joint states and the others' in their own messages, the others' at a quarter
    of the rate and 1.3 ms later (two controllers publishing)."""
    t = np.arange(1200) / RATE
    names, q, tau = whole_robot_log(t)
    streams = [JointStateStream(epoch + t, names, q, effort=tau)]
    if split:
        arm = [names.index(n) for n in ARM]
        rest = [j for j in range(len(names)) if j not in arm]
        streams = [
            JointStateStream(epoch + t, list(ARM), q[:, arm], effort=tau[:, arm]),
            JointStateStream(
                epoch + t[2::4] + 0.0013, [names[j] for j in rest], q[2::4][:, rest],
                effort=tau[2::4][:, rest],
            ),
        ]  # fmt: skip
    bag = write_bag(directory / "run.mcap", "mcap", streams)
    moving = [n for i, n in enumerate(names) if np.ptp(q[:, i]) > 0]
    chain = load("tiago", joints=moving, locked=HELD)
    return chain, read_log(bag, chain, require=("tau",))


@pytest.mark.parametrize(
    "epoch, validation, split",
    [(0.0, None, False), (EPOCH, None, False), (EPOCH, Folds(3), False), (EPOCH, None, True)],
)
def test_wheels_at_almost_constant_speed_are_the_cause_of_the_implausible_fit(
    tmp_path, epoch, validation, split
):
    """Wheel speeds that vary by 0.01 % (filtered) to 0.07 % (epoch stamps resampled); the fit
    may give the wheels inertias of 28 kg m^2. The diagnosis was 'duplicated column' (both
    wheels have the same positions: driving straight); the cause, when there is one, is
    wheels that never accelerate."""
    chain, log = wheels_bag(tmp_path, epoch, split)
    report = calibrate(chain, "dynamic", log, validation)
    absurd = absurd_parameters(chain, report.chain)
    if not absurd:  # a plausible fit: the wheels' parameters fit noise, and a warning says so
        with pytest.warns(WorkbenchWarning, match="wheel_left_joint' turns at a constant speed"):
            check_fit(log, chain, report.chain)
        return
    assert any("wheel" in symptom for symptom in absurd)
    with pytest.raises(ImplausibleFit, match="constant speed") as error:
        check_fit(log, chain, report.chain)
    assert "wheel_left_joint" in str(error.value) and "wheel_right_joint" in str(error.value)
    assert "duplicated column" not in str(error.value)


def test_export_puts_a_whole_robot_calibration_s_drive_terms_on_its_calibrated_joints(tmp_path):
    """A whole robot's calibrated.drives.toml numbers the calibrated joints (fv1 = arm_1_joint);
    export applied it to the whole robot's first joints (torso_lift_joint got arm_1's friction)
    and refused its Stribeck speeds (shape 7, expected 48). Read back by MuJoCo."""
    import json
    import re
    import shutil
    import subprocess
    import sys

    import mujoco

    from workbench.identification.drives import Drives, drive_file_text

    results = tmp_path / "results"
    results.mkdir()
    shutil.copy(urdf_path("tiago"), results / "calibrated.urdf")
    drives = Drives(len(ARM), ("friction", "stribeck"), stribeck_speed=np.full(len(ARM), 0.1))

    def value(name: str) -> float:
        kind, j = re.fullmatch(r"([a-z]+)(\d+)", name).groups()
        return {"fv": 0.5 + int(j), "fs": 0.1 * int(j), "fst": 0.2}[kind]

    values = np.array([value(name) for name in drives.names])
    (results / "calibrated.drives.toml").write_text(drive_file_text(drives, values))
    (results / "summary.json").write_text(json.dumps({"joint_names": list(ARM)}))
    out = tmp_path / "tiago.xml"
    done = subprocess.run(
        [sys.executable, "-m", "workbench.cli", "export", str(results), "--mjcf", str(out)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    model = mujoco.MjModel.from_xml_path(str(out))
    for j, name in enumerate(ARM, start=1):
        dof = model.jnt_dofadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name)]
        assert model.dof_damping[dof] == pytest.approx(0.5 + j)
        assert model.dof_frictionloss[dof] == pytest.approx(0.1 * j)
    torso = "torso_lift_joint"
    dof = model.jnt_dofadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, torso)]
    urdf = pin.buildModelFromUrdf(str(urdf_path("tiago")))
    assert model.dof_damping[dof] == pytest.approx(
        urdf.damping[urdf.idx_vs[urdf.getJointId(torso)]]
    )


def test_excite_designs_for_the_joints_a_problem_file_names_on_a_whole_robot(tmp_path):
    """``workbench excite --model tiago`` designed for all 48 joints (hand, wheels) and ran
    for minutes; a problem file's [model] joints (the others locked at [model.locked] or
    zero, as a log description's) makes it the arm's design."""
    from workbench.dynamics.kinematics import forward_kinematics
    from workbench.excitation.problem import model_joints, read_problem

    listed = ", ".join(f'"{n}"' for n in ARM)
    path = tmp_path / "arm.toml"
    path.write_text(
        f'[model]\njoints = [{listed}]\nterms = ["friction"]\n[model.locked]\n'
        "torso_lift_joint = 0.15\nhead_2_joint = -0.3\n"
    )
    joints, locked = model_joints(path)
    chain = load("tiago", joints=joints, locked=locked)
    assert chain.joint_names == ARM
    assert read_problem(path, chain, "dynamic").model.terms == ("friction",)
    reference = pin.buildModelFromUrdf(str(urdf_path("tiago")))
    config = pin.neutral(reference)
    config[reference.idx_qs[reference.getJointId("torso_lift_joint")]] = 0.15
    config[reference.idx_qs[reference.getJointId("head_2_joint")]] = -0.3
    data = reference.createData()
    pin.framesForwardKinematics(reference, data, config)
    tool = data.oMf[reference.getFrameId(chain.tool_name)].homogeneous
    assert np.allclose(forward_kinematics(chain, np.zeros(len(ARM))), tool, atol=1e-9)
    joints_only = tmp_path / "postures.toml"  # a kinematic problem reads [model] joints too
    joints_only.write_text(f"[model]\njoints = [{listed}]\n[postures]\ncount = 20\n")
    assert model_joints(joints_only) == (list(ARM), {})
    assert read_problem(joints_only, chain, "kinematic").postures.count == 20


def test_a_rank_deficient_fit_names_the_joints_of_the_parameters_it_cannot_separate():
    """Two wheels at exactly constant speed: fv and fs of each are one column. The refusal
    named 'fv8, fs8' of a 9-joint chain numbered from 1; it names the joints too."""
    from workbench.identification.least_squares import check_determined
    from workbench.identification.torque_model import BaseParameters

    rng = np.random.default_rng(0)
    names = ("Izz1", "fv1", "fs1", "fv2", "fs2")
    A = rng.normal(size=(50, 5))
    A[:, 4] = A[:, 3]  # fs2 = fv2: the second joint turns at one speed
    base = BaseParameters(np.arange(5), np.eye(5), names)
    with pytest.raises(WorkbenchError, match=r"fv2 \(joint 'wheel_left_joint'\)") as error:
        check_determined(A, 50, np.ones(5), base, ("arm_1_joint", "wheel_left_joint"))
    assert "fs2 (joint 'wheel_left_joint')" in str(error.value)


def test_a_whole_robot_calibration_s_drive_file_gives_the_nominal_of_other_joint_choices(
    tmp_path,
):
    """Calibrating again from a whole robot's calibrated.urdf, its calibrated.drives.toml
    (arm_1..arm_7 numbered 1..7) was read by number for the joints now calibrated: torso and
    arm took arm_1..arm_7's friction shifted by one joint, six arm joints were refused."""
    import json

    from workbench.identification.drives import Drives, drive_file_text, nominal_drive_values

    drives = Drives(len(ARM), ("friction",))
    values = np.array([10.0 * (j // 2 + 1) + j % 2 for j in range(len(drives.names))])
    (tmp_path / "calibrated.drives.toml").write_text(drive_file_text(drives, values))
    (tmp_path / "summary.json").write_text(json.dumps({"joint_names": list(ARM)}))
    torso_and_arm = ["torso_lift_joint", *ARM]
    nominal = nominal_drive_values(tmp_path / "calibrated.urdf", torso_and_arm)
    for j in range(len(ARM)):  # fv1 = 10, fs1 = 11 of arm_1, now joint 2
        assert nominal[f"fv{j + 2}"] == 10.0 * (j + 1)
        assert nominal[f"fs{j + 2}"] == 10.0 * (j + 1) + 1
    assert "fv1" not in nominal and "fs1" not in nominal  # the torso: not in the file
    six = nominal_drive_values(tmp_path / "calibrated.urdf", list(ARM[1:]))
    assert six == {
        f"{p}{j}": 10.0 * (j + 1) + (p == "fs") for j in range(1, 7) for p in ("fv", "fs")
    }


def test_mocap_poses_lost_while_tracking_are_left_out_of_the_standstill_postures(tmp_path):
    """A motion-capture topic whose marker is lost now and then (NaN positions, as trackers
    publish): the read stopped at 'pose position contains nan at sample 0', naming no file or
    topic; the lost poses are left out (a warning counts them) and every posture keeps the
    tracked ones."""
    model = pin.buildModelFromUrdf(str(urdf_path("tiago")))
    data = model.createData()
    names = list(model.names)[1:]
    rng = np.random.default_rng(4)
    iq = [model.idx_qs[model.getJointId(n)] for n in ARM]
    lo, hi = model.lowerPositionLimit[iq], model.upperPositionLimit[iq]
    postures, hold, move = rng.uniform(0.8 * lo + 0.2 * hi, 0.2 * lo + 0.8 * hi, (8, 7)), 1.0, 0.5
    t = np.arange(int(len(postures) * (hold + move) * 100)) / 100.0
    k, r = np.divmod(t, hold + move)
    k = k.astype(int)
    s = np.clip((r - hold) / move, 0.0, 1.0)
    arm = postures[k] + s[:, None] * (postures[np.minimum(k + 1, len(postures) - 1)] - postures[k])
    q = np.zeros((t.size, len(names)))
    q[:, [names.index(n) for n in ARM]] = arm

    def tool(row: np.ndarray) -> pin.SE3:
        config = pin.neutral(model)
        for j, name in enumerate(names):
            joint = model.joints[model.getJointId(name)]
            angle = row[j]
            config[joint.idx_q : joint.idx_q + joint.nq] = (
                (np.cos(angle), np.sin(angle)) if joint.nq == 2 else angle
            )
        pin.framesForwardKinematics(model, data, config)
        return data.oMf[model.getFrameId("arm_tool_link")].copy()

    poses = [tool(row) for row in q[::2]]
    position = np.array([pose.translation for pose in poses])
    quaternion = np.array([pin.Quaternion(pose.rotation).coeffs() for pose in poses])
    lost = np.arange(len(position)) % 37 < 4
    position[lost] = np.nan
    bag = tmp_path / "mocap.mcap"
    write_bag(bag, "mcap", [
        JointStateStream(EPOCH + t, names, q),
        PoseStream("/mocap", EPOCH + t[::2], position, quaternion),
    ])  # fmt: skip
    listed = ", ".join(f'"{n}"' for n in ARM)
    path = tmp_path / "mocap.toml"
    path.write_text(
        f'[model]\njoints = [{listed}]\n[positions]\nfile = "mocap.mcap"\n'
        '[[markers]]\nname = "tool"\nfile = "mocap.mcap"\ntopic = "/mocap"\n'
        'frame = "arm_tool_link"\n[postures]\nmatch = "standstill"\n'
    )
    chain = load("tiago", joints=list(ARM))
    with pytest.warns(WorkbenchWarning, match=rf"mocap\.mcap: topic /mocap: {lost.sum()} of"):
        log = read_log(path, chain)
    (marker,) = log.markers
    held = np.zeros((len(postures), len(names)))
    held[:, [names.index(n) for n in ARM]] = postures
    expected = np.array([tool(row).translation for row in held])
    assert np.allclose(marker.position, expected, atol=1e-9)


@pytest.mark.parametrize("loss", ["linear", "huber"])
def test_a_wheel_that_never_accelerates_is_named_by_its_joint(loss):
    """A wheel at exactly constant speed: its inertia column is zero. The refusal names
    'Izz2 (joint 'wheel_left_joint')', whatever the loss."""
    from workbench.calibration.problems.problem import Options
    from workbench.recordings.log import Log

    chain = load("tiago", joints=["arm_1_joint", "wheel_left_joint"])
    t = np.arange(2000) / 100.0
    q = np.column_stack([np.sin(t), 3.0 * t])
    dq = np.column_stack([np.cos(t), np.full_like(t, 3.0)])
    ddq = np.column_stack([-np.sin(t), np.zeros_like(t)])
    tau = np.random.default_rng(0).normal(size=q.shape)
    log = Log(t, q, dq, ddq, tau, joint_names=tuple(chain.joint_names))
    with pytest.raises(WorkbenchError, match=r"Izz2 \(joint 'wheel_left_joint'\)"):
        calibrate(chain, "dynamic", log, None, Options(loss=loss))


def test_a_head_servo_dithering_by_one_encoder_count_is_held_still(tmp_path):
    """A bag given without a description calibrates the joints it moves; a head servo that
    holds its position within one count of its 12-bit encoder (1.5 mrad) was taken for a
    moving joint, calibrated, and the fit failed with heads of 24 kg m^2 ('likely cause:
    unknown'). It is held still, at its median."""
    from workbench.recordings.log_files import logged_joints

    t = np.arange(1200) / RATE
    names, q, tau = whole_robot_log(t)
    count = 2 * np.pi / 4096
    rng = np.random.default_rng(1)
    for name in ("head_1_joint", "head_2_joint"):
        j = names.index(name)
        q[:, j] = (np.round(q[:, j] / count) + rng.integers(-1, 2, t.size)) * count
    bag = write_bag(tmp_path / "run.mcap", "mcap", [JointStateStream(t, names, q, effort=tau)])
    joints, _, held = logged_joints(bag)
    assert "head_1_joint" not in joints and "head_2_joint" not in joints
    for name in ("head_1_joint", "head_2_joint"):
        assert held[name] == pytest.approx(np.median(q[:, names.index(name)]), abs=1e-12)
    assert set(ARM) <= set(joints)
