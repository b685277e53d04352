"""Dead or untrusted torque channels left out with ``[torques] exclude``, their motion kept.

A UR5 (example-robot-data) log whose truth is 5 % off the URDF: torques from Pinocchio's RNEA
of the truth plus friction, and wrist 1's channel dead (a thousandth of its torque's size,
noise only). Excluded, the fit must reproduce every other joint's torque as Pinocchio's
``computeJointTorqueRegressor`` gives it with the truth's parameters (the base parameters the
remaining rows determine are the truth's), including at states where only wrist 1 moves (its
motion enters the other joints' torques); not excluded, the diagnosis names the channel and
says how to exclude it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest

import workbench as wb
from workbench.calibration.checks.fit_plausibility import diagnose
from workbench.calibration.cross_validation import calibrate
from workbench.calibration.problems.problem import Options
from workbench.calibration.run import Request, run_calibration
from workbench.calibration.selection.validation import Folds
from workbench.calibration.simulation.simulate import simulate_log
from workbench.cli import main
from workbench.recordings.log_files import read_log, write_log
from workbench.testing.log_descriptions import csv_description
from workbench.testing.pinocchio_reference import truth_torques

DEAD = 3  # wrist_1_joint
OPTIONS = Options(terms=("friction",))


@pytest.fixture(scope="module")
def ur5():
    return wb.models.load("ur5")


@pytest.fixture(scope="module")
def recorded(ur5):
    """(log with wrist 1's channel dead, truth): torques of the truth by Pinocchio's RNEA."""
    log, truth = simulate_log(ur5, kind="dynamic", samples=800, perturb=0.05, friction=0.3, seed=5)
    tau = truth_torques(truth, log)
    rng = np.random.default_rng(7)
    tau += rng.normal(scale=1e-3, size=tau.shape)
    tau[:, DEAD] = 1e-3 * np.sqrt(np.mean(tau[:, DEAD] ** 2)) * rng.normal(size=len(log))
    return replace(log, tau=tau, temperature=None), truth


@pytest.fixture(scope="module")
def excluded_fit(ur5, recorded):
    log, _ = recorded
    options = replace(OPTIONS, prior_weights=(1.0, 100.0))
    return calibrate(ur5, "dynamic", replace(log, excluded=(ur5.joint_names[DEAD],)),
                     Folds(4), options)  # fmt: skip


def pinocchio_regressor_torques(chain: wb.Chain, q, dq, ddq) -> np.ndarray:
    """Rigid-body torques (m, n) as Pinocchio's joint-torque regressor times the chain's
    dynamic parameters (each link's, Pinocchio's own order and frames)."""
    model = wb.to_pinocchio(chain)
    data = model.createData()
    pi = np.concatenate([model.inertias[i].toDynamicParameters() for i in range(1, model.njoints)])
    return np.array([
        pin.computeJointTorqueRegressor(model, data, *s) @ pi for s in zip(q, dq, ddq, strict=True)
    ])  # fmt: skip


def test_excluded_channel_leaves_the_others_identified_as_the_truth(ur5, recorded, excluded_fit):
    """The calibrated rigid body predicts every kept joint's torque as the truth does, by
    Pinocchio's regressor, at fresh states (1e-3 of the torques' RMS); wrist 1's own torque is
    not determined (its rotor's and link's terms seen only there stay near the nominal)."""
    _, truth = recorded
    rng = np.random.default_rng(11)
    q = rng.uniform(-np.pi, np.pi, size=(60, ur5.n))
    dq, ddq = rng.normal(size=(2, 60, ur5.n))
    fitted = pinocchio_regressor_torques(excluded_fit.chain, q, dq, ddq)
    true = pinocchio_regressor_torques(truth.chain, q, dq, ddq)
    kept = np.arange(ur5.n) != DEAD
    scale = np.sqrt(np.mean(true[:, kept] ** 2))
    assert np.max(np.abs(fitted[:, kept] - true[:, kept])) < 1e-3 * scale
    assert excluded_fit.summary["physically_consistent"]


def test_the_excluded_joints_motion_still_enters(ur5, recorded, excluded_fit):
    """At states where only wrist 1 accelerates, the kept joints' torques of the calibrated model
    equal Pinocchio's RNEA of the truth, and differ from those with wrist 1 at rest."""
    _, truth = recorded
    rng = np.random.default_rng(12)
    q = rng.uniform(-np.pi, np.pi, size=(20, ur5.n))
    dq, ddq = np.zeros((2, 20, ur5.n))
    dq[:, DEAD], ddq[:, DEAD] = rng.normal(size=(2, 20)) * 3.0
    model = wb.to_pinocchio(truth.chain)
    data = model.createData()
    fitted = wb.to_pinocchio(excluded_fit.chain)
    fitted_data = fitted.createData()
    kept = np.arange(ur5.n) != DEAD
    for s in zip(q, dq, ddq, strict=True):
        true = pin.rnea(model, data, *s)[kept]
        predicted = pin.rnea(fitted, fitted_data, *s)[kept]
        at_rest = pin.rnea(model, data, s[0], 0 * s[1], 0 * s[2])[kept]
        effect = np.abs(true - at_rest).max()
        assert effect > 0.05  # wrist 1's motion moves the others' torques
        assert np.abs(predicted - true).max() < 1e-2 * effect


def test_excluded_channel_has_no_figures(ur5, excluded_fit):
    """summary.json names the excluded channel and gives no figure for it."""
    summary = excluded_fit.summary
    dead = ur5.joint_names[DEAD]
    assert summary["torques_excluded"] == [dead]
    assert dead not in summary["sigma_per_joint"]
    for block in ("calibrated", "nominal"):
        assert dead not in summary["heldout"][block]["relative_rms_per_joint"]
    assert summary["heldout"]["calibrated"]["relative_rms"] < 0.01
    leading = {name.split(" ")[0] for name in summary["base_parameters"]["names"]}
    assert not leading & {"fv4", "fs4", "Izz4"}  # seen in wrist 1's torque only
    assert {"fv3", "fs3", "fv5", "fs5"} <= leading
    assert f"excluded ([torques] exclude): {dead}" in excluded_fit.files["calibrated.drives.toml"]


def test_dead_channel_is_diagnosed_with_its_exclusion(ur5, recorded, excluded_fit):
    """Not excluded, the dead channel spoils the held-out figure and the diagnosis names it and
    the exclude line; excluded, nothing is diagnosed."""
    log, _ = recorded
    dead = ur5.joint_names[DEAD]
    spoiled = calibrate(ur5, "dynamic", log, Folds(4), OPTIONS)
    held = spoiled.summary["heldout"]["calibrated"]["relative_rms_per_joint"][dead]
    assert held > 0.9  # the model predicts torque where the channel logs none
    diagnoses = diagnose(log, ur5, spoiled.chain)
    dead_channel = [d for d in diagnoses if d.cause == "dead channel"]
    assert dead_channel and f'exclude = ["{dead}"]' in dead_channel[0].evidence
    excluded = replace(log, excluded=(dead,))
    assert diagnose(excluded, ur5, excluded_fit.chain) == []


# ------------------------------------------------------------------ the description's key
@pytest.fixture(scope="module")
def described(tmp_path_factory, ur5, recorded):
    """A log description of the recorded table: (folder, description text maker)."""
    folder = tmp_path_factory.mktemp("exclusion")
    log, _ = recorded
    write_log(folder / "log.csv", log.subset(np.arange(300)))

    def describe(name: str, torques: str) -> str:
        text = csv_description(ur5.joint_names) + torques
        path = folder / f"{name}.toml"
        path.write_text(text)
        return str(path)

    return folder, describe


def test_exclude_is_read_in_the_models_joint_order(ur5, described):
    _, describe = described
    names = ur5.joint_names
    path = describe("two", f'exclude = ["{names[4]}", "{names[DEAD]}"]\n')
    log = read_log(path, ur5, require=("tau",))
    assert log.excluded == (names[DEAD], names[4])
    np.testing.assert_array_equal(log.torque_channels(), [1, 1, 1, 0, 0, 1])


def test_exclude_naming_an_unknown_joint_is_refused(ur5, described, tmp_path, capsys):
    """The error names the unknown joint and the key; the command line exits 2."""
    _, describe = described
    path = describe("unknown", 'exclude = ["arm_5_joint"]\n')
    with pytest.raises(wb.WorkbenchError, match=r"exclude.*'arm_5_joint'"):
        read_log(path, ur5, require=("tau",))
    code = main(["calibrate", "--model", "ur5", "--log", path, "--kind", "dynamic",
                 "--out", str(tmp_path / "out"), "--quiet"])  # fmt: skip
    assert code == 2 and "arm_5_joint" in capsys.readouterr().err


def test_a_constant_torque_column_is_refused_unless_excluded(ur5, recorded, tmp_path):
    """A zeroed channel cannot be read as a torque; the refusal gives the exclude line, and
    with it the log is read and calibrated (the summary lists the channel)."""
    log, _ = recorded
    tau = log.tau.copy()
    tau[:, DEAD] = 0.0
    folder = tmp_path
    write_log(folder / "log.csv", replace(log, tau=tau).subset(np.arange(400)))
    dead = ur5.joint_names[DEAD]
    text = csv_description(ur5.joint_names)
    (folder / "plain.toml").write_text(text)
    with pytest.raises(wb.WorkbenchError, match=rf'constant.*exclude = \["{dead}"\]'):
        read_log(folder / "plain.toml", ur5, require=("tau",))
    (folder / "excluded.toml").write_text(text + f'exclude = ["{dead}"]\n')
    request = Request("ur5", str(folder / "excluded.toml"), "dynamic", terms=("friction",))
    summary = run_calibration(request).report.summary
    assert summary["torques_excluded"] == [dead]
    assert dead not in summary["heldout_per_joint"]["calibrated"]


def test_prior_weights_are_checked_on_the_folds(excluded_fit):
    """Asked for, summary.json gives the held-out figure of each prior weight on the folds; the
    weight used reproduces the held-out figure the folds gave the final model."""
    entry = excluded_fit.summary["prior_weight"]
    figures = entry["heldout_relative_rms"]
    assert set(figures) == {"1", "10", "100"} and entry["used"] == 10.0
    held = excluded_fit.summary["heldout_relative_rms"]
    assert abs(figures["10"] - held) <= 1e-9 * held
    assert all(0.0 < v < 0.05 for v in figures.values())


def test_exclude_is_refused_where_it_is_not_applied(ur5, described):
    """Only the dynamic identification of a log leaves excluded channels out: the twist kind
    refuses such a log, naming the key."""
    _, describe = described
    path = describe("twist", f'exclude = ["{ur5.joint_names[DEAD]}"]\n')
    with pytest.raises(wb.WorkbenchError, match=r"exclude.*not with --kind twist"):
        run_calibration(Request("ur5", path, "twist"))


def test_prior_weights_must_be_positive(described, tmp_path, capsys):
    _, describe = described
    path = describe("weights", "")
    with pytest.raises(SystemExit) as raised:  # argparse's exit for a bad option value
        main(["calibrate", "--model", "ur5", "--log", path, "--kind", "dynamic",
              "--prior-weights", "1,-3", "--out", str(tmp_path / "out")])  # fmt: skip
    assert raised.value.code == 2 and "positive" in capsys.readouterr().err
