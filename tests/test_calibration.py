"""Calibration on synthetic iiwa logs: recovery, reloaded URDFs against Pinocchio, noise, CLI."""

from __future__ import annotations

import json

import numpy as np
import pinocchio as pin
import pytest
from scipy.linalg import block_diag

import workbench as wb
from workbench.calibration.cross_validation import calibrate
from workbench.calibration.fitting.dynamic import calibrate_dynamic
from workbench.calibration.fitting.kinematic import KinematicProblem, calibrate_kinematic
from workbench.calibration.fitting.twist import calibrate_twist
from workbench.calibration.problems.problem import Options
from workbench.calibration.reporting.report import write_report
from workbench.calibration.selection.validation import EndSplit
from workbench.calibration.simulation.simulate import exciting_trajectory, simulate_log
from workbench.cli import main
from workbench.eta import twist_covariance
from workbench.identification.drives import Drives
from workbench.identification.torque_model import TorqueModel
from workbench.models.urdf import load_urdf
from workbench.testing import central_differences


@pytest.fixture(scope="module")
def iiwa() -> wb.Chain:
    return wb.models.load("iiwa")


def held_out_states(chain, samples=50):
    _, q, dq, ddq = exciting_trajectory(chain, samples, dt=0.037, seed=99)
    return q, dq, ddq


def pinocchio_positions(urdf, frame, q):
    model = pin.buildModelFromUrdf(str(urdf))
    data = model.createData()
    fid = model.getFrameId(frame)
    out = []
    for qs in q:
        pin.framesForwardKinematics(model, data, qs)
        out.append(data.oMf[fid].translation.copy())
    return np.array(out)


def pinocchio_torques(urdf, q, dq, ddq):
    model = pin.buildModelFromUrdf(str(urdf))
    data = model.createData()
    return np.array([pin.rnea(model, data, *s).copy() for s in zip(q, dq, ddq, strict=True)])


def test_kinematic_jacobian_matches_central_differences(iiwa):
    log, _ = simulate_log(iiwa, samples=40, orientation=True, noise=1e-3)
    problem = KinematicProblem.from_log(log)
    _, J = problem.evaluate(iiwa)
    J_fd = central_differences(
        lambda eta: problem.residual(iiwa.with_eta(eta)), np.zeros(6 * (iiwa.n + 1))
    )
    assert np.abs(J - J_fd).max() < 1e-6 * np.abs(J).max()


def test_kinematic_recovers_truth(iiwa, tmp_path):
    log, truth = simulate_log(iiwa, samples=1000, perturb=1e-2)
    fit = calibrate_kinematic(iiwa, KinematicProblem.from_log(log))
    assert np.abs(fit.chain.twists - truth.chain.twists).max() < 1e-8
    tool = fit.chain.tool_frame[:3, 3] - truth.chain.tool_frame[:3, 3]
    assert np.abs(tool).max() < 1e-8
    # the tool's rotation is not seen by positions: reported and left at the nominal
    assert fit.subspace.basis.shape[1] < 6 * (iiwa.n + 1) - 2 * iiwa.n
    urdf = wb.write_urdf(fit.chain, tmp_path / "calibrated.urdf")
    q, _, _ = held_out_states(iiwa)
    expected = wb.dynamics.kinematics.forward_kinematics(truth.chain, q)[:, :3, 3]
    assert np.abs(pinocchio_positions(urdf, iiwa.tool_name, q) - expected).max() < 1e-8


def test_kinematic_with_orientation_and_robust_loss(iiwa):
    log, truth = simulate_log(iiwa, samples=500, perturb=1e-2, orientation=True)
    log.position[::50] += 0.05  # outliers
    fit = calibrate_kinematic(iiwa, KinematicProblem.from_log(log), loss="soft_l1", f_scale=1e-4)
    # soft-L1 down-weights but does not remove the outliers: a small bias remains
    assert np.abs(fit.chain.twists - truth.chain.twists).max() < 5e-5
    assert np.abs(fit.chain.tool_frame - truth.chain.tool_frame).max() < 5e-5


def test_twist_recovers_truth(iiwa, tmp_path):
    log, truth = simulate_log(iiwa, kind="twist", samples=500, perturb=1e-2)
    fit = calibrate_twist(iiwa, log)
    assert np.abs(fit.chain.twists - truth.chain.twists).max() < 1e-8
    urdf = wb.write_urdf(fit.chain, tmp_path / "calibrated.urdf")
    q, dq, ddq = held_out_states(iiwa)
    expected = wb.inverse_dynamics(truth.chain, q, dq, ddq)
    assert np.abs(pinocchio_torques(urdf, q, dq, ddq) - expected).max() < 1e-8


def true_standard_parameters(truth, drives: Drives):
    """x of the ground truth: its inertias and friction in the TorqueModel order."""
    friction = {f"fv{j + 1}": v for j, v in enumerate(truth.viscous)}
    friction |= {f"fs{j + 1}": c for j, c in enumerate(truth.coulomb)}
    return TorqueModel(truth.chain, drives).values(np.array([friction[k] for k in drives.names]))


def test_dynamic_recovers_base_parameters(iiwa, tmp_path):
    log, truth = simulate_log(iiwa, kind="dynamic", samples=500, perturb=5e-2, friction=1.0)
    fit = calibrate_dynamic(iiwa, log)
    beta_true = fit.base.matrix @ true_standard_parameters(truth, fit.model.drives)
    assert np.abs(fit.beta - beta_true).max() < 1e-8 * np.abs(beta_true).max()
    for j in range(iiwa.n):  # friction is identified on its own (not regrouped)
        assert abs(fit.value(f"fv{j + 1}") - truth.viscous[j]) < 1e-8
        assert abs(fit.value(f"fs{j + 1}") - truth.coulomb[j]) < 1e-8
    urdf = wb.write_urdf(fit.chain, tmp_path / "calibrated.urdf")
    q, dq, ddq = held_out_states(iiwa)
    expected = wb.inverse_dynamics(truth.chain, q, dq, ddq)
    assert np.abs(pinocchio_torques(urdf, q, dq, ddq) - expected).max() < 1e-8


def test_physical_consistency_on_noisy_torques(iiwa, tmp_path):
    """With noise the least-squares estimate has no consistent completion; --physical must
    return a model with positive definite pseudo-inertias that fits the data as well."""
    from workbench.inertia import pseudo_inertia

    log, _ = simulate_log(iiwa, kind="dynamic", samples=1000, noise=0.01, seed=5)
    free = calibrate_dynamic(iiwa, log)
    fit = calibrate_dynamic(iiwa, log, physical=True)
    assert fit.physically_consistent
    eigenvalues = np.linalg.eigvalsh(pseudo_inertia(fit.chain.phi.reshape(-1, 10)))
    assert eigenvalues.min() > 0
    friction = {name: fit.drive_values[k] for k, name in enumerate(fit.model.drives.names)}
    assert min(friction.values()) >= -1e-12
    rms = []
    for f in (free, fit):  # the completed model's torques, through the calibrated chain
        drive = np.einsum("snk,k->sn", f.model.drives.columns(log.dq, log.ddq), f.drive_values)
        tau = wb.inverse_dynamics(f.chain, log.q, log.dq, log.ddq) + drive
        rms.append(np.sqrt(np.mean((tau - log.tau) ** 2)))
    assert rms[1] <= 1.01 * rms[0]
    # the exported URDF reproduces the constrained model's torques in Pinocchio
    urdf = wb.write_urdf(fit.chain, tmp_path / "calibrated.urdf")
    q, dq, ddq = held_out_states(iiwa)
    assert (
        np.abs(
            pinocchio_torques(urdf, q, dq, ddq) - wb.inverse_dynamics(fit.chain, q, dq, ddq)
        ).max()
        < 1e-8
    )


def test_kinematic_noise_within_reported_std(iiwa):
    log, truth = simulate_log(iiwa, samples=1000, perturb=1e-2, noise=1e-4, seed=3)
    fit = calibrate_kinematic(iiwa, KinematicProblem.from_log(log))
    std = np.sqrt(np.einsum("nii->ni", twist_covariance(fit.chain, fit.covariance)))
    err = np.abs(fit.chain.twists - truth.chain.twists)
    assert np.all(err <= 3 * std + 1e-12)
    assert abs(fit.solution.sigma / 1e-4 - 1) < 0.1


def test_dynamic_noise_within_reported_std(iiwa):
    log, truth = simulate_log(iiwa, kind="dynamic", samples=1000, noise=0.5, friction=1.0, seed=3)
    fit = calibrate_dynamic(iiwa, log, weighted=False)
    err = fit.beta - fit.base.matrix @ true_standard_parameters(truth, fit.model.drives)
    assert np.all(np.abs(err) <= 3 * fit.std)


@pytest.mark.parametrize("seed", [3, 4])
def test_twist_noise_within_reported_std(iiwa, seed):
    """The twist errors are consistent with the reported covariance: in the directions the
    twists can move (4 per revolute joint, dA = -ad_A d eta), the Mahalanobis distance squared
    of the error is below the chi-square 99.9 % quantile."""
    from scipy.stats import chi2

    log, truth = simulate_log(iiwa, kind="twist", samples=1000, noise=2e-3, seed=seed)
    fit = calibrate_twist(iiwa, log, max_std=np.inf)  # every identifiable direction
    p = 6 * iiwa.n
    D = block_diag(*(-wb.lie.ad(fit.chain.twists)))  # d twists / d eta at the solution
    cov = D @ fit.covariance[:p, :p] @ D.T
    values, vectors = np.linalg.eigh(cov)
    seen = values > 1e-12 * values.max()
    error = (fit.chain.twists - truth.chain.twists).ravel()
    z = vectors[:, seen].T @ error
    d2 = float(np.sum(z**2 / values[seen]))
    assert seen.sum() == 4 * iiwa.n
    assert d2 < chi2.ppf(0.999, seen.sum())
    outside = error - vectors[:, seen] @ z  # second order: |omega| stays 1
    assert np.linalg.norm(outside) < 1e-2 * np.linalg.norm(error)


def test_twist_calibrates_only_what_the_log_determines(iiwa):
    """Directions whose predicted standard deviation exceeds max_std stay at the nominal: with
    more noise fewer directions are calibrated, and the reported std orders them."""
    kept = []
    for noise in (1e-3, 1e-1):
        log, _ = simulate_log(iiwa, kind="twist", samples=1000, noise=noise, seed=3)
        fit = calibrate_twist(iiwa, log, max_std=1e-3)
        seen = fit.observability
        assert np.all(np.diff(seen.std) >= 0) and seen.kept == np.sum(seen.std <= 1e-3)
        kept.append(seen.kept)
    assert kept[0] > kept[1]


def test_report_files(iiwa, tmp_path):
    log, _ = simulate_log(iiwa, kind="dynamic", samples=300, noise=0.1)
    report = calibrate(iiwa, "dynamic", log, EndSplit(0.25), Options(physical=False))
    write_report(tmp_path, report)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["samples"] == {"fitted": 300, "heldout": 74}  # t >= 75 % of the span
    assert summary["rms"]["validation_after"] < summary["rms"]["validation_before"]
    assert summary["heldout_relative_rms"] == summary["heldout"]["calibrated"]["relative_rms"]
    assert (tmp_path / "parameters.csv").read_text().startswith("name,value,rel_std_percent\n")
    assert (tmp_path / "residuals.png").stat().st_size > 0
    # an unconstrained fit of 300 noisy samples has non-positive-definite link inertias: no
    # URDF is written (it would not be the model), the parameters are in parameters.csv
    impossible = wb.chain.impossible_inertias(report.chain)
    assert impossible and not (tmp_path / "calibrated.urdf").exists()
    assert summary["urdf_check"]["impossible_links"] == impossible
    assert summary["urdf_check"]["written"] is False


@pytest.mark.parametrize("kind", ["kinematic", "twist"])
def test_cli_end_to_end(tmp_path, kind):
    log = tmp_path / f"{kind}.csv"
    assert (
        main(["simulate-log", "iiwa", "--out", str(log), "--samples", "600", "--kind", kind]) == 0
    )
    out = tmp_path / "out"
    args = ["calibrate", "--model", "iiwa", "--log", str(log), "--kind", kind, "--out", str(out)]
    if kind == "kinematic":  # the twists without a ridge: auto's evidence, linearised at the
        args += ["--parameters", "twists"]  # nominal, keeps a small one on noise-free data
    assert main([*args, "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rms"]["validation_after"] < 1e-8
    truth = load_urdf(tmp_path / f"{kind}.truth.urdf")
    calibrated = load_urdf(out / "calibrated.urdf")
    assert np.abs(calibrated.twists - truth.twists).max() < 1e-8
    expected = {"calibrated.urdf", "parameters.csv", "report.html", "residuals.png", "summary.json"}
    if kind == "twist":
        expected |= {"calibrated.drives.toml", "heldout_torques.png"}
    assert {p.name for p in out.iterdir()} == expected


def test_cli_bad_log_exits_2(tmp_path, capsys):
    log = tmp_path / "bad.csv"
    log.write_text("t,q_nope\n0,1\n")
    out = tmp_path / "out"
    args = [
        "calibrate",
        "--model",
        "iiwa",
        "--log",
        str(log),
        "--kind",
        "dynamic",
        "--out",
        str(out),
    ]
    assert main(args) == 2
    expected = "bad.csv: column(s) q_nope name no movable joint of the model; its movable joints"
    assert f"{expected} are iiwa_joint_1" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["kinematic", "twist", "dynamic"])
def test_recovery_10000_samples(iiwa, kind):
    """Noise-free logs of a perturbed iiwa: the fit recovers the truth. The kinematic fit is
    asked for the twists without a ridge: the default selection's evidence, linearised at
    the nominal, reads the model's nonlinearity as noise and keeps a small ridge toward the
    nominal (2.8e-8 m held out here), which only a noise-free log can show."""
    log, truth = simulate_log(iiwa, kind=kind, samples=10_000, perturb=1e-2)
    options = Options(parameters="twists") if kind == "kinematic" else None
    report = calibrate(iiwa, kind, log, EndSplit(0.2), options)
    assert report.summary["rms"]["validation_after"] < 1e-8
    if kind != "dynamic":
        assert np.abs(report.chain.twists - truth.chain.twists).max() < 1e-8


def test_known_payload_is_taken_off(iiwa):
    """Torques logged with a payload on the last link (Pinocchio's rnea on the robot with the
    payload appended): declaring the payload gives the robot's own base parameters."""
    from dataclasses import replace as copy_with

    from workbench.recordings.log import Log

    link = iiwa.n - 1
    phi = wb.inertia.phi_from_com(2.0, np.array([0.01, -0.02, 0.08]), np.diag([0.01, 0.012, 0.004]))
    model = wb.to_pinocchio(iiwa)
    model.appendBodyToJoint(
        link + 1, pin.Inertia.FromDynamicParameters(wb.inertia.phi_to_pinocchio(phi)),
        pin.SE3.Identity(),
    )  # fmt: skip
    data = model.createData()
    t, q, dq, ddq = exciting_trajectory(iiwa, 400, dt=0.02, seed=8)
    tau = np.array([pin.rnea(model, data, *s).copy() for s in zip(q, dq, ddq, strict=True)])
    log = Log(t=t, q=q, dq=dq, ddq=ddq, tau=tau, joint_names=iiwa.joint_names)
    # least squares: the shipped iiwa's inertias are not consistent (links 4 and 7)
    fit = calibrate_dynamic(iiwa, copy_with(log, payload=(link, phi)), physical=False)
    beta = fit.base.matrix @ TorqueModel(iiwa, fit.model.drives).values()
    assert np.abs(fit.beta - beta).max() < 1e-8 * np.abs(beta).max()
    without = calibrate_dynamic(
        iiwa, log, physical=False
    )  # not declared: the payload lands in link 7
    assert np.abs(without.beta - beta).max() > 1e-3 * np.abs(beta).max()
