"""Mis-described logs behind torque fits are diagnosed with their cause (fit_plausibility).

The logs are simulated (a perturbed truth, 1 % torque noise) and then
described wrongly in a log description written here, exactly as a user
would: radians read as degrees, a sample period ten times too long, a
duplicated or swapped column, a negative gear ratio, a torque scale of -1,
negated torque columns. Each is read (read_log), fitted (the report's
calibrate) and diagnosed; the expected cause is the mis-description this
test made.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

import workbench as wb
from workbench.calibration.checks.fit_plausibility import (
    absurd_parameters,
    check_fit,
    diagnose,
)
from workbench.calibration.cross_validation import calibrate
from workbench.calibration.simulation.simulate import (
    exciting_trajectory,
    perturbed_truth,
    simulate_log,
)
from workbench.errors import ImplausibleFit, WorkbenchError
from workbench.recordings.log import Log
from workbench.recordings.log_files import read_log, write_log

POSITIONS = 'file = "p2r.csv"\ncolumns = ["q_joint_1", "q_joint_2"]\nunit = "rad"\n'
TORQUES = 'file = "p2r.csv"\ncolumns = ["tau_joint_1", "tau_joint_2"]\n'


@pytest.fixture(scope="module")
def planar() -> wb.Chain:
    return wb.models.load("planar_2r", moving=True)


@pytest.fixture(scope="module")
def iiwa() -> wb.Chain:
    return wb.models.load("iiwa", moving=True)


@pytest.fixture(scope="module")
def folder(tmp_path_factory, planar):
    """The user's log: simulate-log planar_2r --kind dynamic --samples 500 --noise 0.01,
    written as p2r.csv, and the same with negated torque columns as negated.csv."""
    folder = tmp_path_factory.mktemp("logs")
    log, _ = simulate_log(planar, kind="dynamic", samples=500, noise=0.01)
    write_log(folder / "p2r.csv", log)
    write_log(folder / "negated.csv", replace(log, tau=-log.tau))
    return folder


def describe(folder: Path, name: str, **sections: str) -> Path:
    """A log description of p2r.csv with ``sections`` replacing the correct ones."""
    text = {"time": "sample_period = 0.01\n", "positions": POSITIONS, "torques": TORQUES}
    text.update(sections)
    path = folder / f"{name}.toml"
    path.write_text("".join(f"[{key}]\n{value}\n" for key, value in text.items()))
    return path


def diagnosed(folder, chain, name: str, **sections: str):
    """Read, fit (dynamic, last 20 % held out) and diagnose a description of the log."""
    log = read_log(describe(folder, name, **sections), chain, require=("tau",))
    with pytest.warns(wb.WorkbenchWarning):  # the fit's generic impossible-inertia warning
        report = calibrate(chain, "dynamic", log)
    return diagnose(log, chain, report.chain), report


def period_factor(diagnosis) -> float:
    """The N of "... looks N times too long" (or "... s N times too long") in the evidence."""
    return float(diagnosis.evidence.split(" times too long")[0].split()[-1])


def test_correct_description_is_plausible(folder, planar):
    diagnoses, report = diagnosed(folder, planar, "correct")
    assert diagnoses == []
    assert report.summary["heldout"]["nominal"]["relative_rms"] < 0.05


@pytest.mark.parametrize(
    "name, sections, cause",
    [
        ("degrees", {"positions": POSITIONS.replace('"rad"', '"deg"')}, "angle unit"),
        ("period", {"time": "sample_period = 0.1\n"}, "sample period"),
        (
            "gear",
            {
                "transmission": "ratios = [-1, 1]\n",
                "positions": POSITIONS + 'side = "motor"\n',
                "torques": TORQUES + 'side = "motor"\n',
            },
            "transmission sign",
        ),
        ("minus", {"torques": TORQUES + "scale = -1\n"}, "torque sign"),
        ("negated", {"torques": TORQUES.replace("p2r.csv", "negated.csv")}, "torque sign"),
        (
            "swapped_q",
            {"positions": POSITIONS.replace('_1", "q_joint_2"', '_2", "q_joint_1"')},
            "swapped columns",
        ),
        (
            "swapped_tau",
            {"torques": TORQUES.replace('_1", "tau_joint_2"', '_2", "tau_joint_1"')},
            "swapped columns",
        ),
    ],
)  # fmt: skip
def test_mis_description_is_named(folder, planar, name, sections, cause):
    diagnoses, _ = diagnosed(folder, planar, name, **sections)
    assert diagnoses, f"{name}: no diagnosis"
    assert diagnoses[0].cause == cause, diagnoses[0].message


def test_details_of_the_diagnoses(folder, planar):
    """The evidence names what was compared: the factor of the sample period (10), the
    negative gear ratio, every joint's flipped sign, the nominal model worse than zero."""
    (period,), _ = diagnosed(folder, planar, "period", time="sample_period = 0.1\n")
    assert abs(period_factor(period) - 10.0) < 0.5 and "torque scale" in period.alternatives
    gear = {"transmission": "ratios = [-1, 1]\n", "positions": POSITIONS + 'side = "motor"\n',
            "torques": TORQUES + 'side = "motor"\n'}  # fmt: skip
    (sign,), _ = diagnosed(folder, planar, "gear", **gear)
    assert "'joint_1' is negated" in sign.evidence and "negative gear ratio" in sign.evidence
    (flipped,), report = diagnosed(folder, planar, "minus", torques=TORQUES + "scale = -1\n")
    assert "every joint's effort has the opposite sign" in flipped.evidence
    assert report.summary["heldout"]["nominal"]["relative_rms"] > 1.9
    assert "worse than predicting zero" in flipped.evidence


def test_check_fit_raises_implausible_fit(folder, planar):
    log = read_log(describe(folder, "deg", positions=POSITIONS.replace('"rad"', '"deg"')), planar)
    with pytest.raises(ImplausibleFit, match=r"likely cause: angle unit") as caught:
        check_fit(log, planar)
    assert isinstance(caught.value, WorkbenchError)
    check_fit(read_log(describe(folder, "ok"), planar), planar)  # no error


def test_duplicated_column_is_refused_at_read_time(folder, planar):
    duplicated = 'file = "p2r.csv"\ncolumns = ["q_joint_1", "q_joint_1"]\n'
    with pytest.raises(WorkbenchError, match=r"'q_joint_1'.*joints 'joint_1' and 'joint_2' are "
                       r"the same column"):  # fmt: skip
        read_log(describe(folder, "duplicated", positions=duplicated), planar)
    log = read_log(describe(folder, "ok"), planar)  # in memory, the diagnosis names it too
    same = replace(log, q=log.q[:, [0, 0]], dq=log.dq[:, [0, 0]], ddq=log.ddq[:, [0, 0]])
    (diagnosis,) = diagnose(same, planar)
    assert diagnosis.cause == "duplicated column" and "identical positions" in diagnosis.evidence


def test_payload_breaking_the_triangle_inequality_is_refused(folder, planar):
    """Principal moments (0.01, 0.01, 0.03) about the COM: 0.03 > 0.01 + 0.01, no body."""
    payload = "[model.payload]\nmass = 1.0\ninertia = [0.01, 0.01, 0.03, 0.0, 0.0, 0.0]\n"
    path = describe(folder, "payload")
    path.write_text(path.read_text() + payload)
    with pytest.raises(WorkbenchError, match=r"\[model.payload\] inertia.*triangle inequality"):
        read_log(path, planar)
    path.write_text(path.read_text().replace("0.03, 0.0", "0.02, 0.0"))  # a flat disc: accepted
    assert read_log(path, planar).payload is not None


def test_unrelated_efforts_are_an_unknown_cause(folder, planar):
    """Efforts that no correction relates to the model: named 'unknown' with what was tried."""
    log = read_log(describe(folder, "ok"), planar)
    rng = np.random.default_rng(0)
    noise = rng.normal(size=log.tau.shape) * np.sqrt(np.mean(log.tau**2, axis=0))
    (diagnosis,) = diagnose(replace(log, tau=noise), planar)
    assert diagnosis.cause == "unknown" and "angle unit, sample period" in diagnosis.evidence


# ------------------------------------------------- robots with a gravity load
@pytest.fixture(scope="module")
def iiwa_log(iiwa):
    log, _ = simulate_log(iiwa, kind="dynamic", samples=600, noise=0.05, seed=4)
    return log


def test_gravity_tells_a_sample_period_from_a_torque_unit(iiwa, iiwa_log):
    """The iiwa holds a gravity load that does not scale with time: a period 10 times too long
    (t x 10, dq / 10, ddq / 100, as a reader computes them) is named with its factor, torques
    in mN m are a torque scale."""
    log = iiwa_log
    slow = replace(log, t=10 * log.t, dq=log.dq / 10, ddq=log.ddq / 100)
    (period,) = diagnose(slow, iiwa)
    assert period.cause == "sample period" and not period.alternatives
    assert abs(period_factor(period) - 10.0) < 0.5
    (unit,) = diagnose(replace(log, tau=1000 * log.tau), iiwa)
    assert unit.cause == "torque scale" and "multiply [torques] scale by 0.001" in unit.evidence
    assert diagnose(log, iiwa) == []


def test_torques_against_gravity(iiwa, iiwa_log):
    """Joint 2 of the iiwa carries the arm's weight: its negated torque acts against gravity."""
    tau = iiwa_log.tau.copy()
    tau[:, 1] *= -1
    (diagnosis,) = diagnose(replace(iiwa_log, tau=tau), iiwa)
    assert diagnosis.cause == "torque sign" and "transmission sign" in diagnosis.alternatives
    assert "'iiwa_joint_2'" in diagnosis.evidence and "against gravity" in diagnosis.evidence


def test_absurd_parameters(iiwa):
    """A link 1000 times heavier and larger, or with minus twice its mass, is named; the
    nominal model itself is not."""
    phi = iiwa.phi.copy()
    phi[3] *= 1000.0
    phi[5, 0] = -2.0 * iiwa.phi[5, 0]
    fitted = replace(iiwa, inertias=wb.inertia.matrix_from_phi(phi))
    found = absurd_parameters(iiwa, fitted)
    assert len(found) == 2
    assert iiwa.link_names[3] in found[0] and "moment of inertia" in found[0]
    assert iiwa.link_names[5] in found[1] and "mass" in found[1]
    assert absurd_parameters(iiwa, iiwa) == []


def test_implausible_fit_exits_with_code_1(monkeypatch, capsys):
    """The command line prints an ImplausibleFit as one error line and exits 1 (not 2)."""
    import workbench.commands.calibrate as command
    from workbench.cli import main

    def run(args):
        raise ImplausibleFit("log.toml: implausible fit; likely cause: angle unit: ...")

    monkeypatch.setattr(command, "run", run)
    argv = ["calibrate", "--model", "planar_2r", "--log", "log.toml", "--kind", "dynamic"]
    assert main(argv) == 1
    assert "calibrate: error: log.toml: implausible fit" in capsys.readouterr().err


def test_command_line_exits_1_on_an_implausible_fit(folder, capsys):
    """workbench calibrate: radians read as degrees exit 1 naming the angle unit, with the
    results written and the diagnosis among the report's warnings; the correct log exits 0."""
    import json

    from workbench.cli import main

    wrong = describe(folder, "cli_degrees", positions=POSITIONS.replace('"rad"', '"deg"'))
    out = folder / "results"
    argv = ["calibrate", "--model", "planar_2r", "--kind", "dynamic", "--quiet", "--out"]
    assert main([*argv, str(out), "--log", str(wrong)]) == 1
    error = capsys.readouterr().err
    assert "implausible fit; likely cause: angle unit" in error
    warnings = json.loads((out / "summary.json").read_text())["warnings"]
    assert any(w.startswith("implausible fit: likely cause: angle unit") for w in warnings)
    assert main([*argv, str(folder / "right"), "--log", str(describe(folder, "cli_ok"))]) == 0


# ------------------------------------------- a nominal model far from the robot
TIAGO_ARM = ("torso_lift_joint", *(f"arm_{i}_joint" for i in range(1, 8)))


@pytest.fixture(scope="module")
def tiago_far() -> tuple[wb.Chain, Log]:
    """TIAGo torso and arm whose links are 10 % off the URDF (centres of mass moved by up to
    10 cm): torques from Pinocchio's rnea plus friction, 1 % noise plus 0.02 N m (N)."""
    chain = wb.models.load("tiago", joints=list(TIAGO_ARM))
    truth = perturbed_truth(chain, "dynamic", 0.1, friction=0.3, seed=3)
    t, q, dq, ddq = exciting_trajectory(chain, 1000, 0.01, seed=0)
    model = wb.to_pinocchio(truth.chain)
    data = model.createData()
    tau = np.array([pin.rnea(model, data, *s).copy() for s in zip(q, dq, ddq, strict=True)])
    tau += truth.viscous * dq + truth.coulomb * np.sign(dq)
    rng = np.random.default_rng(1)
    tau += rng.normal(size=tau.shape) * (0.01 * np.sqrt(np.mean(tau**2, axis=0)) + 0.02)
    log = Log(t=t, q=q, dq=dq, ddq=ddq, tau=tau, joint_names=chain.joint_names,
              min_speed=np.full(chain.n, 0.02))  # fmt: skip
    return chain, log


def fitted_diagnoses(chain, log):
    """Diagnoses with the calibrated model, and the warnings about findings it explains."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", wb.WorkbenchWarning)
        diagnoses = diagnose(log, chain, calibrate(chain, "dynamic", log).chain)
    notes = [str(w.message) for w in caught if "effort finding" in str(w.message)]
    return diagnoses, notes


def test_a_joint_the_calibrated_model_explains_is_no_diagnosis(tiago_far):
    """arm_6's nominal torque has the opposite sign of the truth's: against the nominal model
    its effort looks flipped, but the calibrated model explains it (and every joint), so the
    finding is a warning naming it, not a diagnosis."""
    chain, log = tiago_far
    (alarm,) = diagnose(log, chain)  # the nominal model alone
    assert alarm.cause == "torque sign" and "'arm_6_joint'" in alarm.evidence
    diagnoses, notes = fitted_diagnoses(chain, log)
    assert diagnoses == []
    assert len(notes) == 1 and "'arm_6_joint'" in notes[0] and "sign is flipped" in notes[0]


@pytest.mark.parametrize("joint, factor, cause", [(3, -1.0, "torque sign"),
                                                  (1, 0.2, "torque scale")])  # fmt: skip
def test_a_mis_described_joint_stays_a_diagnosis(tiago_far, joint, factor, cause):
    """The same log with arm_3's effort negated, or arm_1's in units 5 times too large: the
    calibrated model cannot explain those joints, a diagnosis names them (with arm_6's finding,
    which the spoilt fit no longer explains)."""
    chain, log = tiago_far
    tau = log.tau.copy()
    tau[:, joint] *= factor
    diagnoses, _ = fitted_diagnoses(chain, replace(log, tau=tau))
    named = [d for d in diagnoses if f"'{chain.joint_names[joint]}'" in d.evidence]
    assert named and named[0].cause == cause, [d.message for d in diagnoses]


def test_a_scale_diagnosis_names_every_joint(iiwa, iiwa_log):
    """Efforts in raw units, gains 20, 0.5, 1.6, 0.05, 8, 3, 0.1: the diagnosis names the
    joints out of the accepted ratios with their scale, those inside (gains 0.5 and 1.6) with
    their ratio and suggested scale (the gain, as good as the nominal model), and the joint it
    could not compare."""
    gains = np.array([20.0, 0.5, 1.6, 0.05, 8.0, 3.0, 0.1])
    (diagnosis,) = diagnose(replace(iiwa_log, tau=iiwa_log.tau / gains), iiwa)
    assert diagnosis.cause == "torque scale"
    assert all(f"'iiwa_joint_{j}'" in diagnosis.evidence for j in (1, 4, 5, 6))
    for j in (2, 3):
        ratio, scale = diagnosis.evidence.split(f"iiwa_joint_{j} ")[1].split(" (scale x ", 1)
        assert abs(float(ratio) * gains[j - 1] - 1.0) < 0.1, ratio
        assert abs(float(scale.split()[0]) / gains[j - 1] - 1.0) < 0.1, scale
    assert "iiwa_joint_7: not compared" in diagnosis.evidence
