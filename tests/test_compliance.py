"""Joint compliance under gravity in the kinematic calibration (calibration.fitting.compliance).

References the project did not write: Pinocchio's generalized gravity (the
torques, with a payload appended to a joint's body) and its forward
kinematics of the deflected truth, whose equilibrium ``k (q - q_link) =
g(q_link)`` is solved here by fixed-point iteration (the calibration's model
takes the torques at the motor positions, first order); MuJoCo's joint
springs and gravity for the sign and the exported stiffness; central
differences of the project's own functions for the derivatives.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pinocchio as pin
import pytest

import workbench as wb
from workbench.calibration.fitting import compliance
from workbench.calibration.fitting.kinematic import KinematicProblem
from workbench.calibration.problems.kinematic_problem import Candidate, KinematicCalibrationProblem
from workbench.calibration.problems.problem import Options
from workbench.calibration.selection.selection import select
from workbench.calibration.selection.validation import Folds
from workbench.calibration.simulation.simulate import simulate_log
from workbench.recordings.log import Distance, Fixture, Marker
from workbench.testing import central_differences

STIFFNESS = np.array([1e4, 3e4, 1e4, 1e3, 1e3, 1e3])  # N m/rad: deflections up to ~2e-3 rad
NOISE = 2e-5  # m per coordinate


@pytest.fixture(scope="module")
def ur5() -> wb.Chain:
    return wb.models.load("ur5")


def test_gravity_torques_with_a_payload_are_pinocchios(ur5):
    """tau_g of the loaded chain equals Pinocchio's generalized gravity with the payload
    added to the last joint's body (its inertia in that joint's frame)."""
    mass, com = 1.7, np.array([0.01, -0.02, 0.08])
    inertia_com = np.diag([0.003, 0.004, 0.002])
    phi = wb.inertia.phi_from_com(mass, com, inertia_com)
    q = np.random.default_rng(0).uniform(-3, 3, size=(7, ur5.n))
    bent = compliance.deflection(compliance.loaded(ur5, (ur5.n - 1, phi)), q, np.zeros(ur5.n))
    model = wb.to_pinocchio(ur5)
    model.inertias[model.njoints - 1] += pin.Inertia(mass, com, inertia_com)
    data = model.createData()
    expected = np.array([pin.computeGeneralizedGravity(model, data, s) for s in q])
    assert np.abs(bent.tau - expected).max() < 1e-9 * np.abs(expected).max()
    assert np.abs(bent.tau).max() > 10.0  # the check sees real torques


def test_a_joint_under_the_same_load_in_every_sample_is_held_rigid(ur5):
    """A joint whose gravity torque (Pinocchio's generalized gravity) is the same in every
    sample sags by the same amount everywhere, which its offset cannot be told from: not
    loaded. Only the first (vertical) joint moving leaves every torque unchanged; with the
    others moving, the joints whose torque varies (and is not negligible) are loaded."""
    rng = np.random.default_rng(1)
    q = np.tile(rng.uniform(-1, 1, ur5.n), (20, 1))
    q[:, 0] = np.linspace(-3, 3, 20)
    model = wb.to_pinocchio(ur5)
    data = model.createData()
    tau = np.array([pin.computeGeneralizedGravity(model, data, s) for s in q])
    assert np.ptp(tau, axis=0).max() < 1e-9 * np.abs(tau).max() and np.abs(tau).max() > 10
    assert not compliance.loaded_joints(ur5, q).any()
    q = rng.uniform(-3, 3, size=(20, ur5.n))
    tau = np.abs([pin.computeGeneralizedGravity(model, data, s) for s in q])
    varied = (np.ptp(tau, axis=0) >= compliance.VARIED * tau.max(axis=0)) & (
        tau.max(axis=0) >= compliance.LOADED * tau.max()
    )
    assert varied.sum() >= 2
    np.testing.assert_array_equal(compliance.loaded_joints(ur5, q), varied)


def test_twist_derivatives_of_the_deflection_are_central_differences(ur5):
    """d q_link / d eta (c times the analytic twist derivatives of the gravity torques) equals
    central differences of the deflection of ``chain.with_eta`` to 1e-7."""
    rng = np.random.default_rng(1)
    q = rng.uniform(-2, 2, size=(5, ur5.n))
    c = 1.0 / STIFFNESS
    n, p = ur5.n, 6 * ur5.n + ur5.n
    bent = compliance.deflection(ur5, q, c, derivatives=True)
    directions = compliance.joint_directions(bent, c, p, 6 * n, np.ones(n, bool))
    h = 1e-6
    for k in range(6 * n):
        e = np.zeros(6 * (n + 1))
        e[k] = h
        plus = compliance.deflection(ur5.with_eta(e), q, c).q
        minus = compliance.deflection(ur5.with_eta(-e), q, c).q
        assert np.abs((plus - minus) / (2 * h) - directions[:, :, k]).max() < 1e-7
    assert np.abs(directions[:, :, : 6 * n]).max() > 1e-4  # not trivially zero
    assert np.allclose(directions[:, np.arange(n), 6 * n + np.arange(n)], -bent.tau)


def test_jacobian_with_compliance_is_central_differences(ur5):
    """The kinematic Jacobian of a compliant model (twists, device, marker and compliance
    columns, the compliance entering through the kernels' joint directions) equals central
    differences of the residual through the problem's own retraction."""
    rng = np.random.default_rng(2)
    q = rng.uniform(-2, 2, size=(12, ur5.n))
    marker = Marker(
        "tool", None, rng.normal(size=(12, 3)), wb.lie.exp_so3(rng.normal(size=(12, 3)))
    )
    problem = KinematicProblem(q, (marker,), device_known=False, parameters="compliance")
    model = replace(problem.start(ur5), compliance=1.0 / STIFFNESS)
    _, J = problem.evaluate(model)
    numeric = central_differences(
        lambda step: problem.residual(problem.retract(model, step)), np.zeros(J.shape[1])
    )
    assert np.abs(J - numeric).max() < 1e-7 * max(1.0, np.abs(J).max())
    assert np.abs(J[:, -ur5.n :]).max() > 1.0  # compliance columns: the gravity torques


def test_jacobian_with_compliance_and_fixtures_is_central_differences(ur5):
    """Compliance and fixtures in one step (joints, device, markers, compliances, fixtures):
    the Jacobian of a measured tool and of an unmeasured ball resting in two sockets and on
    a plane equals central differences of the residual through the problem's retraction,
    and the base-tilt gauge of compliance acts on the joints' entries only."""
    rng = np.random.default_rng(5)
    N, n = 15, ur5.n
    q = rng.uniform(-2, 2, size=(N, n))
    tool = Marker("tool", None, rng.normal(size=(N, 3)))
    ball = Marker("ball", ur5.link_names[3])
    rows = [np.arange(N) // 5 == k for k in range(3)]
    fixtures = (
        Fixture("s0", "point", "ball", rows[0]),
        Fixture("s1", "point", "ball", rows[1]),
        Fixture("table", "plane", "ball", rows[2]),
    )
    problem = KinematicProblem(
        q, (tool, ball), device_known=False, parameters="compliance", fixtures=fixtures,
        distances=(Distance(("s0", "s1"), 0.05),),
    )  # fmt: skip
    model = replace(problem.start(ur5), compliance=1.0 / STIFFNESS)
    _, J = problem.evaluate(model)
    width = 6 * n + 6 + 12 + n  # joints, device, two markers, compliances
    assert problem.width(ur5) == width
    assert J.shape[1] == problem.step_size(ur5) == width + 9
    numeric = central_differences(
        lambda step: problem.residual(problem.retract(model, step)), np.zeros(J.shape[1])
    )
    assert np.abs(J - numeric).max() < 1e-7 * max(1.0, np.abs(J).max())
    assert J.shape[0] == 3 * N + 3 * 10 + 5 + 1  # tool, socket points, plane, distance
    assert np.abs(J[3 * N :, width - n : width]).max() > 1e-3  # the ball sags too
    assert np.abs(J[:, width:]).max() > 0.5  # the fixtures' own columns
    P, _ = problem.prior(model)
    assert P.shape[0] == width + 9
    assert np.allclose(P[width - n : width][:, -n:], np.eye(n))  # compliances: P's last n
    gauge = problem.gauge(model)
    assert gauge.shape == (6, width + 9)
    assert not np.any(gauge[:, 6 * n :])


def compliant_log(chain: wb.Chain, stiffness: np.ndarray, seed: int):
    """A mocap log of the tool position (unknown device frame) of a truth with moved twists
    and joint springs: Pinocchio forward kinematics at the gravity equilibrium."""
    log, truth = simulate_log(chain, samples=120, perturb=1e-3, dt=0.1, seed=seed)
    model = wb.to_pinocchio(truth.chain)
    data = model.createData()
    tool = model.getFrameId(chain.tool_name)
    c = np.divide(1.0, stiffness, out=np.zeros(chain.n), where=stiffness > 0)
    device = wb.lie.exp_se3(np.array([0.1, -0.3, 0.2, 1.0, 0.5, -0.2]))
    positions, deflections = [], []
    for q in log.q:
        link = q.copy()
        for _ in range(30):
            link = q - c * pin.computeGeneralizedGravity(model, data, link)  # k (q - link) = g
        pin.framesForwardKinematics(model, data, link)
        positions.append(device[:3, :3] @ data.oMf[tool].translation + device[:3, 3])
        deflections.append(link - q)
    rng = np.random.default_rng(seed + 7)
    measured = np.array(positions) + rng.normal(scale=NOISE, size=(len(positions), 3))
    log = replace(log, position=None, markers=(Marker("tool", None, measured),), frame_known=False)
    return log, np.array(deflections)


def selection_of(chain: wb.Chain, log):
    """The folds' choice among frames, twists and compliance (the kind's auto candidates
    without the ridges and offsets, which the other tests cover)."""
    problem = KinematicCalibrationProblem(chain, log, Options())
    problem.candidates = (Candidate("frames"), Candidate("twists"), Candidate("compliance"))
    return problem, select(problem, problem.folds(Folds(5)))


def test_known_stiffness_is_recovered_and_the_candidate_kept(ur5):
    """Deflections of ~1e-3 rad: compliance beats twists on the folds and every compliance
    the data see is within 3 standard deviations of the truth (the shoulder pan and the last
    wrist carry no gravity torque: not estimated, reported rigid)."""
    log, deflections = compliant_log(ur5, STIFFNESS, seed=3)
    assert np.abs(deflections).max() > 1e-3
    problem, selection = selection_of(ur5, log)
    assert selection.kept.name == "compliance"
    fit = problem.fit(None, selection.kept.candidate)
    joints = problem.summary(fit)["compliance"]["joints"]
    estimated = [name for name, j in joints.items() if j["estimated"]]
    assert "shoulder_lift_joint" in estimated and "elbow_joint" in estimated
    for k, name in enumerate(ur5.joint_names):
        entry = joints[name]
        if not entry["estimated"]:
            assert entry["stiffness"] is None and entry["compliance"] == 0.0
            continue
        z = (entry["compliance"] - 1.0 / STIFFNESS[k]) / entry["compliance_std"]
        assert abs(z) < 3.0, (name, entry)
        if entry["compliance_std"] < 0.1 * entry["compliance"]:  # well seen: its stiffness too
            assert abs(entry["stiffness"] - STIFFNESS[k]) < 3.0 * entry["stiffness_std"]


def test_rigid_truth_drops_compliance(ur5):
    """Without springs in the truth the compliance candidate does not beat the twists."""
    log, _ = compliant_log(ur5, np.zeros(ur5.n), seed=3)
    _, selection = selection_of(ur5, log)
    assert selection.kept.name == "twists"


def test_stiffness_in_mujoco_holds_the_deflected_arm_against_gravity(ur5, tmp_path):
    """The drive-file stiffnesses (``k<j>``) as MuJoCo joint stiffness: with ``qpos_spring`` at
    the motor positions and the links where the calibration's model puts them, MuJoCo's
    spring force balances its own gravity torques (to the first order the model keeps)."""
    import mujoco

    from workbench.identification.drives import (
        Drives,
        drive_file_text,
        read_drive_file,
        simulator_terms,
    )

    springs = {f"k{j + 1}": (k, 0.0) for j, k in enumerate(STIFFNESS)}
    (tmp_path / "d.toml").write_text(
        drive_file_text(Drives(ur5.n, ()), np.zeros(0), stiffness=springs)
    )
    drives, values = read_drive_file(tmp_path / "d.toml", ur5.n)
    stiffness = simulator_terms(drives, values)["stiffness"]
    assert np.array_equal(stiffness, STIFFNESS)
    model = mujoco.MjModel.from_xml_string(wb.mjcf.mjcf_string(ur5, stiffness=stiffness))
    data = mujoco.MjData(model)
    q = np.random.default_rng(4).uniform(-2, 2, size=(5, ur5.n))
    bent = compliance.deflection(ur5, q, 1.0 / STIFFNESS)
    for motor, link, tau in zip(q, bent.q, bent.tau, strict=True):
        model.qpos_spring[:] = motor
        data.qpos[:] = link
        data.qvel[:] = 0.0
        mujoco.mj_forward(model, data)
        assert np.allclose(data.qfrc_passive, -(link - motor) * STIFFNESS)  # the springs
        assert np.abs(data.qfrc_passive - data.qfrc_bias).max() < 1e-2 * np.abs(tau).max()
        assert np.abs(data.qfrc_bias).max() > 10.0


def test_compliance_the_data_cannot_see_is_held_rigid(ur5):
    """Two logs where no compliance can be told from zero, each refused by the rule
    (:func:`~workbench.calibration.fitting.kinematic._solve_physical`): a model without
    masses (no gravity torque: every compliance unseen, its standard deviation 0, which a
    t-test alone passes), and springs so stiff (1e8 N m/rad, beyond any robot joint's) that
    they deflect the tool by less than the noise. Both fits end rigid: the ``twists`` fit
    with every compliance 0."""
    massless = replace(ur5, inertias=np.zeros_like(ur5.inertias))
    log, deflections = compliant_log(massless, np.zeros(ur5.n), seed=5)
    assert not np.any(deflections)
    problem = KinematicCalibrationProblem(massless, log, Options())
    fit = problem.fit(None, Candidate("compliance"))
    assert fit.parameters == "twists" and not np.any(fit.model.compliance)
    log, deflections = compliant_log(ur5, np.full(ur5.n, 1e8), seed=5)
    assert 0.0 < np.abs(deflections).max() < 1e-6  # rad: below NOISE over a 1 m arm
    problem = KinematicCalibrationProblem(ur5, log, Options())
    fit = problem.fit(None, Candidate("compliance"))
    assert fit.parameters == "twists" and not np.any(fit.model.compliance)
