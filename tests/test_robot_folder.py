"""Closed chains of example-parallel-robots folders, against Pinocchio 4's constraint models.

The reference is built here from the folder itself, the way the upstream
loader builds it: Pinocchio's URDF parser and one ``RigidConstraintModel``
(CONTACT_6D / CONTACT_3D, LOCAL) per closed_loop pair between the frames'
parent joints at the frames' placements. Pinocchio's constraint forward
dynamics gives the accelerations under random motor torques at a closed
state; the motor torques the project computes from that state must be those
torques, and equal the tree's RNEA projected on the motor velocities the
constraint Jacobian allows.
"""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
import yaml

from workbench import closed_chains
from workbench.closed_chains.dynamics import coordinate_forces, forward_dynamics, motor_torques
from workbench.closed_chains.kinematics import mobility, residual, solve_passive
from workbench.closed_chains.robot_folder import closed_configuration, read_folder
from workbench.closed_chains.task_space import reach_configuration
from workbench.errors import WorkbenchError, WorkbenchWarning
from workbench.resources import shipped
from workbench.testing.pinocchio_reference import configuration

FOLDERS = shipped("models") / "parallel_robots"
NAMES = ("5bar_linkage", "robot_delta", "cassie_like", "5bar_linkage_iso3d", "5bar_linkage_iso6d")
# mobility and motors: the folder's README (idle motions)
MOBILITY = {"5bar_linkage": 3, "robot_delta": 5, "cassie_like": 7, "5bar_linkage_iso3d": 2,
            "5bar_linkage_iso6d": 2}  # fmt: skip


def pinocchio_reference(folder: Path):
    """Pinocchio model, data, constraint models and datas of a folder (upstream's rule)."""
    model = pin.buildModelFromUrdf(str(folder / "robot.urdf"))
    spec = yaml.safe_load((folder / "robot.yaml").read_text())
    constraints = []
    for (a, b), kind in zip(spec["closed_loop"], spec["type"], strict=True):
        fa, fb = model.frames[model.getFrameId(a)], model.frames[model.getFrameId(b)]
        contact = pin.ContactType.CONTACT_6D if kind == "6d" else pin.ContactType.CONTACT_3D
        constraints.append(
            pin.RigidConstraintModel(contact, model, fa.parentJoint, fa.placement,
                                     fb.parentJoint, fb.placement, pin.ReferenceFrame.LOCAL)
        )  # fmt: skip
    datas = pin.StdVec_RigidConstraintData([c.createData() for c in constraints])
    constraints = pin.StdVec_RigidConstraintModel(constraints)
    return model, model.createData(), constraints, datas, spec["name_mot"]


def constrained_state(chain, model, data, constraints, datas, rng):
    """A closed state moved off home, velocities in null(J_c), Pinocchio's accelerations
    under random motor torques; and the reference motor torques (RNEA projected)."""
    move = 0.05 * rng.standard_normal(len(chain.active))
    q = solve_passive(chain, chain.home[chain.active] + move, guess=chain.home)
    pin.initConstraintDynamics(model, data, constraints, datas)
    settings = pin.ProximalSettings(1e-14, 1e-10, 200)
    # a first solve places the constraint frames at q (a 3d closure's Jacobian depends on it)
    zero = np.zeros(model.nv)
    pin.constraintDynamics(model, data, q, zero, zero, constraints, datas, settings)
    J = pin.getConstraintsJacobian(model, data, constraints, datas)
    null = np.linalg.svd(J)[2][np.linalg.matrix_rank(J, 1e-9) :].T
    dq = null @ rng.standard_normal(null.shape[1])
    motors = [model.joints[model.getJointId(m)].idx_v for m in chain.actuated]
    tau_motors = rng.standard_normal(len(motors)) * max(
        1.0, np.abs(pin.rnea(model, data, q, 0 * q, 0 * q)).max()
    )
    tau = np.zeros(model.nv)
    tau[motors] = tau_motors
    ddq = pin.constraintDynamics(model, data, q, dq, tau, constraints, datas, settings)
    # S: unit motor velocities completed (least squares) in null(J_c); RNEA projected on it
    S = null @ np.linalg.pinv(null[motors])
    reference = S.T @ pin.rnea(model, data, q, dq, ddq)
    return q, dq, ddq, tau_motors, reference


@pytest.fixture(scope="module", params=NAMES)
def folder(request):
    path = FOLDERS / request.param
    return request.param, path, closed_chains.load(path / "robot.yaml")


def test_read_as_closed_chains(folder):
    name, path, chain = folder
    model = pin.buildModelFromUrdf(str(path / "robot.urdf"))
    assert chain.joint_names == tuple(model.names[1:])
    assert chain.actuated == tuple(yaml.safe_load((path / "robot.yaml").read_text())["name_mot"])
    assert mobility(chain) == MOBILITY[name] == len(chain.actuated) + len(chain.idle)
    assert np.abs(residual(chain, chain.home)).max() <= 1e-10
    # closed by Pinocchio's measure too: the constraint frames coincide (6d) or their origins
    data = model.createData()
    pin.framesForwardKinematics(model, data, chain.home)
    spec = yaml.safe_load((path / "robot.yaml").read_text())
    for (a, b), kind in zip(spec["closed_loop"], spec["type"], strict=True):
        A, B = data.oMf[model.getFrameId(a)], data.oMf[model.getFrameId(b)]
        error = pin.log6(A.actInv(B)).vector if kind == "6d" else A.translation - B.translation
        assert np.abs(error).max() < 1e-9
    # no position limit where <limit> has no lower/upper; placeholder efforts not read
    for joint in ET.parse(path / "robot.urdf").getroot().iter("joint"):
        if joint.get("name") in chain.joint_names:
            i = chain.joint_names.index(joint.get("name"))
            upper = joint.find("limit").get("upper")
            assert chain.tree.upper[i] == (np.inf if upper is None else float(upper))
            assert chain.tree.lower[i] <= chain.home[i] <= chain.tree.upper[i]
    assert np.all(np.isinf(chain.tree.effort_limit))


def test_the_default_tool_is_no_closure_frame(folder):
    """Without --tool the tool is the last frame no closure names (a closure frame as the
    tool would let the tool's eta block move the closure): not a closed_loop name, the child
    link of such a joint, or the fixed joint of such a link, read here from the URDF."""
    _, path, chain = folder
    spec = yaml.safe_load((path / "robot.yaml").read_text())
    joints = {j.get("name"): j.find("child").get("link")
              for j in ET.parse(path / "robot.urdf").getroot().iter("joint")}  # fmt: skip
    closure = {frame for pair in spec["closed_loop"] for frame in pair}
    closure |= {joints[f] for f in closure if f in joints}
    closure |= {j for j, child in joints.items() if child in closure}
    assert chain.tree.tool_name not in closure


def test_motor_torques_and_forward_dynamics_equal_pinocchio(folder):
    name, path, chain = folder
    model, data, constraints, datas, _ = pinocchio_reference(path)
    rng = np.random.default_rng(7)
    for _ in range(3):
        q, dq, ddq, tau_motors, reference = constrained_state(chain, model, data, constraints,
                                                               datas, rng)  # fmt: skip
        scale = np.abs(reference).max()
        # Pinocchio's constraint dynamics checks the reference: its torques come back
        assert np.abs(reference - tau_motors).max() <= 1e-8 * scale
        tau = motor_torques(chain, q, dq, ddq)
        assert np.abs(tau - reference).max() <= 1e-8 * scale, name
        _, ddq_project = forward_dynamics(chain, q, dq[chain.active], tau_motors)
        assert np.abs(ddq_project - ddq).max() <= 1e-8 * max(1.0, np.abs(ddq).max()), name


# Condition number of the reduced inertia N^T M N at the states of
# test_forward_dynamics_and_the_conditioning_of_idle_motions (largest of three).
CONDITIONING = {"5bar_linkage": 5.0e2, "robot_delta": 7.2e5, "cassie_like": 2.4e6,
                "5bar_linkage_iso3d": 5.4, "5bar_linkage_iso6d": 6.8}  # fmt: skip


def test_forward_dynamics_and_the_conditioning_of_idle_motions(folder):
    """Forward dynamics against Pinocchio's constraintDynamics: what is well-defined equal.

    With M Pinocchio's mass matrix (crba) and N an orthonormal basis of the null space
    of Pinocchio's constraint Jacobian J_c, the reduced inertia N^T M N has condition
    number kappa (CONDITIONING, checked here to a factor 2): 5.0e2 for 5bar_linkage,
    7.2e5 for robot_delta (the three rods spinning between ball joints; in its motor and
    idle coordinates S^T M S has eigenvalues 3.3e-11 to 8.6e-5 kg m^2, 2.6e6), 2.4e6 for
    cassie_like (two rods); 5.4 and 6.8 for the iso five-bars
    (no idle motion).
    A solver meeting the equations of motion to a relative force error eps may move the
    accelerations along the light idle motions by about kappa eps; constraintDynamics'
    proximal iterations (mu 1e-10) stop at such an eps (robot_delta's idle accelerations
    move by 1.8e-8 from mu 1e-10 to 1.8e-6 with mu 1e-12, its motors' by 6e-12). So:

    * the motors' accelerations are equal to 1e-8 (relative to max(1, |ddq|));
    * the equations of motion: our forces on the independent coordinates at Pinocchio's
      ddq are Pinocchio's motor torques and zero on every idle joint, to 1e-9 of the
      torques (a force residual, well-conditioned however light the rods);
    * ours meets the closures at acceleration level as Pinocchio states them,
      J_c ddq + gamma = 0, where Pinocchio's does: J_c (ddq_ours - ddq_pinocchio) = 0
      to 1e-8 (the drift gamma, the same for both, cancels);
    * all accelerations are equal to 1e-8 (measured 4e-9 on robot_delta, 5e-13 on the
      other two; on other states of robot_delta 1.8e-8, the benchmark's figure).

    lcaba is not compared here: with velocities its accelerations miss the closures at
    acceleration level by 1e-2..2e-1 on the three folders, also on the well-conditioned
    5bar_linkage (BENCHMARKS.md).
    """
    name, path, chain = folder
    model, data, constraints, datas, _ = pinocchio_reference(path)
    rng = np.random.default_rng(11)
    a = len(chain.actuated)
    worst_kappa = 0.0
    for _ in range(3):
        q, dq, ddq, tau_motors, _ = constrained_state(chain, model, data, constraints, datas,
                                                      rng)  # fmt: skip
        J = pin.getConstraintsJacobian(model, data, constraints, datas)
        null = np.linalg.svd(J)[2][np.linalg.matrix_rank(J, 1e-9) :].T
        M = pin.crba(model, data, q)
        M = np.triu(M) + np.triu(M, 1).T
        worst_kappa = max(worst_kappa, np.linalg.cond(null.T @ M @ null))
        _, ours = forward_dynamics(chain, q, dq[chain.active], tau_motors)
        scale = max(1.0, np.abs(ddq).max())
        motors = chain.motor_indices
        assert np.abs(ours[motors] - ddq[motors]).max() <= 1e-8 * scale, name
        forces = coordinate_forces(chain, q, dq, ddq)
        assert np.abs(forces[:a] - tau_motors).max() <= 1e-9 * np.abs(tau_motors).max(), name
        assert np.abs(forces[a:]).max(initial=0.0) <= 1e-9 * np.abs(tau_motors).max(), name
        assert np.abs(J @ (ours - ddq)).max() <= 1e-8 * scale, name
        assert np.abs(ours - ddq).max() <= 1e-8 * scale, name
    assert CONDITIONING[name] / 2 <= worst_kappa <= 2 * CONDITIONING[name]


def test_yaml_replacements_and_refusals(tmp_path):
    source = FOLDERS / "5bar_linkage"
    urdf = (source / "robot.urdf").read_text()
    (tmp_path / "robot.urdf").write_text(urdf)
    base = "closed_loop: [['closedloop1_A', 'closedloop1_B']]\nname_mot: ['mot1', 'mot2']\n"
    # the weld as a 3d closure, the free joint as a ball: a three-dof ball in the loop
    (tmp_path / "robot.yaml").write_text(
        base + "type: ['3d']\njoint_name: ['free1']\njoint_type: ['SPHERICAL']\n"
    )
    chain = read_folder(tmp_path)
    assert {"free1_X", "free1_Y", "free1_Z"} <= set(chain.joint_names)
    assert "free1" not in chain.joint_names
    (tmp_path / "robot.yaml").write_text(
        base + "type: ['6d']\njoint_name: ['free1']\njoint_type: ['UJOINT_ZY']\n"
    )
    chain = read_folder(tmp_path)
    assert {"free1_Z", "free1_Y"} <= set(chain.joint_names)
    # a motor tied to another by the closure: the same motor twice is refused by name; a
    # replacement naming no joint is ignored, and when the motors then tie, the message names
    # it with the URDF's closest joint (upstream's disney_robot has such a typo)
    for fixed, message in (
        ("closedloop1_B", r"not independent.*free1"),
        ("closdloop1_B", r"'closdloop1_B' \(the URDF has 'closedloop1_B'\)"),
    ):
        (tmp_path / "robot.yaml").write_text(
            "closed_loop: [['closedloop1_A', 'closedloop1_B']]\ntype: ['6d']\n"
            f"name_mot: ['mot1', 'mot2', 'free1']\njoint_name: ['closedloop1_A', '{fixed}']\n"
            "joint_type: ['FIXED', 'FIXED']\n"
        )
        with pytest.raises(WorkbenchError, match=message):
            read_folder(tmp_path)
    (tmp_path / "robot.yaml").write_text(
        base + "type: ['6d']\njoint_name: ['free1']\njoint_type: ['BALL']\n"
    )
    with pytest.raises(WorkbenchError, match="joint_type 'BALL' of 'free1'"):
        read_folder(tmp_path)
    (tmp_path / "robot.yaml").write_text(base + "type: ['6d', '3d']\n")
    with pytest.raises(WorkbenchError, match="'type' must give one of 6d, 3d per closed_loop"):
        read_folder(tmp_path)


GOOD_YAML = (
    "closed_loop: [['closedloop1_A', 'closedloop1_B']]\ntype: ['6d']\nname_mot: ['mot1', 'mot2']\n"
)


@pytest.mark.parametrize(
    ("yaml_text", "urdf_edit", "message"),
    [
        (GOOD_YAML.encode() + b"# b\xe2ti\n", None, r"robot\.yaml: not UTF-8 text \(byte 0xe2"),
        (GOOD_YAML + "joint_name: ['free1', 'free1']\njoint_type: ['SPHERICAL', 'FIXED']\n",
         None, r"'joint_name' names free1 twice"),
        (GOOD_YAML + "joint_name: [['free1']]\njoint_type: ['SPHERICAL']\n", None,
         r"'joint_name' must list strings; entry 0 is a list"),
        (GOOD_YAML + "joint_name: ['free1']\njoint_type: ['UJOINT_XX']\n", None,
         r"joint_type 'UJOINT_XX' of 'free1'"),
        (GOOD_YAML.replace("'closedloop1_B'", "'closedloop1_A'"), None,
         r"closed_loop\[0\] names 'closedloop1_A' twice"),
        (GOOD_YAML, ("</robot>", "<transmission name=\"t\"><joint name=\"mot1\"/></transmission>"
                                 "</robot>"), None),
        (GOOD_YAML, ('<mass value="90.55799165500025083" />', '<mass value="nan" />'),
         r"line 23: link '.*': <mass> value = 'nan' must be a finite number"),
    ],
)  # fmt: skip
def test_bad_folders_are_refused_in_one_line(tmp_path, yaml_text, urdf_edit, message):
    """Inputs of the collection's kind that raised Python errors or were silently accepted:
    a Latin-1 byte, a joint replaced twice, a nested entry, a universal joint about one axis
    twice, a loop closed on one frame, a mass 'nan' (urdfdom dropped the link's <inertial>:
    it weighed nothing). A URDF <transmission> (it names joints too) is read
    as the robot's joints only."""
    urdf = (FOLDERS / "5bar_linkage" / "robot.urdf").read_text()
    if urdf_edit is not None:
        urdf = urdf.replace(*urdf_edit)
    (tmp_path / "robot.urdf").write_text(urdf)
    data = yaml_text if isinstance(yaml_text, bytes) else yaml_text.encode()
    (tmp_path / "robot.yaml").write_bytes(data)
    if message is None:
        with pytest.warns(WorkbenchWarning, match=r"links heavier than 1000 kg: 'sphere'"):
            chain = read_folder(tmp_path)
        assert chain.actuated == ("mot1", "mot2")
        return
    with pytest.raises(WorkbenchError, match=message):
        read_folder(tmp_path)


def test_limits_with_lower_above_upper_are_refused(tmp_path):
    text = (FOLDERS / "5bar_linkage" / "robot.urdf").read_text()
    start = text.index('<joint name="mot1"')
    limit = text.index("<limit", start)
    end = text.index("/>", limit)
    text = text[:limit] + '<limit effort="1" velocity="20" lower="1" upper="-1"' + text[end:]
    (tmp_path / "robot.urdf").write_text(text)
    (tmp_path / "robot.yaml").write_text(GOOD_YAML)
    with pytest.raises(WorkbenchError, match=r"joint 'mot1': <limit> lower = 1 is above upper"):
        read_folder(tmp_path)


def test_info_names_motors_and_mobility():
    path = FOLDERS / "cassie_like"
    out = subprocess.run(
        [sys.executable, "-m", "workbench.cli", "info", str(path / "robot.yaml"),
         "--tool", "foot_frame"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    motors = yaml.safe_load((path / "robot.yaml").read_text())["name_mot"]
    line = next(line for line in out.splitlines() if "motors" in line)
    assert ", ".join(motors) in line
    assert f"mobility {MOBILITY['cassie_like']}" in out


@pytest.mark.parametrize("name", NAMES)
def test_mjcf_export_loads_in_mujoco_closed(name, tmp_path):
    """MuJoCo reads the export; its equality constraints hold at the home keyframe."""
    mujoco = pytest.importorskip("mujoco")
    out = tmp_path / f"{name}.xml"
    tool = {"5bar_linkage": "effector", "robot_delta": "effector", "cassie_like": "foot_frame",
            "5bar_linkage_iso3d": "effector", "5bar_linkage_iso6d": "effector"}  # fmt: skip
    subprocess.run(
        [sys.executable, "-m", "workbench.cli", "export", str(FOLDERS / name / "robot.yaml"),
         "--mjcf", str(out), "--tool", tool[name]],
        check=True, capture_output=True,
    )  # fmt: skip
    model = mujoco.MjModel.from_xml_path(str(out))
    chain = closed_chains.load(FOLDERS / name / "robot.yaml", tool=tool[name])
    assert {model.joint(i).name for i in range(model.njnt)} <= set(chain.joint_names)
    assert model.neq >= len(chain.closures) and model.nu == len(chain.actuated)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, model.key("home").id)
    mujoco.mj_forward(model, data)
    equality = data.efc_type[: data.nefc] == mujoco.mjtConstraint.mjCNSTR_EQUALITY
    assert equality.any() and np.abs(data.efc_pos[: data.nefc][equality]).max() <= 1e-9


def test_motor_logs_of_folders_with_idle_motions_are_refused(tmp_path, capsys):
    """simulate-log and calibrate --model DIR: exit 2 naming the idle joints, nothing written
    (robot_delta: three rods spin between ball joints; the other two folders take the same path).

    The idle joints are those the null space of the closure Jacobian at home
    leaves with the motors still (computed here from Pinocchio's constraint
    Jacobian, not the project's)."""
    from workbench.cli import main

    folder = FOLDERS / "robot_delta"
    model, data, constraints, datas, motors = pinocchio_reference(folder)
    chain = read_folder(folder)
    x = configuration(model, chain.joint_names, chain.home)
    pin.initConstraintDynamics(model, data, constraints, datas)
    zero = np.zeros(model.nv)
    settings = pin.ProximalSettings(1e-14, 1e-10, 200)
    pin.constraintDynamics(model, data, x, zero, zero, constraints, datas, settings)
    J = pin.getConstraintsJacobian(model, data, constraints, datas)
    free = model.nv - np.linalg.matrix_rank(J, 1e-9) - len(motors)  # idle motions
    assert free == len(chain.idle) > 0
    out = tmp_path / "log.csv"
    assert main(["simulate-log", str(folder), "--kind", "twist", "--out", str(out)]) == 2
    message = capsys.readouterr().err
    assert "idle motions" in message and all(j in message for j in chain.idle)
    assert not any(tmp_path.iterdir())
    log = tmp_path / "motors.csv"
    header = ["t", *(f"{p}_{m}" for p in ("q", "dq", "ddq", "tau") for m in motors)]
    log.write_text(",".join(header) + "\n" + ",".join(["0"] * len(header)) + "\n")
    code = main(["calibrate", "--model", str(folder / "robot.yaml"), "--log", str(log),
                 "--kind", "twist", "--out", str(tmp_path / "cal"), "--quiet"])  # fmt: skip
    assert code == 2
    assert "idle motions" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["motors.csv"]


def test_a_straight_leg_reaches_toward_its_hip():
    """talos_like closes with its leg straight: the foot's motion toward the hip is singular
    there, so the inverse kinematics starts again from small random moves (it tried 2,187
    grid points for minutes and refused); checked by Pinocchio's forward kinematics. (Not in
    NAMES: the random 0.05 rad moves of those checks leave its workspace; the checks of
    issue 34 on it are in BENCHMARKS.md.)"""
    chain = closed_chains.load(FOLDERS / "talos_like", tool="foot")
    model = pin.buildModelFromUrdf(str(FOLDERS / "talos_like" / "robot.urdf"))
    data = model.createData()
    pin.framesForwardKinematics(model, data, chain.home)
    foot = model.getFrameId("foot")
    target = data.oMf[foot].translation + np.array([0.0, 0.0, 0.005])
    q = reach_configuration(chain, target)
    assert np.abs(residual(chain, q)).max() <= 1e-10
    pin.framesForwardKinematics(model, data, q)
    assert np.linalg.norm(data.oMf[foot].translation - target) <= 1e-9


def test_an_edited_folder_is_read_again(tmp_path):
    """A long-lived session (a notebook) that edits a folder's URDF gets the edited model from
    ``closed_chains.load``, not the one it read before (Pinocchio's total mass as reference)."""
    import os
    import shutil

    folder = tmp_path / "5bar_linkage_iso3d"
    shutil.copytree(FOLDERS / "5bar_linkage_iso3d", folder)
    first = closed_chains.load(folder)
    assert closed_chains.load(folder / "robot.yaml") is not None
    urdf = folder / "robot.urdf"
    root = ET.parse(urdf).getroot()
    moving = next(j.find("child").get("link") for j in root.iter("joint")
                  if j.get("type") == "revolute")  # fmt: skip
    mass = next(link for link in root.iter("link") if link.get("name") == moving)
    mass = mass.find("inertial").find("mass")
    mass.set("value", repr(float(mass.get("value")) + 1.0))
    ET.ElementTree(root).write(urdf)
    later = os.stat(urdf).st_mtime_ns + 10**9
    os.utime(urdf, ns=(later, later))
    second = closed_chains.load(folder)
    model = pin.buildModelFromUrdf(str(urdf))
    total = sum(inertia.mass for inertia in model.inertias[1:])  # the moving links
    assert abs(second.tree.phi[:, 0].sum() - total) <= 1e-9 * total
    assert abs(first.tree.phi[:, 0].sum() - (total - 1.0)) <= 1e-9 * total


@pytest.mark.parametrize("name", ["cassie_like", "talos_like"])
def test_the_home_does_not_follow_rounding(name, monkeypatch):
    """The home found from q = 0 is the same when every Levenberg-Marquardt step is moved
    by rounding (2e-16 relative, as other BLAS kernels would): without its grid, cassie_like's
    and talos_like's ended 2 to 5 rad apart so, and a processor with other kernels gave
    another home."""
    chain = read_folder(FOLDERS / name)
    solve, rng = np.linalg.solve, np.random.default_rng(5)

    def rounded(A, b):
        x = solve(A, b)
        return x * (1.0 + 2e-16 * rng.standard_normal(x.shape))

    monkeypatch.setattr(np.linalg, "solve", rounded)
    for _ in range(3):
        np.testing.assert_array_equal(closed_configuration(chain), chain.home)
