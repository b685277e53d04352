"""MJCF export checked in MuJoCo (which the project did not write).

Open chains: MuJoCo's inverse dynamics (``mj_inverse``, contacts and limits
off) of the exported file equals the project's joint torques plus the drive
terms as MuJoCo defines them (armature ``a ddq``, damping a passive force
``d dq``, coupled motors as fixed tendons) to 1e-8 relative on random
states; Coulomb friction (a constraint in MuJoCo) is checked where it
slides, ``fs sign(dq)``. Closed chains: the equality constraints hold at
closed configurations of the project's passive solve, and MuJoCo's
simulation of a planned reach follows the project's.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

import workbench as wb
from workbench import closed_chains
from workbench.cli import main
from workbench.closed_chains import kinematics
from workbench.closed_chains.mjcf import mjcf_string as closed_mjcf_string
from workbench.errors import WorkbenchWarning
from workbench.identification.drives import (
    drive_torques,
    read_drive_file,
    sidecar_path,
    simulator_terms,
)
from workbench.inertia import com_from_phi
from workbench.models import urdf_path
from workbench.models.mjcf import mjcf_string, realizable
from workbench.models.pinocchio_conversion import load_urdf_model
from workbench.models.urdf import load_urdf, write_urdf

mujoco = pytest.importorskip("mujoco")

ROOT = Path(__file__).resolve().parents[1]
OPEN_CHAINS = ["iiwa", "planar_2r", "staubli_tx40", "ur10e", "ur5", "panda_arm", "z1"]
OFF = mujoco.mjtDisableBit


def compiled(xml: str, *disabled: int):
    model = mujoco.MjModel.from_xml_string(xml)
    for flag in disabled:
        model.opt.disableflags |= int(flag)
    return model


def dof_index(model, joints) -> np.ndarray:
    """MuJoCo's dof address of each joint named (the project's joint order)."""
    return np.array([model.jnt_dofadr[model.joint(j).id] for j in joints])


def qpos_index(model, joints) -> np.ndarray:
    return np.array([model.jnt_qposadr[model.joint(j).id] for j in joints])


def mujoco_inverse(model, joints, q, dq, ddq) -> np.ndarray:
    """qfrc_inverse (N, n) in the project's joint order."""
    data = mujoco.MjData(model)
    qi, vi = qpos_index(model, joints), dof_index(model, joints)
    out = np.empty_like(q)
    for s in range(len(q)):
        data.qpos[qi], data.qvel[vi], data.qacc[vi] = q[s], dq[s], ddq[s]
        mujoco.mj_inverse(model, data)
        out[s] = data.qfrc_inverse[vi]
    return out


def relative_error(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).max() / np.abs(b).max())


@pytest.mark.parametrize("name", [*OPEN_CHAINS, "delta", "fivebar"])
def test_inverse_dynamics_matches_mujoco(name):
    """mj_inverse == tau + armature ddq + damping dq (delta: folded massless sliders, fivebar:
    a massless leaf link under MuJoCo's boundmass)."""
    chain = closed_chains.load(name).tree if name in closed_chains.SHIPPED else wb.models.load(name)
    rng = np.random.default_rng(3)
    armature, damping = rng.uniform(0, 0.3, (2, chain.n))
    with warnings.catch_warnings():  # the iiwa's impossible inertias (next test)
        warnings.simplefilter("ignore", WorkbenchWarning)
        xml = mjcf_string(chain, armature=armature, damping=damping)
    model = compiled(xml, OFF.mjDSBL_CONTACT, OFF.mjDSBL_LIMIT)
    q, dq, ddq = rng.normal(size=(3, 25, chain.n))
    written, _ = realizable(chain)
    expected = wb.inverse_dynamics(written, q, dq, ddq) + armature * ddq + damping * dq
    got = mujoco_inverse(model, chain.joint_names, q, dq, ddq)
    assert relative_error(got, expected) < 1e-8
    assert np.allclose(model.opt.gravity, chain.gravity, rtol=0, atol=0)


def test_realizable_moves_impossible_moments_strictly_inside_the_triangle_inequality():
    """The iiwa's identified links 4 and 7 have C > A + B: the nearest moments 1e-10 C inside
    A + B >= C, named; link 2, on it to rounding, moved as far without a note; every link
    strictly inside after the move, and MuJoCo compiles the model."""
    chain = wb.models.load("iiwa")
    fixed, notes = realizable(chain)
    assert [n.split("'")[1] for n in notes] == ["iiwa_link_4", "iiwa_link_7"]
    m0, c0, I0 = com_from_phi(chain.phi)
    m1, c1, I1 = com_from_phi(fixed.phi)
    np.testing.assert_allclose(m1, m0, rtol=1e-14)
    np.testing.assert_allclose(c1, c0, atol=1e-14)
    before, after = np.linalg.eigvalsh(I0), np.linalg.eigvalsh(I1)
    changed = np.abs(after - before).max(axis=1) > 1e-9 * before[:, 2]
    assert changed.tolist() == [False, False, False, True, False, False, True]
    assert np.all(after[:, 0] + after[:, 1] - after[:, 2] > 0.5e-10 * after[:, 2])
    deficit = before[:, 2] - before[:, 0] - before[:, 1] + 1e-10 * before[:, 2]
    moved = deficit > 0
    step = deficit[moved, None] / 3 * np.array([1, 1, -1])
    np.testing.assert_allclose(after[moved] - before[moved], step, atol=1e-15)
    np.testing.assert_array_equal(after[~moved], before[~moved])
    mujoco.MjModel.from_xml_string(mjcf_string(fixed))


def test_tx40_drive_file_in_mujoco():
    """The TX40's drive file: rotor inertias, viscous friction and the wrist's coupled motor
    (a tendon) to 1e-8; Coulomb friction where joints and the coupled motor slide."""
    chain = wb.models.load("staubli_tx40")
    drives, values = read_drive_file(sidecar_path(urdf_path("staubli_tx40")), chain.n)
    xml = mjcf_string(chain, **simulator_terms(drives, values))
    rng = np.random.default_rng(4)
    q, ddq = rng.normal(size=(2, 25, chain.n))
    dq = rng.uniform(1.0, 3.0, (25, chain.n)) * rng.choice([-1.0, 1.0], (25, chain.n))
    dq[:, 5] = np.abs(dq[:, 5]) * np.sign(dq[:, 4])  # motor 6 turns with dq5 + dq6: sliding
    rigid = wb.inverse_dynamics(chain, q, dq, ddq)
    for friction in (False, True):
        kept = ("Ia", "fv", "Iam", "fvm") + (("fs", "fsm") if friction else ())
        x = np.array([values[n] if n.rstrip("0123456789") in kept else 0.0 for n in drives.names])
        flags = [OFF.mjDSBL_CONTACT, OFF.mjDSBL_LIMIT]
        model = compiled(xml, *flags, *([] if friction else [OFF.mjDSBL_FRICTIONLOSS]))
        got = mujoco_inverse(model, chain.joint_names, q, dq, ddq)
        assert relative_error(got, rigid + drive_torques(drives, x, dq, ddq)) < 1e-8


def test_urdf_dynamics_round_trip_and_export(tmp_path):
    """<dynamics> written by write_urdf load back in Pinocchio and become MuJoCo's damping and
    frictionloss; a drive file beside the URDF wins over them."""
    chain = wb.models.load("planar_2r")
    dynamics = {"joint_1": (0.5, 0.25), "joint_2": (0.125, 0.75)}
    urdf = write_urdf(chain, tmp_path / "robot.urdf", dynamics=dynamics)
    model = load_urdf_model(urdf)
    np.testing.assert_array_equal(model.damping, [0.5, 0.125])
    np.testing.assert_array_equal(model.friction, [0.25, 0.75])
    assert main([ "export", str(urdf), "--mjcf", str(tmp_path / "a.xml")]) == 0  # fmt: skip
    exported = mujoco.MjModel.from_xml_path(str(tmp_path / "a.xml"))
    np.testing.assert_array_equal(exported.dof_damping[dof_index(exported, chain.joint_names)],
                                  [0.5, 0.125])  # fmt: skip
    np.testing.assert_array_equal(exported.dof_frictionloss, [0.25, 0.75])
    sidecar_path(urdf).write_text(
        'terms = ["friction", "rotor_inertia"]\n[values]\n'
        "Ia1 = 0.5\nfv1 = 2.0\nfs1 = 3.0\nIa2 = 0.25\nfv2 = 4.0\nfs2 = 5.0\n"
    )
    assert main(["export", str(urdf), "--mjcf", str(tmp_path / "b.xml"),
                 "--urdf", str(tmp_path / "b.urdf")]) == 0  # fmt: skip
    exported = mujoco.MjModel.from_xml_path(str(tmp_path / "b.xml"))
    np.testing.assert_array_equal(exported.dof_armature, [0.5, 0.25])
    np.testing.assert_array_equal(exported.dof_damping, [2.0, 4.0])
    np.testing.assert_array_equal(exported.dof_frictionloss, [3.0, 5.0])
    rewritten = load_urdf_model(tmp_path / "b.urdf")
    np.testing.assert_array_equal(rewritten.damping, [2.0, 4.0])
    np.testing.assert_array_equal(rewritten.friction, [3.0, 5.0])


def equality_residual(model, data) -> float:
    mujoco.mj_forward(model, data)
    rows = data.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY
    return float(np.abs(data.efc_pos[rows]).max())


def assert_assembles(closed) -> list[str]:
    """The equality constraints vanish (<= 1e-9) at the home configuration of the project's
    passive solve and at closed configurations away from it (the constraints are the
    closures, not a snapshot of home), and not at an open one. Returns the equality types."""
    model = mujoco.MjModel.from_xml_string(closed_mjcf_string(closed))
    data = mujoco.MjData(model)
    home = kinematics.solve_passive(closed, closed.home[closed.active], guess=closed.home)
    kept = [j for j in closed.joint_names if mujoco.mj_name2id(model, 3, j) >= 0]
    qi = qpos_index(model, kept)
    columns = [closed.tree.joint_index(j) for j in kept]
    mujoco.mj_resetDataKeyframe(model, data, model.key("home").id)
    np.testing.assert_array_equal(data.qpos[qi], home[columns])
    assert equality_residual(model, data) <= 1e-9
    for step in (0.1, -0.2):
        moved = kinematics.solve_passive(closed, home[closed.active] + step, guess=home)
        data.qpos[qi] = moved[columns]
        assert equality_residual(model, data) <= 1e-9
    data.qpos[qi] = home[columns] + 0.05  # an open configuration: the constraints see it
    assert equality_residual(model, data) > 1e-4
    return [mujoco.mjtEq(kind).name for kind in model.eq_type]


EXPECTED_EQUALITIES = {
    "fivebar": ["mjEQ_CONNECT"] * 2,  # the massless link_5 folded: a hinge of two connects
    "planar_fivebar": ["mjEQ_CONNECT"],
    "fourbar": ["mjEQ_CONNECT"] * 2,
    "delta": ["mjEQ_CONNECT"] * 3,
}


@pytest.mark.parametrize("name", list(closed_chains.SHIPPED))
def test_closed_chain_assembles_in_mujoco(name):
    assert assert_assembles(closed_chains.load(name)) == EXPECTED_EQUALITIES[name]


@pytest.mark.parametrize("kind", ["rotation", "weld"])
@pytest.mark.parametrize("massive", [True, False])
def test_rotation_and_weld_closures_assemble_in_mujoco(kind, massive):
    """The five-bar's closure as a rotation or a weld (its origins coincide when closed), with
    link_5 massless (folded into a hinge) or carrying link_4's inertia (a MuJoCo weld)."""
    closed = closed_chains.load("fivebar")
    tree = closed.tree
    inertias = tree.inertias.copy()
    if massive:
        inertias[4] = inertias[3]
    variant = replace(
        closed,
        tree=replace(tree, inertias=inertias),
        closures=(replace(closed.closures[0], kind=kind),),
    )
    types = assert_assembles(variant)
    assert types == (["mjEQ_WELD"] if massive else ["mjEQ_CONNECT"] * 2)


def test_export_command_writes_and_refuses_its_inputs(tmp_path, capsys):
    out = tmp_path / "fivebar.xml"
    assert main(["export", "fivebar", "--mjcf", str(out)]) == 0
    model = mujoco.MjModel.from_xml_path(str(out))
    assert model.nu == 2 and model.neq == 2 and model.ngeom > 0
    source = tmp_path / "robot"
    shutil.copytree(ROOT / "models" / "staubli_tx40", source)
    urdf = source / "tx40.urdf"
    before = urdf.read_bytes()
    assert main(["export", str(urdf), "--mjcf", str(urdf)]) == 2
    assert main(["export", str(urdf), "--mjcf", str(tmp_path / "x.xml"),
                 "--urdf", str(source / "tx40.drives.toml")]) == 2  # fmt: skip
    assert "is an input of this export" in capsys.readouterr().err
    assert urdf.read_bytes() == before and not (tmp_path / "x.xml").exists()
    assert main(["export", str(urdf), "--mjcf", str(tmp_path / "all.xml")]) == 0
    before = mujoco.MjModel.from_xml_path(str(tmp_path / "all.xml")).ngeom
    (source / "meshes" / "link_1.stl").unlink()  # a missing mesh is left out, no error
    assert main(["export", str(urdf), "--mjcf", str(tmp_path / "fewer.xml")]) == 0
    assert before > 1
    assert mujoco.MjModel.from_xml_path(str(tmp_path / "fewer.xml")).ngeom == before - 1


@pytest.mark.slow
def test_calibrated_tx40_exports_to_mujoco(tmp_path):
    """workbench calibrate --kind dynamic on the TX40 recording (the default, physically
    consistent fit), then export: exit 0, every link mass within 3x of the URDF's, held-out
    relative RMS at most 0.0846 (least squares: 0.0826); MuJoCo's inverse dynamics equals the
    calibrated URDF plus the calibrated drive file, and, with armature, damping and
    frictionloss off, Pinocchio's RNEA of calibrated.urdf to 1e-8."""
    out = tmp_path / "tx40"
    command = [sys.executable, "-m", "workbench.cli", "calibrate", "--model", "staubli_tx40",
               "--log", str(ROOT / "models/staubli_tx40/identification.toml"),
               "--kind", "dynamic", "--quiet", "--out", str(out)]  # fmt: skip
    assert subprocess.run(command, cwd=ROOT, capture_output=True).returncode == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["heldout_relative_rms"] <= 0.0826 + 0.002
    assert summary["physically_consistent"] and summary["exit"]["code"] == 0
    nominal = pin.buildModelFromUrdf(str(ROOT / "models/staubli_tx40/tx40.urdf"))
    calibrated = pin.buildModelFromUrdf(str(out / "calibrated.urdf"))
    for name in calibrated.names[1:]:
        i, k = calibrated.getJointId(name), nominal.getJointId(name)
        ratio = calibrated.inertias[i].mass / nominal.inertias[k].mass
        assert 1 / 3 <= ratio <= 3, (name, ratio)
    assert main(["export", str(out), "--mjcf", str(tmp_path / "tx40.xml")]) == 0
    chain = load_urdf(out / "calibrated.urdf")
    drives, values = read_drive_file(out / "calibrated.drives.toml", chain.n)
    model = mujoco.MjModel.from_xml_path(str(tmp_path / "tx40.xml"))
    for flag in (OFF.mjDSBL_CONTACT, OFF.mjDSBL_LIMIT, OFF.mjDSBL_FRICTIONLOSS):
        model.opt.disableflags |= int(flag)
    rng = np.random.default_rng(5)
    q, dq, ddq = rng.normal(size=(3, 25, chain.n))
    kept = ("Ia", "fv", "Iam", "fvm")
    x = np.array([values[n] if n.rstrip("0123456789") in kept else 0.0 for n in drives.names])
    expected = wb.inverse_dynamics(chain, q, dq, ddq) + drive_torques(drives, x, dq, ddq)
    assert relative_error(mujoco_inverse(model, chain.joint_names, q, dq, ddq), expected) < 1e-8
    model.dof_armature[:] = 0.0
    model.dof_damping[:] = 0.0
    model.tendon_armature[:] = 0.0
    model.tendon_damping[:] = 0.0
    data = calibrated.createData()
    names = [calibrated.names[i] for i in range(1, calibrated.njoints)]
    rnea = np.array([pin.rnea(calibrated, data, *s).copy() for s in zip(q, dq, ddq, strict=True)])
    assert relative_error(mujoco_inverse(model, names, q, dq, ddq), rnea) < 1e-8


def mujoco_simulation(model, closed, t, tau, q0, dq0) -> np.ndarray:
    """MuJoCo's joint trajectory (K, kept joints) at the times t, under motor torques tau
    interpolated linearly (held over each step at its midpoint), from q0, dq0 (tree order)."""
    kept = [j for j in closed.joint_names if mujoco.mj_name2id(model, 3, j) >= 0]
    columns = [closed.tree.joint_index(j) for j in kept]
    qi, vi = qpos_index(model, kept), dof_index(model, kept)
    motors = [model.actuator(j).id for j in closed.actuated]
    data = mujoco.MjData(model)
    data.qpos[qi], data.qvel[vi] = q0[columns], dq0[columns]
    dt = model.opt.timestep
    times, path = [0.0], [data.qpos[qi].copy()]
    while data.time < t[-1]:
        middle = data.time + dt / 2
        data.ctrl[motors] = [np.interp(middle, t, tau[:, a]) for a in range(tau.shape[1])]
        mujoco.mj_step(model, data)
        times.append(data.time)
        path.append(data.qpos[qi].copy())
    path = np.array(path)
    return np.stack([np.interp(t, times, path[:, k]) for k in range(len(kept))], axis=1), columns


def test_fivebar_reach_simulates_in_mujoco_as_in_the_project():
    """The five-bar's planned reach (IPOPT) under its planned motor torques: MuJoCo's
    simulation of the exported file (its RK4, time step and stiff equality constraints)
    follows closed_chains.dynamics.simulate over the whole 0.6 s reach."""
    from workbench.closed_chains.dynamics import simulate
    from workbench.ocp import reach
    from workbench.ocp.problem import ReachProblem

    closed = closed_chains.load("fivebar")
    plan = reach.solve(ReachProblem.from_toml(ROOT / "problems" / "fivebar_reach.toml"),
                       progress=False)  # fmt: skip
    assert plan.status == "solved"
    t, tau, q, dq = plan.t, plan.tau, plan.q, plan.dq
    project, _ = simulate(closed, t, tau, q[0], dq[0, closed.active])
    model = mujoco.MjModel.from_xml_string(closed_mjcf_string(closed))
    assert model.opt.integrator == mujoco.mjtIntegrator.mjINT_RK4
    ours, columns = mujoco_simulation(model, closed, t, tau, q[0], dq[0])
    error = np.abs(ours - project[:, columns]).max()
    assert error < 2e-5, error


def test_export_of_terms_mujoco_cannot_hold_warns_and_writes(tmp_path, capsys):
    """A drive file with Stribeck friction and a negative viscous friction (an identified value
    the Stribeck term compensates): MuJoCo has no Stribeck term and no negative damping, so the
    export says both and writes damping 0 for that joint, the others as in the file."""
    source = tmp_path / "results"
    source.mkdir()
    shutil.copy(ROOT / "models" / "planar_2r" / "planar_2r.urdf", source / "calibrated.urdf")
    (source / "calibrated.drives.toml").write_text(
        'terms = ["friction", "stribeck"]\nstribeck_speed = [0.5, 0.8]\n\n[values]\n'
        "fv1 = 0.3\nfs1 = 0.2\nfst1 = 0.1\nfv2 = -0.05\nfs2 = 0.4\nfst2 = -0.2\n"
    )
    out = tmp_path / "p2r.xml"
    assert main(["export", str(source), "--mjcf", str(out)]) == 0
    err = capsys.readouterr().err
    assert "the drive terms stribeck have no MuJoCo counterpart" in err
    assert "damping of joint 'joint_2' is -0.05" in err
    model = mujoco.MjModel.from_xml_path(str(out))
    damping = [model.dof_damping[model.joint(j).dofadr[0]] for j in ("joint_1", "joint_2")]
    frictionloss = [
        model.dof_frictionloss[model.joint(j).dofadr[0]] for j in ("joint_1", "joint_2")
    ]
    assert damping == [0.3, 0.0] and frictionloss == [0.2, 0.4]
