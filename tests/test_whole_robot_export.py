"""A whole robot's dynamic calibration exported to MuJoCo: TIAGo (example-robot-data, 48 joints
with its hand's chains of massless virtual links) calibrated on its arm, the torso and head
locked away from zero by the log description.

Checked against MuJoCo itself: the MJCF compiles (no body with more than six joints, every
inertia inside the triangle inequality), its keyframe holds the locked values, and MuJoCo's
inverse dynamics (mj_inverse, drive terms off) of the arm at that keyframe equals the
package's inverse dynamics of the calibrated arm, cut from calibrated.urdf with the same
locked joints.
"""

from __future__ import annotations

import json

import mujoco
import numpy as np
import pytest

import workbench as wb
from workbench.calibration.simulation.simulate import simulate_log
from workbench.cli import main
from workbench.recordings.log_files import write_log

ARM = [f"arm_{i}_joint" for i in range(1, 8)]
LOCKED = {"torso_lift_joint": 0.15, "head_2_joint": -0.3}
OFF = mujoco.mjtDisableBit


def description(folder, chain) -> str:
    """A log description of the arm's table with [model] joints and [model.locked]."""
    q = ", ".join(f'"q_{j}"' for j in chain.joint_names)
    tau = ", ".join(f'"tau_{j}"' for j in chain.joint_names)
    locked = "".join(f"{joint} = {value}\n" for joint, value in LOCKED.items())
    text = (
        f"[model]\njoints = [{', '.join(repr(j) for j in ARM)}]\n[model.locked]\n{locked}"
        '[time]\nsample_period = 0.01\n[positions]\nfile = "arm.csv"\n'
        f'columns = [{q}]\nunit = "rad"\n[torques]\nfile = "arm.csv"\ncolumns = [{tau}]\n'
    )
    path = folder / "arm.toml"
    path.write_text(text.replace("'", '"'))
    return str(path)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiago")
    chain = wb.models.load("tiago", joints=ARM, locked=LOCKED)
    log, _ = simulate_log(
        chain, kind="dynamic", samples=1500, perturb=0.05, noise=0.02, friction=0.3, seed=4
    )
    write_log(folder / "arm.csv", log)
    out = folder / "results"
    args = ["calibrate", "--model", "tiago", "--log", description(folder, chain)]
    assert main([*args, "--kind", "dynamic", "--quiet", "--out", str(out)]) == 0
    assert main(["export", str(out), "--mjcf", str(folder / "tiago.xml")]) == 0
    return out, folder / "tiago.xml"


def test_whole_robot_mjcf_loads_with_the_locked_values_as_keyframe(exported):
    out, path = exported
    summary = json.loads((out / "summary.json").read_text())
    assert summary["locked_joints"]["torso_lift_joint"] == 0.15
    model = mujoco.MjModel.from_xml_path(str(path))
    assert model.njnt == 48 and model.nkey == 1
    key = model.key("calibration")
    for j in range(model.njnt):
        name = model.joint(j).name
        expected = LOCKED.get(name, summary["locked_joints"].get(name, 0.0))
        assert key.qpos[model.jnt_qposadr[j]] == expected, name
    assert np.all(np.bincount(model.jnt_bodyid, minlength=model.nbody) <= 6)


def test_mujoco_inverse_dynamics_at_the_keyframe_equals_the_calibrated_arm(exported):
    out, path = exported
    arm = wb.models.load(str(out / "calibrated.urdf"), joints=ARM, locked=LOCKED)
    model = mujoco.MjModel.from_xml_path(str(path))
    for flag in (OFF.mjDSBL_CONTACT, OFF.mjDSBL_LIMIT, OFF.mjDSBL_FRICTIONLOSS):
        model.opt.disableflags |= int(flag)
    model.dof_armature[:] = 0.0
    model.dof_damping[:] = 0.0
    data = mujoco.MjData(model)
    qi = [model.jnt_qposadr[model.joint(j).id] for j in ARM]
    vi = [model.jnt_dofadr[model.joint(j).id] for j in ARM]
    rng = np.random.default_rng(3)
    q, dq, ddq = rng.uniform(-1, 1, size=(3, 10, len(ARM)))
    expected = wb.inverse_dynamics(arm, q, dq, ddq)
    got = np.empty_like(expected)
    for s in range(len(q)):
        mujoco.mj_resetDataKeyframe(model, data, model.key("calibration").id)
        data.qpos[qi], data.qvel[vi], data.qacc[vi] = q[s], dq[s], ddq[s]
        mujoco.mj_inverse(model, data)
        got[s] = data.qfrc_inverse[vi]
    assert np.abs(got - expected).max() <= 1e-8 * np.abs(expected).max()
