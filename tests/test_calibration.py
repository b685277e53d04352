"""Calibration on synthetic iiwa logs: recovery, reloaded URDFs against Pinocchio, noise, CLI."""

from __future__ import annotations

import json

import numpy as np
import pinocchio as pin
import pytest

import workbench as wb
from workbench.calibration.dynamic import calibrate_dynamic
from workbench.calibration.eta import twist_covariance
from workbench.calibration.kinematic import KinematicProblem, calibrate_kinematic
from workbench.calibration.report import calibrate, split_log, write_report
from workbench.calibration.simulate import exciting_trajectory, simulate_log
from workbench.calibration.twist import calibrate_twist
from workbench.cli import main


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
    h, p = 1e-6, 6 * (iiwa.n + 1)
    J_fd = np.empty_like(J)
    for k in range(p):
        e = np.zeros(p)
        e[k] = h
        J_fd[:, k] = (problem.residual(iiwa.with_eta(e)) - problem.residual(iiwa.with_eta(-e))) / (
            2 * h
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
    urdf = fit.chain.to_urdf(tmp_path / "calibrated.urdf")
    q, _, _ = held_out_states(iiwa)
    expected = wb.calibration.kinematic.forward_kinematics(truth.chain, q)[:, :3, 3]
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
    urdf = fit.chain.to_urdf(tmp_path / "calibrated.urdf")
    q, dq, ddq = held_out_states(iiwa)
    expected = wb.inverse_dynamics(truth.chain, q, dq, ddq)
    assert np.abs(pinocchio_torques(urdf, q, dq, ddq) - expected).max() < 1e-8


def test_dynamic_recovers_base_parameters(iiwa, tmp_path):
    log, truth = simulate_log(iiwa, kind="dynamic", samples=500, perturb=5e-2, friction=1.0)
    fit = calibrate_dynamic(iiwa, log)
    beta_true = fit.base.matrix @ truth.chain.phi.ravel()
    assert np.abs(fit.beta - beta_true).max() < 1e-8 * np.abs(beta_true).max()
    friction_true = np.concatenate([truth.viscous, truth.coulomb])
    assert np.abs(fit.friction - friction_true).max() < 1e-8
    urdf = fit.chain.to_urdf(tmp_path / "calibrated.urdf")
    q, dq, ddq = held_out_states(iiwa)
    expected = wb.inverse_dynamics(truth.chain, q, dq, ddq)
    assert np.abs(pinocchio_torques(urdf, q, dq, ddq) - expected).max() < 1e-8


def test_pseudo_inertia_eigenvalue_gradient_matches_finite_differences():
    from workbench.calibration.dynamic import smallest_eigenvalues

    # mesh-based link inertias: physically consistent, well separated eigenvalues
    phi = wb.inertia.phi_from_matrix(wb.fivebar.FiveBar.default().chain.inertias).ravel()
    _, gradient = smallest_eigenvalues(phi)
    h = 1e-9  # the eigenvalues are ~1e-5 with gaps of the same order: small steps

    def values(x):
        return smallest_eigenvalues(x)[0]

    steps = h * np.eye(phi.size)
    fd = np.stack([(values(phi + e) - values(phi - e)) / (2 * h) for e in steps], axis=1)
    assert np.abs(fd - gradient).max() <= 1e-6 * np.abs(gradient).max()


def test_physical_consistency_on_noisy_torques(iiwa, tmp_path):
    """With noise the least-squares estimate has no consistent completion; --physical must
    return a model with positive definite pseudo-inertias that fits the data as well."""
    from workbench.calibration.dynamic import predict_torques, pseudo_inertia

    log, _ = simulate_log(iiwa, kind="dynamic", samples=1000, noise=0.01, seed=5)
    free = calibrate_dynamic(iiwa, log)
    fit = calibrate_dynamic(iiwa, log, physical=True)
    assert fit.physically_consistent
    eigenvalues = np.linalg.eigvalsh(pseudo_inertia(fit.chain.phi.reshape(-1, 10)))
    assert eigenvalues.min() > 0
    rms = [np.sqrt(np.mean((predict_torques(f, log) - log.tau) ** 2)) for f in (free, fit)]
    assert rms[1] <= 1.01 * rms[0]
    # the exported URDF reproduces the constrained model's torques in Pinocchio
    urdf = fit.chain.to_urdf(tmp_path / "calibrated.urdf")
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
    fit = calibrate_dynamic(iiwa, log)
    truth_params = np.concatenate(
        [fit.base.matrix @ truth.chain.phi.ravel(), truth.viscous, truth.coulomb]
    )
    err = np.concatenate([fit.beta, fit.friction]) - truth_params
    assert np.all(np.abs(err) <= 3 * np.sqrt(np.diag(fit.covariance)))


def test_twist_noise_within_reported_std(iiwa):
    log, truth = simulate_log(iiwa, kind="twist", samples=1000, noise=0.05, seed=3)
    fit = calibrate_twist(iiwa, log)
    p = 6 * (iiwa.n + 1)
    cov = twist_covariance(fit.chain, fit.covariance[:p, :p])
    z = np.abs(fit.chain.twists - truth.chain.twists) / np.sqrt(np.einsum("nii->ni", cov))
    seen = np.isfinite(z)
    # 42 correlated components: most within 3 sigma, none beyond 5 (first-order statistics)
    assert np.mean(z[seen] <= 3) >= 0.9 and np.all(z[seen] <= 5)


def test_report_files(iiwa, tmp_path):
    log, _ = simulate_log(iiwa, kind="dynamic", samples=300, noise=0.1)
    train, validation = split_log(log, 0.25)
    report = calibrate(iiwa, "dynamic", train, validation)
    write_report(tmp_path, report)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["samples"] == {"train": 225, "validation": 75}
    assert summary["rms"]["validation_after"] < summary["rms"]["validation_before"]
    assert (tmp_path / "residuals.png").stat().st_size > 0
    assert wb.Chain.from_urdf(tmp_path / "calibrated.urdf").joint_names == iiwa.joint_names


@pytest.mark.parametrize("kind", ["kinematic", "twist"])
def test_cli_end_to_end(tmp_path, kind):
    log = tmp_path / f"{kind}.csv"
    assert (
        main(["simulate-log", "iiwa", "--out", str(log), "--samples", "600", "--kind", kind]) == 0
    )
    out = tmp_path / "out"
    args = ["calibrate", "--model", "iiwa", "--log", str(log), "--kind", kind, "--out", str(out)]
    assert main([*args, "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rms"]["validation_after"] < 1e-8
    truth = wb.Chain.from_urdf(tmp_path / f"{kind}.truth.urdf")
    calibrated = wb.Chain.from_urdf(out / "calibrated.urdf")
    assert np.abs(calibrated.twists - truth.twists).max() < 1e-8
    assert sorted(p.name for p in out.iterdir()) == [
        "calibrated.urdf",
        "residuals.png",
        "summary.json",
    ]


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
    assert "line 1, column 2" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["kinematic", "twist", "dynamic"])
def test_recovery_10000_samples(iiwa, kind):
    log, truth = simulate_log(iiwa, kind=kind, samples=10_000, perturb=1e-2)
    train, validation = split_log(log, 0.2)
    report = calibrate(iiwa, kind, train, validation)
    assert report.summary["rms"]["validation_after"] < 1e-8
    if kind != "dynamic":
        assert np.abs(report.chain.twists - truth.chain.twists).max() < 1e-8
