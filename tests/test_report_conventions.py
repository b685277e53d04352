"""One convention in every calibration report, and a calibrated URDF that is exactly the model.

* torques: units by joint type (a two-joint arm written here, revolute then
  prismatic), the held-out relative RMS per joint, checked against the
  torques the test simulated;
* poses: position errors are 3-D distances in training and held-out
  figures, checked against Pinocchio's forward kinematics of the written
  ``calibrated.urdf``, which reads back equal to the model to 1e-9;
* a model with link inertias no body has is not written as a URDF, and one
  warning names every such link; parameters not estimated read ``0 (fixed)``.
"""

from __future__ import annotations

import csv
import json
import warnings
from dataclasses import replace

import numpy as np
import pytest

import workbench as wb
from workbench.calibration.cross_validation import calibrate
from workbench.calibration.problems.parameter_figures import std_figure
from workbench.calibration.problems.problem import Options
from workbench.calibration.reporting.exact_urdf import calibrated_urdf
from workbench.calibration.reporting.joint_figures import per_joint_figures
from workbench.calibration.reporting.report import write_report
from workbench.calibration.selection.validation import Folds
from workbench.calibration.simulation.simulate import simulate_log
from workbench.errors import WorkbenchWarning
from workbench.models.urdf import load_urdf

ARM = """<?xml version="1.0"?>
<robot name="arm_slider">
  <link name="base"/>
  <link name="arm">
    <inertial><origin xyz="0.2 0 0.05"/><mass value="3.0"/>
      <inertia ixx="0.02" iyy="0.05" izz="0.04" ixy="0.001" ixz="0" iyz="0"/></inertial>
  </link>
  <link name="carriage">
    <inertial><origin xyz="0.05 0.01 0"/><mass value="1.5"/>
      <inertia ixx="0.004" iyy="0.006" izz="0.005" ixy="0" ixz="0" iyz="0"/></inertial>
  </link>
  <link name="tool"/>
  <joint name="shoulder" type="revolute">
    <parent link="base"/><child link="arm"/><origin xyz="0 0 0.3"/><axis xyz="0 1 0"/>
    <limit lower="-1.5" upper="1.5" effort="100" velocity="2"/>
  </joint>
  <joint name="slider" type="prismatic">
    <parent link="arm"/><child link="carriage"/><origin xyz="0.4 0 0"/><axis xyz="1 0 0"/>
    <limit lower="-0.2" upper="0.2" effort="200" velocity="0.5"/>
  </joint>
  <joint name="tool_joint" type="fixed">
    <parent link="carriage"/><child link="tool"/><origin xyz="0.1 0 0"/>
  </joint>
</robot>
"""


@pytest.fixture(scope="module")
def arm(tmp_path_factory):
    path = tmp_path_factory.mktemp("arm") / "arm.urdf"
    path.write_text(ARM)
    return load_urdf(path, tool_frame="tool")


def test_torque_units_by_joint_type_and_per_joint_heldout(arm, tmp_path):
    log, _ = simulate_log(arm, kind="dynamic", samples=400, noise=0.05, friction=0.1, seed=3)
    report = calibrate(arm, "dynamic", log, Folds(4), Options(physical=True))
    write_report(tmp_path, report)
    summary = json.loads((tmp_path / "summary.json").read_text())
    units = summary["units"]["joints"]
    assert units["shoulder"]["effort"] == "N m" and units["shoulder"]["rotor_inertia"] == "kg m^2"
    assert units["slider"]["effort"] == "N" and units["slider"]["rotor_inertia"] == "kg"
    assert units["slider"]["viscous_friction"] == "N s/m"
    assert summary["rms"]["unit"] == "N m (revolute joints), N (prismatic joints)"
    # per joint: |e_j| / |tau_j| and the RMS of e_j over the held-out samples, whose torques
    # are the simulated ones (every sample is held out once)
    held = summary["heldout"]
    assert held["samples"] == len(log.t)
    measured2 = np.sum(np.square(log.tau), axis=0)
    total = 0.0
    for j, joint in enumerate(arm.joint_names):
        relative = held["calibrated"]["relative_rms_per_joint"][joint]
        rms = held["calibrated"]["rms"][joint]
        assert relative == pytest.approx(rms * np.sqrt(len(log.t) / measured2[j]), rel=1e-9)
        total += relative**2 * measured2[j]
    assert held["calibrated"]["relative_rms"] == pytest.approx(
        np.sqrt(total / measured2.sum()), rel=1e-9
    )
    # the per-joint lead: the mean of |e_j| / |tau_j| from each joint's RMS error and the
    # log's torques; the pooled figure adds N and N m
    figures = per_joint_figures(summary)
    normalised = [
        held["calibrated"]["rms"][joint] * np.sqrt(len(log.t) / measured2[j])
        for j, joint in enumerate(arm.joint_names)
    ]
    assert figures["mean"]["calibrated"] == pytest.approx(np.mean(normalised), rel=1e-9)
    assert figures["pooled_mixes_units"] and figures["worse_than_zero"] == []
    write_report(tmp_path, replace(report, summary=report.summary | {"heldout_per_joint": figures}))
    page = (tmp_path / "report.html").read_text()
    assert "(pooled, adds N and N m)" in page and "per-joint mean" in page
    assert "slider: held-out relative RMS" in page and "RMS [N]" in page
    assert "shoulder: held-out relative RMS" in page and "RMS [N m]" in page
    drives = (tmp_path / "calibrated.drives.toml").read_text()
    assert "Prismatic joint(s) slider: fv in N s/m" in drives
    assert "nothing fitted" in held["nominal_model"]


def pinocchio_tool_positions(urdf, tool: str, q: np.ndarray) -> np.ndarray:
    import pinocchio as pin

    model = pin.buildModelFromUrdf(str(urdf))
    data = model.createData()
    frame = model.getFrameId(tool)
    out = []
    for sample in q:
        pin.framesForwardKinematics(model, data, sample)
        out.append(data.oMf[frame].translation.copy())
    return np.array(out)


def test_position_errors_are_3d_distances_and_the_urdf_is_the_model(tmp_path):
    iiwa = wb.models.load("iiwa")
    log, _ = simulate_log(iiwa, samples=80, perturb=1e-2, noise=5e-4, seed=5)
    report = calibrate(iiwa, "kinematic", log, Folds(4), Options(parameters="twists"))
    write_report(tmp_path, report)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["position_error"] == "3-D distance, m"
    assert summary["rms_convention"] == "3-D distance, m"
    held = summary["heldout"]
    assert summary["rms"]["validation_after"] == pytest.approx(
        held["calibrated"]["position_rms_m"], rel=1e-12
    )
    assert summary["rms"]["validation_before"] == pytest.approx(
        held["nominal"]["position_rms_m"], rel=1e-12
    )
    assert "frames" in held["nominal_model"]
    # training: the RMS 3-D distance of the written URDF's tool (Pinocchio) to the measurements
    predicted = pinocchio_tool_positions(tmp_path / "calibrated.urdf", iiwa.tool_name, log.q)
    distance = np.linalg.norm(predicted - log.position, axis=1)
    assert summary["rms"]["train_after"] == pytest.approx(np.sqrt(np.mean(distance**2)), rel=1e-6)
    # the URDF reads back as the model: the same tool positions as the calibrated chain
    chain_positions = wb.dynamics.kinematics.forward_kinematics(report.chain, log.q)[:, :3, 3]
    assert np.abs(predicted - chain_positions).max() < 1e-9
    check = summary["urdf_check"]
    assert check["written"] and max(check["reload_max_difference"].values()) <= 1e-9


def test_impossible_inertias_are_not_written_and_every_link_is_named():
    iiwa = wb.models.load("iiwa")
    phi = iiwa.phi.copy()
    bad = [1, 4]  # a negative mass (its centre of mass would be lost in a URDF), and another
    phi[bad[0], 0] = -phi[bad[0], 0]
    phi[bad[1], 0] = -0.5
    chain = replace(iiwa, inertias=wb.inertia.matrix_from_phi(phi))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", WorkbenchWarning)
        text, check = calibrated_urdf(chain, {})
    assert text is None and check["written"] is False
    (warning,) = [str(w.message) for w in caught]
    for i, link in enumerate(iiwa.link_names):
        assert (f"link '{link}'" in warning) == (i in bad), link
    text, check = calibrated_urdf(iiwa, {})  # a possible model is written, and reads back
    assert text is not None and check["written"]


def test_parameters_not_estimated_read_fixed(tmp_path):
    """Frames only: no joint parameter is estimated, so every eta row reads 0 (fixed)."""
    iiwa = wb.models.load("iiwa")
    log, _ = simulate_log(iiwa, samples=40, perturb=0.0, noise=5e-4, seed=6)
    report = calibrate(iiwa, "kinematic", log, Folds(4), Options(parameters="frames"))
    write_report(tmp_path, report)
    with open(tmp_path / "parameters.csv", newline="") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["name", "value", "rel_std_percent"]
    joints = [r for r in rows[1:] if r[0].startswith("eta_")]
    assert len(joints) == 6 * iiwa.n and all(r[2] == "0 (fixed)" for r in joints)
    assert std_figure(1e-13) == "<1e-9" and std_figure(0.5) == 0.5
