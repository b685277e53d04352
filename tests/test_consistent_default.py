"""The default dynamic fit: physically consistent, with a prior toward the nominal model where
the log says nothing, and a model far from its nominal one said so.

A UR5 (example-robot-data) whose wrist 1 barely moves (2 % of an exciting motion) and whose
links are 30 % off the URDF: torques from Pinocchio's RNEA of the true model, friction and
noise. Its masses are compared with the truth's, its held-out error with the least-squares
fit's. Link figures are compared with values computed here from the URDF's masses and with
Pinocchio's CRBA.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest

import workbench as wb
from workbench.calibration.checks.fit_plausibility import diagnose
from workbench.calibration.checks.link_plausibility import compare_links
from workbench.calibration.cross_validation import calibrate
from workbench.calibration.problems.problem import Options
from workbench.calibration.selection.validation import Folds
from workbench.calibration.simulation.simulate import simulate_log
from workbench.cli import main
from workbench.recordings.log_files import write_log

BARELY = 3  # wrist_1_joint


@pytest.fixture(scope="module")
def ur5():
    return wb.models.load("ur5")


@pytest.fixture(scope="module")
def barely_excited(ur5):
    """The UR5 log with wrist 1 scaled to 2 % of its motion, torques of the truth (Pinocchio)."""
    log, truth = simulate_log(
        ur5, kind="dynamic", samples=1500, perturb=0.3, noise=0.05, friction=0.5, seed=2
    )
    q, dq, ddq = log.q.copy(), log.dq.copy(), log.ddq.copy()
    centre = q[:, BARELY].mean()
    q[:, BARELY] = centre + 0.02 * (q[:, BARELY] - centre)
    dq[:, BARELY] *= 0.02
    ddq[:, BARELY] *= 0.02
    model = wb.to_pinocchio(truth.chain)
    data = model.createData()
    tau = np.array([pin.rnea(model, data, *s).copy() for s in zip(q, dq, ddq, strict=True)])
    tau += truth.viscous * dq + truth.coulomb * np.sign(dq)
    tau += np.random.default_rng(1).normal(scale=0.05, size=tau.shape)
    return replace(log, q=q, dq=dq, ddq=ddq, tau=tau), truth


def masses(chain: wb.Chain) -> np.ndarray:
    return wb.inertia.phi_from_matrix(chain.local_inertias())[:, 0]


def test_barely_excited_joint_keeps_masses_near_the_truth(ur5, barely_excited):
    """Default fit: consistent, every mass within 2x of the truth's, held-out relative RMS
    within 5 % of the least-squares fit's (which puts a link at many times its true mass and
    has no consistent inertias)."""
    log, truth = barely_excited
    options = Options(terms=("friction",))
    default = calibrate(ur5, "dynamic", log, Folds(5), options)
    with warnings.catch_warnings():  # the least-squares model's impossible inertias
        warnings.simplefilter("ignore", wb.WorkbenchWarning)
        plain = calibrate(ur5, "dynamic", log, Folds(5), replace(options, physical=False))
    assert default.summary["physically_consistent"]
    assert not plain.summary["physically_consistent"]
    ratio = masses(default.chain) / masses(truth.chain)
    assert np.all((ratio > 0.5) & (ratio < 2.0)), ratio
    plain_ratio = masses(plain.chain) / masses(truth.chain)
    assert plain_ratio.max() > 3.0  # what the prior prevents
    held = default.summary["heldout_relative_rms"]
    assert held <= 1.05 * plain.summary["heldout_relative_rms"]


def test_compare_links_against_the_urdf_and_crba(ur5):
    """A link made 4 times heavier (inertia about its centre of mass unchanged) is named with
    its mass ratio; a link whose inertia is 20 times larger too; the mass-matrix diagonal ratio
    is Pinocchio's CRBA of both models."""
    mass, com, inertia_com = wb.inertia.com_from_phi(ur5.phi)
    mass[2] *= 4.0
    inertia_com[4] *= 20.0
    fitted = replace(
        ur5, inertias=wb.inertia.matrix_from_phi(wb.inertia.phi_from_com(mass, com, inertia_com))
    )
    q = np.random.default_rng(0).uniform(-1, 1, size=(20, ur5.n))
    comparison = compare_links(ur5, fitted, q)
    link2, link4 = ur5.link_names[2], ur5.link_names[4]
    nominal = pin.buildModelFromUrdf(str(wb.models.urdf_path("ur5")))
    by_name = {nominal.names[i]: nominal.inertias[i].mass for i in range(1, nominal.njoints)}
    assert comparison["links"][link2]["nominal_mass"] == pytest.approx(
        by_name[ur5.joint_names[2]], rel=1e-12
    )
    assert comparison["links"][link2]["mass_ratio"] == pytest.approx(4.0, rel=1e-12)
    assert comparison["links"][link4]["moment_ratio"] == pytest.approx(20.0, rel=1e-9)
    found = comparison["implausible"]
    assert len(found) == 2 and f"'{link2}' has mass" in found[0] and f"'{link4}'" in found[1]
    diagonal = {}
    for name, chain in (("nominal", ur5), ("fitted", fitted)):
        model = wb.to_pinocchio(chain)
        data = model.createData()
        diagonal[name] = np.array([np.diag(pin.crba(model, data, s)) for s in q])
    expected = np.median(diagonal["fitted"] / diagonal["nominal"], axis=0)
    got = np.array(list(comparison["mass_matrix_diagonal_ratio"].values()))
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_a_far_link_on_a_correct_log_is_a_weakly_identified_link(ur5):
    """The efforts of a correct log of the nominal UR5 with a fitted link 5 times its nominal
    mass: the diagnosis names the link and the cause 'weakly identified link', not a unit or
    sign."""
    log, _ = simulate_log(ur5, kind="dynamic", samples=500, perturb=0.0, noise=0.05, seed=2)
    mass, com, inertia_com = wb.inertia.com_from_phi(ur5.phi)
    mass[1] *= 5.0
    fitted = replace(
        ur5, inertias=wb.inertia.matrix_from_phi(wb.inertia.phi_from_com(mass, com, inertia_com))
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", wb.WorkbenchWarning)
        diagnoses = diagnose(log, ur5, fitted)
    assert [d.cause for d in diagnoses] == ["weakly identified link"]
    assert f"link '{ur5.link_names[1]}' has mass" in diagnoses[0].evidence


def test_export_refuses_results_whose_calibration_exited_1(tmp_path, capsys):
    """A planar 2R log whose torques are negated: calibrate exits 1 naming the torque sign and
    records it in summary.json; export of that folder exits 2 naming why, and writes it with
    --force."""
    chain = wb.models.load("planar_2r")
    log, _ = simulate_log(chain, kind="dynamic", samples=400, noise=0.01, seed=3)
    write_log(tmp_path / "negated.csv", replace(log, tau=-log.tau))
    out = tmp_path / "results"
    code = main(["calibrate", "--model", "planar_2r", "--log", str(tmp_path / "negated.csv"),
                 "--kind", "dynamic", "--quiet", "--out", str(out)])  # fmt: skip
    assert code == 1
    verdict = json.loads((out / "summary.json").read_text())["exit"]
    assert verdict["code"] == 1 and "torque sign" in verdict["reasons"][0]
    capsys.readouterr()
    mjcf = tmp_path / "model.xml"
    assert main(["export", str(out), "--mjcf", str(mjcf)]) == 2
    error = capsys.readouterr().err
    assert "exited 1" in error and "torque sign" in error and "--force" in error
    assert not mjcf.exists()
    assert main(["export", str(out), "--mjcf", str(mjcf), "--force"]) == 0
    assert mjcf.is_file()
