"""Payload identification and excitation on a simulated iiwa.

Truth: the iiwa of ``workbench.models.load("iiwa")`` carrying a 1.5 kg body on
link 7 (COM (0.02, -0.01, 0.08) m in the link frame, principal moments 4, 5
and 3 g m^2 about the COM). Logs are made by the test: joint torques of the
truth by inverse dynamics plus Gaussian noise of std 0.5 % of each joint's
torque RMS plus 0.05 N m; joint positions read by a 2^-19 rev encoder
(quantised from a random zero per log), written as a table of t, q and tau
only, so that dq and ddq come from the reader's Savitzky-Golay filter, as on
a robot. Joints 5-7 move; joints 1-4 hold a bent posture.
"""

from __future__ import annotations

import json

import numpy as np
import pinocchio as pin
import pytest

import workbench as wb
from workbench import inertia
from workbench.calibration.fitting.payload import (
    com_form,
    com_jacobian,
    identify_payload,
    payload_table,
    urdf_snippet,
)
from workbench.calibration.simulation.simulate import payload_log, with_payload
from workbench.cli import main
from workbench.errors import WorkbenchError
from workbench.excitation.design import Limits, TorqueFunction, random_parameters
from workbench.excitation.information import criterion_gradient
from workbench.excitation.payload import (
    HeldJoints,
    PayloadInformation,
    design_payload_excitation,
    hold_posture,
    information_rank,
    joint_indices,
)
from workbench.excitation.problem import LimitSettings
from workbench.excitation.trajectory import FourierSpace
from workbench.identification.consistency import DELTA
from workbench.identification.drives import Drives, drive_file_text
from workbench.recordings.log import Log
from workbench.recordings.log_files import read_log, write_log
from workbench.recordings.tables import read_table, write_table

LINK = "iiwa_link_7"
MASS, COM = 1.5, np.array([0.02, -0.01, 0.08])
PHI = inertia.phi_from_com(MASS, COM, np.diag([0.004, 0.005, 0.003]))
POSTURE = np.array([0.3, 0.6, 0.0, -1.2, 0.0, 0.5, 0.0])
RESOLUTION = 2 * np.pi / 2**19  # rad: a 19-bit encoder
RATE = 100.0  # Hz


@pytest.fixture(scope="module")
def iiwa():
    return wb.models.load("iiwa")


@pytest.fixture(scope="module")
def held(iiwa):
    return HeldJoints(iiwa, joint_indices(iiwa, ["5", "6", "7"]), POSTURE)


@pytest.fixture(scope="module")
def random_trajectory(iiwa, held):
    """A random 10 s Fourier motion of joints 5-7 within the limits."""
    limits = LimitSettings().limits(iiwa)
    m = held.moving
    space = FourierSpace(m.size, 10.0, 5, True, POSTURE[m])
    sub = Limits(
        *(getattr(limits, f)[m] for f in ("lower", "upper", "velocity", "acceleration", "torque"))
    )
    theta = random_parameters(space, sub, TorqueFunction(held.chain), np.random.default_rng(3))
    return space.trajectory(theta)


@pytest.fixture(scope="module")
def random_motion(held, random_trajectory):
    """t, q, dq, ddq at RATE of the random motion, joints 1-4 held."""
    t, q, dq, ddq = random_trajectory.sampled(RATE)
    return (t, *held.full(q, dq, ddq))


def noisy_log(chain, states, rng, path):
    """The log of the module docstring, written to ``path`` and read back."""
    write_log(path, payload_log(chain, 6, PHI, *states, rng, resolution=RESOLUTION))
    with pytest.warns(wb.WorkbenchWarning, match="is constant"):  # the held joints
        return read_log(path, chain, require=("tau",))


def monte_carlo(chain, states, draws, tmp_path, seed=0):
    """Fits of ``draws`` noisy logs along ``states``."""
    rng = np.random.default_rng(seed)
    return [
        identify_payload(chain, noisy_log(chain, states, rng, tmp_path / "log.npz"), LINK)
        for _ in range(draws)
    ]


# ---------------------------------------------------------------- identification
def test_recovers_mass_and_com_from_ten_seconds(iiwa, random_motion, tmp_path):
    log = noisy_log(iiwa, random_motion, np.random.default_rng(1), tmp_path / "log.csv")
    assert log.differentiated and log.t[-1] <= 10.0
    fit = identify_payload(iiwa, log, LINK)
    psi = fit.com_form
    assert abs(psi[0] - MASS) < 0.02 * MASS
    assert np.linalg.norm(psi[1:4] - COM) < 5e-3
    assert not fit.constrained  # a consistent estimate is kept as it is
    np.testing.assert_array_equal(fit.phi, fit.least_squares)
    # the errors are as large as the predicted stds say (within 4 sigma)
    assert np.all(np.abs(psi - com_form(PHI)) < 4 * fit.com_std)
    assert np.all(fit.sigma < fit.sigma_robot)


def test_payload_in_a_frame_fixed_to_the_link(iiwa, random_motion):
    """--link flange: mass, COM and inertia about the COM in the flange frame, by hand:
    c_f = R^T (c - p), I_f = R^T I R for the flange at (R, p) in the link frame."""
    t, q, dq, ddq = random_motion
    tau = wb.inverse_dynamics(with_payload(iiwa, 6, PHI), q, dq, ddq)
    fit = identify_payload(iiwa, Log(t=t, q=q, dq=dq, ddq=ddq, tau=tau), "flange")
    assert fit.link == "flange"
    T = np.linalg.inv(iiwa.joint_frames[6]) @ iiwa.placement_of("flange")
    R, p = T[:3, :3], T[:3, 3]
    assert np.linalg.norm(p) > 0.01  # the flange is not the link frame
    expected = inertia.phi_from_com(MASS, R.T @ (COM - p), R.T @ np.diag([4e-3, 5e-3, 3e-3]) @ R)
    np.testing.assert_allclose(fit.phi, expected, atol=1e-9)


def test_predicted_std_matches_a_small_monte_carlo(iiwa, random_motion, tmp_path):
    fits = monte_carlo(iiwa, random_motion, 10, tmp_path)
    errors = np.array([f.phi - PHI for f in fits])
    predicted = np.mean([f.std for f in fits], axis=0)
    z2 = np.mean((errors / predicted) ** 2)  # 1 when the stds are right
    assert 0.5 < z2 < 1.6, z2


def test_com_jacobian_matches_central_differences():
    step = 1e-6
    numeric = np.stack(
        [(com_form(PHI + step * e) - com_form(PHI - step * e)) / (2 * step) for e in np.eye(10)],
        axis=1,
    )
    np.testing.assert_allclose(com_jacobian(PHI), numeric, atol=1e-7)


def test_poor_data_still_gives_a_consistent_payload(iiwa, held, tmp_path):
    """Half a second of slow motion under heavy noise: the least-squares estimate is not a
    body; the estimate is, and it satisfies the optimality conditions of the constrained fit."""
    t = np.arange(0.0, 0.5, 1.0 / RATE)
    moving = 0.05 * np.sin(2 * np.pi * t)[:, None] * np.ones(3)
    q, dq, ddq = held.full(
        POSTURE[held.moving] + moving,
        0.1 * np.pi * np.cos(2 * np.pi * t)[:, None] * np.ones(3),
        -0.2 * np.pi**2 * np.sin(2 * np.pi * t)[:, None] * np.ones(3),
    )
    rng = np.random.default_rng(5)
    tau = wb.inverse_dynamics(with_payload(iiwa, 6, PHI), q, dq, ddq)
    log = Log(t=t, q=q, dq=dq, ddq=ddq, tau=tau + 2.0 * rng.normal(size=tau.shape))
    fit = identify_payload(iiwa, log, LINK)
    assert fit.constrained
    assert np.linalg.eigvalsh(inertia.pseudo_inertia(fit.least_squares))[0] < 0
    J = inertia.pseudo_inertia(fit.phi)
    assert np.linalg.eigvalsh(J)[0] >= DELTA * (1 - 1e-6)
    # KKT of min (phi - phi_ls)^T F (phi - phi_ls) / 2 s.t. J(phi) >= delta 1: the gradient
    # with respect to J, Z, is positive semidefinite and complementary to J - delta 1.
    F = np.linalg.inv(fit.covariance)
    P = inertia.phi_from_pseudo_inertia(np.eye(16).reshape(16, 4, 4)).T  # phi = P vec(J)
    Z = (P.T @ (F @ (fit.phi - fit.least_squares))).reshape(4, 4)
    Z = (Z + Z.T) / 2
    scale = np.abs(Z).max()
    assert np.linalg.eigvalsh(Z)[0] > -1e-6 * scale
    assert abs(np.trace(Z @ (J - DELTA * np.eye(4)))) < 1e-6 * scale * np.abs(J).max()
    chain = with_payload(iiwa, 6, fit.phi)  # loads as a physical model
    wb.chain.check_inertias(chain)


def test_known_payload_and_robot_friction_are_taken_off(iiwa, random_motion):
    """Gripper known (the log's payload), friction of the robot known (drive terms): the
    object on top of the gripper is what is identified."""
    t, q, dq, ddq = random_motion
    gripper = inertia.phi_from_com(0.8, np.array([0.0, 0.0, 0.04]), np.diag([1e-3, 1e-3, 5e-4]))
    truth = with_payload(with_payload(iiwa, 6, gripper), 6, PHI)
    drives = Drives(iiwa.n)
    values = {f"fv{j + 1}": 0.5 for j in range(iiwa.n)} | {f"fs{j + 1}": 0.8 for j in range(7)}
    friction = drives.columns(dq, ddq) @ np.array([values[name] for name in drives.names])
    tau = wb.inverse_dynamics(truth, q, dq, ddq) + friction
    log = Log(t=t, q=q, dq=dq, ddq=ddq, tau=tau, payload=(6, gripper))
    fit = identify_payload(iiwa, log, LINK, drives, values)
    np.testing.assert_allclose(fit.phi, PHI, atol=1e-9)
    assert np.all(fit.sigma < 1e-9)
    without = identify_payload(iiwa, log, LINK)  # friction left in the moving joints' torques
    assert np.all(without.sigma[4:] > 0.5)


def test_slow_rows_of_joints_with_coulomb_friction_are_left_out(iiwa, random_motion):
    """Coulomb friction is undefined at rest: below the log's min_speed a joint with Coulomb
    friction gives no equation; joints without it (held still) keep all of theirs."""
    t, q, dq, ddq = random_motion
    drives = Drives(iiwa.n)
    values = {"fs5": 0.8, "fs6": 0.5, "fs7": 0.5, "fv5": 0.3}
    speed = np.full(iiwa.n, 0.05)
    smooth = Drives(iiwa.n, min_speed=speed)
    friction = smooth.columns(dq, ddq) @ np.array([values.get(n, 0.0) for n in drives.names])
    tau = wb.inverse_dynamics(with_payload(iiwa, 6, PHI), q, dq, ddq) + friction
    log = Log(t=t, q=q, dq=dq, ddq=ddq, tau=tau, min_speed=speed)
    fit = identify_payload(iiwa, log, LINK, drives, values)
    assert fit.rows == 4 * t.size + np.count_nonzero(np.abs(dq[:, 4:]) >= 0.05)
    np.testing.assert_allclose(fit.phi, PHI, atol=1e-9)


def test_urdf_snippet_merges_into_the_link_in_pinocchio(iiwa, tmp_path):
    urdf = wb.models.urdf_path("iiwa").read_text()
    path = tmp_path / "with_payload.urdf"
    path.write_text(urdf.replace("</robot>", urdf_snippet(PHI, LINK) + "</robot>"))
    model = pin.buildModelFromUrdf(str(path))
    original = pin.buildModelFromUrdf(str(wb.models.urdf_path("iiwa")))
    joint = model.getJointId("iiwa_joint_7")
    added = (
        model.inertias[joint].toDynamicParameters() - original.inertias[joint].toDynamicParameters()
    )
    np.testing.assert_allclose(inertia.phi_from_pinocchio(added), PHI, atol=1e-12)


@pytest.mark.parametrize("rate", [RATE, 1000.0])
def test_log_description_with_the_gripper_as_known_payload(
    iiwa, held, random_trajectory, tmp_path, rate
):
    """The identified payload's [model.payload] table, pasted into a log description, makes
    it a known payload: what the robot carries on top of it is identified (positions
    filtered and differentiated by the description's processing; at 1 kHz the torque
    equations are decimated to 100 Hz)."""
    _, q, dq, ddq = random_trajectory.sampled(rate)
    q, dq, ddq = held.full(q, dq, ddq)
    cup = inertia.phi_from_com(0.5, np.array([0.0, 0.03, 0.12]), np.diag([4e-4, 4e-4, 2e-4]))
    tau = wb.inverse_dynamics(with_payload(with_payload(iiwa, 6, PHI), 6, cup), q, dq, ddq)
    columns = {f"q{i}": q[:, i] for i in range(iiwa.n)} | {f"tau{i}": tau[:, i] for i in range(7)}
    write_table(tmp_path / "data.csv", columns)
    names = lambda prefix: ", ".join(f'"{prefix}{i}"' for i in range(iiwa.n))  # noqa: E731
    description = tmp_path / "log.toml"
    description.write_text(
        f"[time]\nsample_period = {1 / rate}\n\n"
        f'[positions]\nfile = "data.csv"\ncolumns = [{names("q")}]\n\n'
        f'[torques]\nfile = "data.csv"\ncolumns = [{names("tau")}]\n\n' + payload_table(PHI, LINK)
    )
    with pytest.warns(wb.WorkbenchWarning):  # the held joints
        log = read_log(description, iiwa, require=("tau",))
    assert log.payload[0] == 6
    np.testing.assert_allclose(log.payload[1], PHI, atol=1e-15)
    assert log.decimation == round(rate / 100.0)
    fit = identify_payload(iiwa, log, LINK)
    assert fit.rows <= iiwa.n * len(log) / log.decimation
    psi = fit.com_form
    assert abs(psi[0] - 0.5) < 0.02 * 0.5
    assert np.linalg.norm(psi[1:4] - [0.0, 0.03, 0.12]) < 5e-3


# ------------------------------------------------------------------- excitation
def test_information_gradient_matches_central_differences(iiwa, held):
    information = PayloadInformation(held, 6, np.full(iiwa.n, 0.1))
    rng = np.random.default_rng(2)
    q = POSTURE[held.moving] + 0.5 * rng.normal(size=(12, 3))
    dq, ddq = rng.normal(size=(2, 12, 3))
    _, _, gradient = criterion_gradient(information, q, dq, ddq, "logdet")
    step = 1e-6
    for s in range(3):
        for k, j in ((0, 0), (5, 1), (11, 2)):
            plus, minus = [x.copy() for x in (q, dq, ddq)], [x.copy() for x in (q, dq, ddq)]
            plus[s][k, j] += step
            minus[s][k, j] -= step
            value = lambda x: -np.linalg.slogdet(information.matrix(*x))[1]  # noqa: E731
            numeric = (value(plus) - value(minus)) / (2 * step)
            assert gradient[s, k, j] == pytest.approx(numeric, rel=1e-5, abs=1e-7)


def test_structural_rank_of_the_payload_parameters(iiwa):
    """Only joint 7 turning: a rotation about one fixed axis a sees m, h and I a, 7 numbers.
    Joints 5-7 with the arm straight up: link 7's origin stays on the vertical through the
    held joints' axes, so gravity on the mass alone turns none of them: 9. Bent: 10."""
    rank = information_rank(iiwa, 6, joint_indices(iiwa, ["7"]), POSTURE[None])
    assert rank.tolist() == [7]
    postures = np.array([np.zeros(7), POSTURE])
    assert information_rank(iiwa, 6, joint_indices(iiwa, ["5", "6", "7"]), postures).tolist() == [
        9,
        10,
    ]
    limits = LimitSettings().limits(iiwa)
    with pytest.raises(WorkbenchError, match="only 9 of the 10"):
        design_payload_excitation(iiwa, LINK, ["5", "6", "7"], np.zeros(7), limits, np.ones(7))
    chosen = hold_posture(iiwa, LINK, ["5", "6", "7"], limits, 0.01 * iiwa.effort_limit)
    assert information_rank(iiwa, 6, joint_indices(iiwa, ["5", "6", "7"]), chosen[None]) == 10
    assert np.all((chosen >= limits.lower) & (chosen <= limits.upper))


def test_held_joints_chain_gives_the_moving_joints_torques(iiwa, held, random_motion):
    _, q, dq, ddq = random_motion
    m = held.moving
    full = wb.inverse_dynamics(iiwa, q, dq, ddq)[:, m]
    np.testing.assert_allclose(
        wb.inverse_dynamics(held.chain, q[:, m], dq[:, m], ddq[:, m]), full, atol=1e-9
    )


# ----------------------------------------------------------------------- errors
def test_unknown_link_and_missing_torques_are_errors(iiwa, random_motion, tmp_path):
    t, q, dq, ddq = random_motion
    log = Log(t=t, q=q, dq=dq, ddq=ddq, tau=np.zeros_like(q), source="log.csv")
    with pytest.raises(WorkbenchError, match=r"'gripper'.*iiwa_link_7"):
        identify_payload(iiwa, log, "gripper")
    with pytest.raises(WorkbenchError, match=r"log\.csv.*torques"):
        identify_payload(iiwa, Log(t=t, q=q, dq=dq, ddq=ddq, source="log.csv"), LINK)
    turning = Log(t=t, q=POSTURE + 0 * q, dq=0 * dq, ddq=0 * ddq, tau=np.zeros_like(q))
    turning.q[:, 6], turning.dq[:, 6], turning.ddq[:, 6] = q[:, 6], dq[:, 6], ddq[:, 6]
    with pytest.raises(WorkbenchError, match="only 7 of the 10"):
        identify_payload(iiwa, turning, LINK)
    with pytest.raises(WorkbenchError, match="'j9'"):
        joint_indices(iiwa, ["5", "j9"])
    write_log(tmp_path / "q_only.csv", Log(t=t, q=q, joint_names=iiwa.joint_names))
    for argv, message in (
        (["--log", str(tmp_path / "q_only.csv"), "--link", LINK], "torques"),
        (["--log", str(tmp_path / "q_only.csv"), "--link", "gripper"], "gripper"),
    ):
        out = tmp_path / "out"
        code = main(["payload", "identify", "--model", "iiwa", "--out", str(out), *argv])
        assert code == 2 and not out.exists(), message
    for argv in (
        ["--joints", "5,9"],
        ["--joints", "5,6", "--link", "gripper"],
        ["--joints", "5,6", "--posture", "0,0,0"],
        ["--joints", "1", "--link", "iiwa_link_0"],
    ):
        out = tmp_path / "out"
        assert main(["payload", "excite", "--model", "iiwa", "--out", str(out), *argv]) == 2
        assert not out.exists()


def test_cli_identify_writes_the_payload_forms(iiwa, held, random_trajectory, tmp_path, capsys):
    """A 1 kHz log: q is differentiated over 0.1 s (101 samples)."""
    t, q, dq, ddq = random_trajectory.sampled(1000.0)
    noisy_log(iiwa, (t, *held.full(q, dq, ddq)), np.random.default_rng(4), tmp_path / "log.csv")
    (tmp_path / "friction.drives.toml").write_text(
        drive_file_text(Drives(iiwa.n), np.zeros(2 * iiwa.n))
    )
    out = tmp_path / "payload"
    drive_file = str(tmp_path / "friction.drives.toml")
    argv = ["payload", "identify", "--model", "iiwa", "--log", str(tmp_path / "log.csv"),
            "--link", LINK, "--out", str(out), "--drives", drive_file]  # fmt: skip
    assert main(argv) == 0
    assert "is constant" not in capsys.readouterr().err  # held joints are expected still
    fields = json.loads((out / "payload.json").read_text())
    assert abs(fields["mass_kg"] - MASS) < 0.02 * MASS
    assert np.linalg.norm(np.array(fields["com_m"]) - COM) < 5e-3
    summary = json.loads((out / "summary.json").read_text())
    assert summary["drive_file"].endswith("friction.drives.toml")
    assert summary["savgol_window"] == 101 and summary["samples"] == t.size
    for name in ("payload.urdf", "payload.toml", "torques.png", "report.html"):
        assert (out / name).stat().st_size > 0


# ------------------------------------------------------------------------- slow
@pytest.fixture(scope="module")
def designed(iiwa):
    limits = LimitSettings().limits(iiwa)
    return design_payload_excitation(
        iiwa, LINK, ["5", "6", "7"], POSTURE, limits, 0.01 * iiwa.effort_limit, sample_rate=RATE
    )


@pytest.mark.slow
def test_designed_motion_beats_random_and_stds_match_monte_carlo(iiwa, designed, tmp_path):
    """50 noisy logs of 10 s along the designed and along a random motion of the same
    length and limits: mass within 2 %, COM within 5 mm in every log; the predicted stds
    match the Monte Carlo spread within 30 %; the designed motion identifies better."""
    assert designed.t[-1] == pytest.approx(10.0)
    assert designed.design.feasible and np.all(designed.held_torque_ratio <= 1.0)
    np.testing.assert_array_equal(designed.q[:, :4], np.tile(POSTURE[:4], (designed.t.size, 1)))
    assert designed.prediction.log_det > designed.random.log_det
    spread = {}
    for label, states in (
        ("designed", (designed.t, designed.q, designed.dq, designed.ddq)),
        ("random", (designed.t, *designed.random_states)),
    ):
        fits = monte_carlo(iiwa, states, 50, tmp_path, seed=7)
        psi = np.array([f.com_form for f in fits])
        assert np.all(np.abs(psi[:, 0] - MASS) < 0.02 * MASS), label
        assert np.all(np.linalg.norm(psi[:, 1:4] - COM, axis=1) < 5e-3), label
        phi = np.array([f.phi for f in fits])
        mc = np.sqrt(np.mean((phi - PHI) ** 2, axis=0))
        predicted = np.mean([f.std for f in fits], axis=0)
        np.testing.assert_array_less(np.abs(mc / predicted - 1.0), 0.3, err_msg=label)
        mc_psi = np.sqrt(np.mean((psi - com_form(PHI)) ** 2, axis=0))
        predicted_psi = np.mean([f.com_std for f in fits], axis=0)
        np.testing.assert_array_less(np.abs(mc_psi / predicted_psi - 1.0)[:4], 0.3, err_msg=label)
        spread[label] = mc
    # D-optimal: the geometric mean of the parameters' errors is smaller
    assert np.exp(np.mean(np.log(spread["designed"] / spread["random"]))) < 0.9


@pytest.mark.slow
def test_cli_excite_writes_a_trajectory_of_the_chosen_joints(iiwa, tmp_path):
    out = tmp_path / "excite"
    posture = ",".join(map(str, POSTURE))
    argv = ["payload", "excite", "--model", "iiwa", "--link", LINK, "--joints", "5,6,7",
            "--posture", posture, "--duration", "6", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    table = read_table(out / "trajectory.csv")
    column = {name: k for k, name in enumerate(table.header)}
    q = table.values[:, [column[f"q_{j}"] for j in iiwa.joint_names]]
    assert table.values[-1, column["t"]] == pytest.approx(6.0)
    np.testing.assert_allclose(q[:, :4], np.tile(POSTURE[:4], (q.shape[0], 1)))
    np.testing.assert_allclose(q[0], POSTURE, atol=1e-12)
    assert np.all((q >= iiwa.lower) & (q <= iiwa.upper))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["log_det"]["designed"] > summary["log_det"]["random"]
    assert (out / "report.html").stat().st_size > 0


def test_real_recording_without_payload_finds_none(tmp_path):
    """The Staubli TX40 recording (models/staubli_tx40, nothing on the tool) read through its
    log description, the robot's published drive terms beside its URDF: the payload found on
    the tool is no mass, within its standard deviation."""
    out = tmp_path / "tx40"
    description = wb.models.urdf_path("staubli_tx40").parent / "identification.toml"
    argv = ["payload", "identify", "--model", "staubli_tx40", "--log", str(description),
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["drive_file"].endswith("tx40.drives.toml")
    assert abs(summary["mass_kg"]) < 3 * summary["mass_std_kg"]
    assert summary["mass_std_kg"] < 0.1
