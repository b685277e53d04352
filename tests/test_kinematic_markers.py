"""Kinematic calibration from markers measured in an unknown device frame (camera, mocap).

Ground truth written here, independently of the calibration code: a perturbed
iiwa (Pinocchio forward kinematics of its URDF), a device frame seen from the
base, and markers rigidly attached to links; the calibration must reproduce
the measured poses and predict held-out postures it never saw.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest

import workbench as wb
from workbench.calibration.fitting.kinematic import (
    KinematicModel,
    KinematicProblem,
    calibrate_kinematic,
)
from workbench.calibration.simulation.simulate import exciting_trajectory, perturbed_truth
from workbench.recordings.log import Log, Marker
from workbench.testing import central_differences


@pytest.fixture(scope="module")
def iiwa() -> wb.Chain:
    return wb.models.load("iiwa")


def pinocchio_poses(urdf, frame: str, offset: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Poses (N, 4, 4) of a frame at ``offset`` from a URDF frame, by Pinocchio."""
    model = pin.buildModelFromUrdf(str(urdf))
    data = model.createData()
    fid = model.getFrameId(frame)
    out = []
    for qs in q:
        pin.framesForwardKinematics(model, data, qs)
        out.append(data.oMf[fid].homogeneous @ offset)
    return np.array(out)


def world(device: np.ndarray, poses: np.ndarray) -> np.ndarray:
    return device @ poses


@pytest.fixture(scope="module")
def scene(iiwa, tmp_path_factory):
    """Truth URDF, a device frame, two markers (a 6D one on the flange, a 3D one on link 4)."""
    truth = perturbed_truth(iiwa, "kinematic", 1e-2, seed=11).chain
    urdf = wb.write_urdf(truth, tmp_path_factory.mktemp("truth") / "truth.urdf")
    rng = np.random.default_rng(0)
    device = wb.lie.exp_se3(np.concatenate([rng.normal(scale=0.5, size=3), [1.5, -0.3, 0.8]]))
    flange = wb.lie.exp_se3(np.array([0.1, -0.2, 0.05, 0.02, 0.03, 0.08]))
    link4 = wb.lie.exp_se3(np.array([0.0, 0.0, 0.0, 0.05, -0.07, 0.02]))
    return truth, urdf, device, flange, link4


def marker_log(iiwa, scene, samples: int, seed: int, noise: float = 0.0) -> Log:
    _, urdf, device, flange, link4 = scene
    _, q, _, _ = exciting_trajectory(iiwa, samples, dt=0.05, seed=seed)
    rng = np.random.default_rng(seed + 100)
    T_flange = world(device, pinocchio_poses(urdf, iiwa.tool_name, flange, q))
    T_link4 = world(device, pinocchio_poses(urdf, iiwa.link_names[3], link4, q))
    rotation = wb.lie.exp_so3(rng.normal(scale=noise, size=(samples, 3))) @ T_flange[:, :3, :3]
    markers = (
        Marker("flange", None, T_flange[:, :3, 3] + rng.normal(scale=noise, size=(samples, 3)),
               rotation),
        Marker("elbow", iiwa.link_names[3],
               T_link4[:, :3, 3] + rng.normal(scale=noise, size=(samples, 3))),
    )  # fmt: skip
    return Log(t=0.05 * np.arange(samples), q=q, markers=markers, frame_known=False)


def test_device_and_marker_frames_recovered_exactly(iiwa, scene):
    """Noise-free: the measured poses are reproduced to rounding, and postures never seen
    are predicted to 1e-8 m / rad (the device frame, joint twists and marker frames are
    estimated jointly; what is not identifiable does not change any prediction)."""
    problem = KinematicProblem.from_log(marker_log(iiwa, scene, 300, seed=1))
    assert not problem.device_known
    fit = calibrate_kinematic(iiwa, problem)
    assert np.abs(fit.solution.residual).max() < 1e-9
    held_out = KinematicProblem.from_log(marker_log(iiwa, scene, 100, seed=2))
    predicted = held_out.predict(fit.model)
    for marker, (p, R) in zip(held_out.markers, predicted, strict=True):
        assert np.abs(p - marker.position).max() < 1e-8
        if marker.rotation is not None:
            angle = np.linalg.norm(wb.lie.log_so3(R @ np.swapaxes(marker.rotation, 1, 2)), axis=1)
            assert angle.max() < 1e-8
    # the device frame was estimated, not assumed: the nominal model is far off
    nominal = held_out.predict(held_out.start(iiwa))
    assert np.abs(nominal[0][0] - held_out.markers[0].position).max() > 0.1


def test_device_frame_is_preferred_over_joint_motion(iiwa, scene):
    """A common motion of all joint axes equals a device motion; it goes to the device, so
    with the nominal kinematics (truth = nominal) the joint twists do not move at all."""
    _, _, device, flange, _ = scene
    _, q, _, _ = exciting_trajectory(iiwa, 200, dt=0.05, seed=3)
    T = device @ wb.dynamics.kinematics.forward_kinematics(iiwa, q) @ flange
    log = Log(t=0.05 * np.arange(200), q=q, frame_known=False,
              markers=(Marker("flange", None, T[:, :3, 3], T[:, :3, :3]),))  # fmt: skip
    fit = calibrate_kinematic(iiwa, KinematicProblem.from_log(log))
    assert np.abs(fit.chain.twists - iiwa.twists).max() < 1e-9
    assert np.abs(fit.model.device - device).max() < 1e-9


def test_noisy_markers_within_reported_std(iiwa, scene):
    """With measurement noise the held-out prediction error matches the noise level and the
    fit's residual standard deviation estimates it (sigma_hat / sigma in [0.9, 1.1])."""
    noise = 1e-4
    fit = calibrate_kinematic(
        iiwa, KinematicProblem.from_log(marker_log(iiwa, scene, 800, seed=4, noise=noise))
    )
    assert 0.9 < fit.solution.sigma / noise < 1.1
    assert 0.5 < fit.rotation_weight < 2.0  # the same noise in m and rad: a weight near 1
    held_out = KinematicProblem.from_log(marker_log(iiwa, scene, 200, seed=5))
    (p, _), _ = held_out.predict(fit.model)
    error = np.linalg.norm(p - held_out.markers[0].position, axis=1)
    assert np.sqrt(np.mean(error**2)) < 3 * noise


# ----------------------------------------- compiled residuals and normal equations
def true_model(iiwa, scene) -> KinematicModel:
    """The model that produced ``marker_log``: truth chain, device frame, marker placements."""
    truth, _, device, flange, link4 = scene
    placements = np.stack([truth.tool_frame @ flange, truth.joint_frames[3] @ link4])
    return KinematicModel(truth, device, placements)


def test_predicted_poses_match_pinocchio(iiwa, scene):
    """The compiled forward kinematics (device frame, path products, marker placement) gives
    the poses Pinocchio computes from the truth URDF (2 x 600 samples: two threads)."""
    log = marker_log(iiwa, scene, 600, seed=6)
    problem = KinematicProblem.from_log(log)
    for marker, (p, R) in zip(log.markers, problem.predict(true_model(iiwa, scene)), strict=True):
        assert np.abs(p - marker.position).max() < 1e-12
        if marker.rotation is not None:
            assert np.abs(R - marker.rotation).max() < 1e-12
    assert np.abs(problem.residual(true_model(iiwa, scene))).max() < 1e-12


def jacobian_by_differences(problem: KinematicProblem, model: KinematicModel):
    """Residuals and d r / d delta by central differences of the residual through ``retract``."""
    p = 6 * model.chain.n + sum(problem.sizes)
    J = central_differences(lambda x: problem.residual(problem.retract(model, x)), np.zeros(p))
    return problem.residual(model), J


def test_normal_equations_match_finite_differences(iiwa, scene):
    """The factors folded by the compiled kernel, without a dense Jacobian, give the normal
    equations (J S)^T W (J S), (J S)^T W r and the singular values of J P of the central-
    difference Jacobian: unknown device, a 6D and a 3D marker, unseen samples, IRLS weights,
    600 samples (two threads)."""
    log = marker_log(iiwa, scene, 600, seed=7, noise=1e-3)
    log.markers[0].position[[5, 77]] = np.nan  # unseen in those samples
    log.markers[1].position[300] = np.nan
    problem = replace(KinematicProblem.from_log(log), rotation_weight=0.3)
    p = 6 * iiwa.n + sum(problem.sizes)  # joints, device, two markers
    model = problem.retract(problem.start(iiwa), np.random.default_rng(8).normal(0, 1e-2, p))
    r_fd, J_fd = jacobian_by_differences(problem, model)
    assert r_fd.size == 3 * (2 * 598 + 599)
    w = np.random.default_rng(9).uniform(0.1, 1.0, size=r_fd.size)
    linear = problem.linearise(model, w)
    assert np.array_equal(linear.r, r_fd)
    P = linear.P
    S = np.linalg.qr(P @ np.random.default_rng(10).normal(size=(P.shape[1], 20)))[0]
    A, g = linear.normal_equations(S)
    JS = J_fd @ S
    A_fd, g_fd = JS.T @ (w[:, None] * JS), JS.T @ (w * r_fd)
    assert np.abs(A - A_fd).max() < 1e-7 * np.abs(A_fd).max()
    assert np.abs(g - g_fd).max() < 1e-7 * np.abs(g_fd).max()
    s = np.linalg.svd(linear.jacobian_factor @ P, compute_uv=False)
    s_fd = np.linalg.svd(J_fd @ P, compute_uv=False)
    assert np.abs(s - s_fd).max() < 1e-7 * s_fd[0]
    unweighted = problem.linearise(model)
    A, g = unweighted.normal_equations(S)
    assert np.abs(A - JS.T @ JS).max() < 1e-7 * np.abs(JS.T @ JS).max()
    assert np.abs(g - JS.T @ r_fd).max() < 1e-7 * np.abs(JS.T @ r_fd).max()
    # the dense rows (evaluate) are the same derivatives
    _, J = problem.evaluate(model)
    assert np.abs(J - J_fd).max() < 1e-7 * np.abs(J_fd).max()


def test_unseen_samples_recovered_exactly(iiwa, scene):
    """Markers missing in some samples (NaN rows): the fit uses the rest and still predicts
    held-out postures to 1e-8 (truth from Pinocchio)."""
    log = marker_log(iiwa, scene, 600, seed=12)
    log.markers[0].position[::7] = np.nan
    log.markers[0].rotation[::11] = np.nan
    log.markers[1].position[::5] = np.nan
    fit = calibrate_kinematic(iiwa, KinematicProblem.from_log(log))
    assert np.abs(fit.solution.residual).max() < 1e-9
    held_out = KinematicProblem.from_log(marker_log(iiwa, scene, 100, seed=13))
    for marker, (p, _) in zip(held_out.markers, held_out.predict(fit.model), strict=True):
        assert np.abs(p - marker.position).max() < 1e-8
