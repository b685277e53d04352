"""Hostile inputs to excluded torque channels, declared effort units and scales.

Cases (each a defect found by running the command on degraded logs, fixed, and kept here):

* a dead wrist channel excluded while the Stribeck term is fitted: the shape search asked for
  the excluded joint's Stribeck column, which the base parameters rightly drop, and refused the
  log (``fst6 is not identifiable``); now the excluded joint has no Stribeck speed searched,
  reported or written, and the kept joints' torques are those of Pinocchio's RNEA of the truth;
* a locked joint (a Panda's finger when the log calibrates the arm) in ``[torques] exclude``
  was refused as an "unknown joint" while the URDF has it: the message now says it is locked;
* a plain table (CSV in the project's columns, no description) with a zeroed torque column was
  refused without the way out a description's refusal gives: it now gives the ``[torques]
  exclude`` line of a description that reads the table;
* a channel of pure noise at the size of its joint's torque ("uncorrelated", not "dead"):
  the diagnosis named only wrong columns or units; it now also gives the exclude line;
* ``--validation-log`` whose ``[torques] exclude`` (or ``unit``) differs from the log's: a
  traceback (matmul shapes) after the fit; now refused before it, exit 2, one line;
* a dead wrist channel (noise a thousandth of its torque) whose rigid-body torque is too small
  for the effort check to judge: the run was silent although the calibrated model predicted
  the channel's held-out torques several times worse than zero; it now warns, with the
  exclude line;
* ``[torques] scale`` with a 0 for one column: read as a channel of zeros and fitted; now
  refused with the exclude line (accepted when that joint is excluded);
* every channel but a wrist's excluded, the robot without a drive file: the wrist's torque is
  its friction, its nominal (rigid-body) torque nothing beside it, and "the nominal model
  predicts worse than zero" made the run exit 1 ("unknown cause") although the calibrated model
  predicted the wrist to 4 %; the nominal model is now judged on the joints the effort check
  can judge only.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import workbench as wb
from workbench.calibration.checks.effort_units import compare_efforts
from workbench.calibration.checks.fit_plausibility import diagnose
from workbench.calibration.cross_validation import calibrate
from workbench.calibration.problems.problem import Options
from workbench.calibration.run import Request, run_calibration
from workbench.calibration.selection.validation import Folds
from workbench.calibration.simulation.simulate import simulate_log
from workbench.cli import main
from workbench.recordings.log_files import read_log, write_log
from workbench.testing.log_descriptions import csv_description
from workbench.testing.pinocchio_reference import rnea, truth_torques

DEAD = 5  # wrist_3_joint


@pytest.fixture(scope="module")
def ur5():
    return wb.models.load("ur5")


@pytest.fixture(scope="module")
def dead_wrist(ur5):
    """(log with wrist 3's channel zero and excluded, the truth's torques, the truth)."""
    log, truth = simulate_log(ur5, kind="dynamic", samples=300, perturb=0.05, friction=0.3, seed=9)
    tau = truth_torques(truth, log)
    logged = tau + np.random.default_rng(3).normal(scale=1e-3, size=tau.shape)
    logged[:, DEAD] = 0.0
    excluded = (ur5.joint_names[DEAD],)
    return replace(log, tau=logged, temperature=None, excluded=excluded), tau, truth


def test_stribeck_with_an_excluded_channel_fits_the_kept_joints(ur5, dead_wrist):
    log, tau, _ = dead_wrist
    report = calibrate(ur5, "dynamic", log, Folds(2), Options(terms=("friction", "stribeck")))
    dead = ur5.joint_names[DEAD]
    speeds = report.summary["drive_shapes"]["stribeck"]["speed_rad_s"]
    assert dead not in speeds and len(speeds) == ur5.n - 1
    assert f"vs{DEAD + 1}" not in {name for name, _, _ in report.parameters}
    kept = np.arange(ur5.n) != DEAD
    heldout = report.summary["heldout"]["calibrated"]["relative_rms_per_joint"]
    assert dead not in heldout
    # the truth has no Stribeck peaks: the kept joints' held-out error is the noise's size
    rms = np.sqrt(np.mean(tau[:, kept] ** 2, axis=0))
    figures = np.array([heldout[j] for j in np.asarray(ur5.joint_names)[kept]])
    assert np.all(figures < 0.02), figures
    assert np.all(rms > 0.05)


def test_excluding_a_locked_joint_says_it_is_locked(tmp_path, capsys):
    """A Panda log calibrating its seven arm joints locks the fingers: excluding a finger's
    torque is refused as naming a locked joint, not as an unknown one (it is in the URDF)."""
    arm = [f"panda_joint{i}" for i in range(1, 8)]
    rng = np.random.default_rng(0)
    header = [f"{p}_{j}" for p in ("q", "dq", "tau") for j in arm]
    values = np.column_stack([0.01 * np.arange(60), 0.1 * rng.normal(size=(60, 21))])
    np.savetxt(tmp_path / "log.csv", values, delimiter=",", header="t," + ",".join(header),
               comments="")  # fmt: skip
    block = lambda prefix: ", ".join(f'"{prefix}{j}"' for j in arm)  # noqa: E731
    (tmp_path / "log.toml").write_text(
        f'[time]\nfile = "log.csv"\ncolumn = "t"\n[model]\njoints = [{block("")}]\n'
        f'[positions]\nfile = "log.csv"\ncolumns = [{block("q_")}]\n'
        f'[velocities]\nfile = "log.csv"\ncolumns = [{block("dq_")}]\n'
        f'[torques]\nfile = "log.csv"\ncolumns = [{block("tau_")}]\n'
        'exclude = ["panda_finger_joint1"]\n'
    )
    code = main(["calibrate", "--model", "panda", "--log", str(tmp_path / "log.toml"),
                 "--kind", "dynamic", "--out", str(tmp_path / "out"), "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "'panda_finger_joint1' (locked" in err and "unknown" not in err
    assert "[torques] exclude" in err and len(err.strip().splitlines()) == 1


def test_a_dead_column_of_a_plain_table_is_refused_with_the_exclude_line(ur5, dead_wrist, tmp_path):
    log, _, _ = dead_wrist
    write_log(tmp_path / "log.csv", replace(log, excluded=()).subset(np.arange(100)))
    dead = ur5.joint_names[DEAD]
    with pytest.raises(wb.WorkbenchError, match=rf'tau_{dead}.*constant.*exclude = \["{dead}"\]'):
        read_log(tmp_path / "log.csv", ur5, require=("tau",))


def test_a_channel_of_noise_is_diagnosed_with_the_exclude_line(ur5, dead_wrist):
    log, tau, _ = dead_wrist
    noisy = 4  # wrist_2_joint: noise of its torque's RMS instead of its torque
    logged = tau.copy()
    size = np.sqrt(np.mean(tau[:, noisy] ** 2))
    logged[:, noisy] = size * np.random.default_rng(5).normal(size=len(tau))
    found = {f.joint: f for f in compare_efforts(replace(log, tau=logged, excluded=()), ur5)}
    finding = found[ur5.joint_names[noisy]]
    assert finding.verdict == "uncorrelated" and finding.suspicious
    assert f'[torques] exclude = ["{ur5.joint_names[noisy]}"]' in finding.message


@pytest.mark.parametrize(
    ("mine", "held"), [("", 'exclude = ["wrist_3_joint"]\n'), ('unit = "A"\n', "")]
)
def test_a_validation_log_leaving_out_other_channels_is_refused(dead_wrist, tmp_path, capsys,
                                                                mine, held):  # fmt: skip
    log, tau, _ = dead_wrist
    write_log(tmp_path / "log.csv", replace(log, tau=tau, excluded=()).subset(np.arange(200)))
    text = csv_description(log.joint_names)
    (tmp_path / "main.toml").write_text(text + mine)
    (tmp_path / "held.toml").write_text(text + held)
    code = main(["calibrate", "--model", "ur5", "--log", str(tmp_path / "main.toml"),
                     "--validation-log", str(tmp_path / "held.toml"), "--kind", "dynamic",
                     "--out", str(tmp_path / "out"), "--quiet"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "--validation-log" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


def test_a_dead_channel_the_effort_check_skips_is_warned_of(ur5, dead_wrist, tmp_path):
    log, tau, _ = dead_wrist
    logged = tau.copy()
    logged[:, DEAD] = (
        1e-3 * np.sqrt(np.mean(tau[:, DEAD] ** 2)) * np.random.default_rng(2).normal(size=len(tau))
    )
    write_log(tmp_path / "log.csv", replace(log, tau=logged, excluded=()))
    outcome = run_calibration(Request("ur5", str(tmp_path / "log.csv"), "dynamic",
                                      terms=("friction",)))  # fmt: skip
    dead = ur5.joint_names[DEAD]
    check = outcome.report.summary["effort_check"]["joints"][dead]
    assert check["verdict"] == "skipped"  # too small a rigid-body torque to judge
    assert dead in outcome.report.summary["heldout_per_joint"]["worse_than_zero"]
    warned = [m for m in outcome.messages if f"'{dead}'" in m and "worse than zero" in m]
    assert len(warned) == 1 and f'[torques] exclude = ["{dead}"]' in warned[0]


def test_a_zero_scale_is_refused_unless_its_joint_is_excluded(ur5, dead_wrist, tmp_path):
    log, tau, _ = dead_wrist
    write_log(tmp_path / "log.csv", replace(log, tau=tau, excluded=()).subset(np.arange(100)))
    text = csv_description(ur5.joint_names, ("positions", "torques"))
    text += "scale = [1.0, 1.0, 1.0, 1.0, 1.0, 0.0]\n"
    dead = ur5.joint_names[DEAD]
    (tmp_path / "zero.toml").write_text(text)
    with pytest.raises(wb.WorkbenchError, match=rf'scale.* is 0 for .*exclude = \["{dead}"\]'):
        read_log(tmp_path / "zero.toml", ur5, require=("tau",))
    (tmp_path / "excluded.toml").write_text(text + f'exclude = ["{dead}"]\n')
    assert read_log(tmp_path / "excluded.toml", ur5, require=("tau",)).excluded == (dead,)


def test_a_joint_too_light_to_judge_does_not_make_the_nominal_worse_than_zero(ur5, dead_wrist):
    log, tau, truth = dead_wrist
    friction_only = tau.copy()  # the wrist's torque without its (tiny) rigid-body part
    friction_only[:, DEAD] = (
        tau[:, DEAD] - rnea(wb.to_pinocchio(truth.chain), log.q, log.dq, log.ddq)[:, DEAD]
    )
    others = tuple(j for j in ur5.joint_names if j != ur5.joint_names[DEAD])
    alone = replace(log, tau=friction_only, excluded=others)
    found = {f.joint: f.verdict for f in compare_efforts(alone, ur5)}
    assert found[ur5.joint_names[DEAD]] == "skipped"
    assert diagnose(alone, ur5) == []
    flipped = replace(alone, tau=-friction_only)  # still no unit to judge: nothing to diagnose
    assert diagnose(flipped, ur5) == []
