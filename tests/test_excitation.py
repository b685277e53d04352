"""Experiment design (workbench.excitation, workbench excite): trajectories, exact derivatives,
limits between collocation points, the IPOPT design, D-optimal postures, the problem file and the
command line. The gradient checks against CasADi AD are in test_excitation_sx.py."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.cli import main
from workbench.errors import WorkbenchError
from workbench.excitation import postures as po
from workbench.excitation.design import (
    DesignOptions,
    Limits,
    TorqueFunction,
    design_trajectory,
    limit_ratios,
    random_parameters,
)
from workbench.excitation.experiment import dynamic_information
from workbench.excitation.information import (
    TorqueColumns,
    drive_column_derivatives,
)
from workbench.excitation.problem import read_problem
from workbench.excitation.trajectory import FourierSpace, margin_factor
from workbench.identification.drives import Drives
from workbench.identification.torque_model import TorqueModel, base_parameters
from workbench.recordings.log_files import read_log
from workbench.testing import central_differences

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def iiwa():
    return wb.models.load("iiwa")


@pytest.fixture(scope="module")
def two_link():
    return wb.models.load("planar_2r")


# ------------------------------------------------------------- trajectory
def test_fourier_rest_start_and_exact_derivatives():
    start = np.array([0.3, -0.2, 0.1])
    space = FourierSpace(3, 4.0, 5, rest=True, start=start)
    theta = np.random.default_rng(0).normal(size=space.size)
    traj = space.trajectory(theta)
    q, dq, ddq = traj.evaluate(np.array([0.0, 4.0]))
    np.testing.assert_allclose(q[0], start, atol=1e-12)
    np.testing.assert_allclose(q[1], start, atol=1e-12)  # periodic
    np.testing.assert_allclose(dq, 0.0, atol=1e-12)
    np.testing.assert_allclose(ddq, 0.0, atol=1e-11)
    t = np.linspace(0.1, 3.9, 7)
    h = 1e-5
    qp, dqp, _ = traj.evaluate(t + h)
    qm, dqm, _ = traj.evaluate(t - h)
    q, dq, ddq = traj.evaluate(t)
    np.testing.assert_allclose((qp - qm) / (2 * h), dq, atol=1e-8)
    np.testing.assert_allclose((dqp - dqm) / (2 * h), ddq, atol=1e-7)
    np.testing.assert_allclose(space.parameters(traj.coefficients), theta, atol=1e-12)
    # the reduced basis is the trajectory's derivative with respect to theta
    (Bq, _, Ba), offset = space.reduced_basis(t)
    z = theta.reshape(3, -1)
    np.testing.assert_allclose(offset[0] + Bq @ z.T, q, atol=1e-12)
    np.testing.assert_allclose(offset[2] + Ba @ z.T, ddq, atol=1e-10)


def test_bernstein_margin_bounds_the_continuum():
    rng = np.random.default_rng(1)
    L, K = 5, 40
    kappa = margin_factor(L, K)
    space = FourierSpace(1, 2.0, L, rest=False)
    worst = 0.0
    for _ in range(100):
        c = rng.normal(size=(1, 2 * L + 1)) / np.r_[1, np.arange(1, L + 1), np.arange(1, L + 1)]
        traj = space.trajectory(space.parameters(c))
        for part in range(3):
            grid = np.abs(traj.evaluate(space.collocation_times(K))[part]).max()
            fine = np.abs(traj.evaluate(np.linspace(0, 2.0, 8000))[part]).max()
            worst = max(worst, fine * kappa / grid)
    assert worst <= 1.0
    with pytest.raises(WorkbenchError, match="too few"):
        margin_factor(10, 8)


# ----------------------------------------------------- column derivatives
def test_drive_column_derivatives_match_central_differences():
    n = 6
    R = np.eye(n) * 30.0
    R[5, 4] = R[5, 5] = 32.0
    drives = Drives(
        n, ("rotor_inertia", "friction", "offset", "coupled_motors"), R, np.full(n, 0.2)
    )
    rng = np.random.default_rng(2)
    dq, ddq = rng.normal(scale=0.3, size=(2, 5, n))
    dv, da = drive_column_derivatives(drives, dq, ddq)
    h = 1e-6
    fd_v = central_differences(lambda v: drives.columns(v, ddq), dq, h, samples=True)
    fd_a = central_differences(lambda a: drives.columns(dq, a), ddq, h, samples=True)
    np.testing.assert_allclose(dv, fd_v, atol=1e-7)
    np.testing.assert_allclose(da, fd_a, atol=1e-7)


def test_regressor_state_derivatives_match_central_differences(iiwa):
    drives = Drives(iiwa.n, ("friction", "rotor_inertia"), min_speed=np.full(iiwa.n, 0.1))
    model = TorqueModel(iiwa, drives)
    base = base_parameters(model)
    columns = TorqueColumns(model, base.independent)
    rng = np.random.default_rng(3)
    s = list(rng.normal(size=(3, 4, iiwa.n)))
    D = columns.derivatives(*s)
    h = 1e-6
    for part in range(3):

        def values(x, part=part):
            return columns.values(*(x if k == part else s[k] for k in range(3)))

        fd = central_differences(values, s[part], h, samples=True)
        assert np.abs(D[part] - fd).max() <= 1e-6 * (np.abs(fd).max() + 1.0)


# ----------------------------------------------------------------- design
def _small_design(chain, **limits):
    drives = Drives(chain.n, ("friction",), min_speed=np.full(chain.n, 0.05))
    information = dynamic_information(chain, drives, np.full(chain.n, 0.1))
    space = FourierSpace(chain.n, 3.0, 4)
    lim = Limits(
        limits.get("lower", np.full(chain.n, -1.5)), limits.get("upper", np.full(chain.n, 1.5)),
        limits.get("velocity", np.full(chain.n, 3.0)), np.full(chain.n, 20.0),
        limits.get("torque", np.full(chain.n, 40.0)),
    )  # fmt: skip
    options = DesignOptions(collocation=40, max_iterations=60)
    return design_trajectory(information, space, lim, TorqueFunction(chain), options), lim


def test_design_improves_criterion_and_keeps_limits_between_points(two_link):
    design, lim = _small_design(two_link)
    assert design.log_det > design.initial["log_det"]
    # fine grid, 50 points per collocation interval
    ratios = limit_ratios(design.trajectory, lim, TorqueFunction(two_link), 40 * 50)
    for quantity, ratio in ratios.items():
        assert np.max(ratio) <= 1.0 + 1e-9, quantity
    _, dq, ddq = design.trajectory.evaluate(np.array([0.0]))
    np.testing.assert_allclose(dq, 0.0, atol=1e-10)
    np.testing.assert_allclose(ddq, 0.0, atol=1e-9)


def test_infeasible_limits_are_named(two_link, iiwa):
    drives = Drives(iiwa.n, ("friction",), min_speed=np.full(iiwa.n, 0.05))
    information = dynamic_information(iiwa, drives, np.full(iiwa.n, 1.0))
    start = np.array([0.0, 1.2, 0.0, 0.0, 0.0, 0.0, 0.0])  # arm forward: gravity on joint 2
    space = FourierSpace(iiwa.n, 5.0, 4, start=start)
    torque = iiwa.effort_limit.copy()
    torque[1] = 10.0
    lim = Limits(iiwa.lower, iiwa.upper, iiwa.velocity_limit, np.full(7, 5.0), torque)
    with pytest.raises(WorkbenchError, match=r"iiwa_joint_2.*infeasible limits"):
        design_trajectory(information, space, lim, TorqueFunction(iiwa))
    with pytest.raises(WorkbenchError, match="empty"):
        _small_design(two_link, lower=np.full(two_link.n, 1.0), upper=np.full(two_link.n, 0.5))


def test_random_parameters_are_within_limits(iiwa):
    space = FourierSpace(iiwa.n, 8.0, 5)
    lim = Limits(iiwa.lower + 0.05, iiwa.upper - 0.05, iiwa.velocity_limit, np.full(7, 5.0),
                 0.3 * iiwa.effort_limit)  # fmt: skip
    torques = TorqueFunction(iiwa)
    theta = random_parameters(space, lim, torques, np.random.default_rng(0), 80)
    ratios = limit_ratios(space.trajectory(theta), lim, torques, 80 * 20)
    assert max(float(np.max(r)) for r in ratios.values()) <= 1.0 + 1e-9
    assert float(np.max(ratios["velocity"])) > 0.5  # as large as the limits allow


# --------------------------------------------------------------- postures
def test_posture_exchange_against_exhaustive_search(iiwa):
    rng = np.random.default_rng(4)
    q = po.random_postures(iiwa, 14, iiwa.lower, iiwa.upper, rng)
    info = po.posture_information(iiwa, q, measure="pose", device_known=True)
    count = max(int(np.ceil(info.size / 6)), 4)
    selection = po.select_postures(info, count)
    best = max(
        np.linalg.slogdet(info.matrix(np.array(s)))[1]
        for s in itertools.combinations(range(14), count)
    )
    assert selection.log_det >= selection.greedy_log_det - 1e-9
    assert selection.log_det <= best + 1e-9 <= selection.upper_bound + 1e-9
    assert 0 < selection.efficiency_bound <= 1.0
    assert selection.log_det >= best - 0.5  # the exchange finds (nearly) the best subset


def test_posture_information_rows_are_the_kinematic_jacobian(iiwa):
    q = po.random_postures(iiwa, 50, iiwa.lower, iiwa.upper, np.random.default_rng(5))
    info = po.posture_information(iiwa, q, measure="position", sigma_position=1e-3)
    # positions move with the tool: rows are d p / d params S / sigma
    assert info.rows.shape[:2] == (50, 3)
    s = np.linalg.svd(info.rows.reshape(-1, info.size), compute_uv=False)
    assert s[-1] > 1e-8 * s[0]  # identifiable directions only


# ---------------------------------------------------------- problem files
def test_problem_file_errors_name_file_and_key(tmp_path, iiwa):
    bad = tmp_path / "bad.toml"
    bad.write_text("[trajectory]\nperiod = 10.0\nharmonix = 5\n")
    with pytest.raises(
        WorkbenchError, match=r"bad.toml: \[trajectory\]: unknown key\(s\) harmonix"
    ):
        read_problem(bad, iiwa)
    bad.write_text("[limits]\nacceleration = -1.0\n")
    with pytest.raises(WorkbenchError, match=r"bad.toml: \[limits\] acceleration"):
        read_problem(bad, iiwa)
    bad.write_text("[limits]\nlower = [0, 0, 0, 0, 0, 0, 0]\nupper = [1, 1, 1, -1, 1, 1, 1]\n")
    with pytest.raises(WorkbenchError, match=r"bad.toml.*iiwa_joint_4.*empty"):
        read_problem(bad, iiwa)
    for name in ("excite_dynamic", "excite_twist", "excite_kinematic"):
        read_problem(ROOT / "problems" / f"{name}.toml", iiwa)


# ----------------------------------------------------------- command line
def test_cli_bad_input_exits_2_and_writes_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["excite", "--model", "planar_2r", "--kind", "static", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--kind 'static'" in err
    problem = tmp_path / "p.toml"
    problem.write_text("[design]\ncriterion = 'volume'\n")
    assert (
        main(
            ["excite", "--model", "planar_2r", "--kind", "dynamic", "--out", str(out), str(problem)]
        )
        == 2
    )
    assert "p.toml: [design] criterion" in capsys.readouterr().err
    problem.write_text(
        "[trajectory]\nstart = [0.0, 1.2, 0.0, 0.0, 0.0, 0.0, 0.0]\n"
        "[limits]\ntorque = [320, 10, 176, 176, 110, 40, 40]\n"
    )
    args = ["excite", "--model", "iiwa", "--kind", "dynamic", "--out", str(out), str(problem)]
    assert main(args) == 2
    assert "infeasible limits" in capsys.readouterr().err
    assert not out.exists()


def test_cli_dynamic_writes_a_readable_trajectory(tmp_path, two_link):
    problem = tmp_path / "p.toml"
    problem.write_text(
        "[trajectory]\nperiod = 3.0\nharmonics = 4\ncollocation = 40\nsample_rate = 50.0\n"
        "[design]\nmax_iterations = 300\n[output]\nanimation = false\n"
    )
    out = tmp_path / "out"
    assert (
        main(
            ["excite", "--model", "planar_2r", "--kind", "dynamic", "--out", str(out), str(problem)]
        )
        == 0
    )
    for name in ("trajectory.csv", "trajectory.npz", "summary.json", "limits.png", "torques.png"):
        assert (out / name).is_file(), name
    log = read_log(out / "trajectory.csv", two_link)
    assert log.t.size == 151 and np.allclose(log.dq[0], 0.0, atol=1e-12)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["criterion"]["log_det"] > summary["criterion"]["initial_log_det"]
    assert all(
        max(v) <= 1.0 + 1e-9 for v in summary["limits"]["peak_fraction_on_fine_grid"].values()
    )
    assert all(p["predicted_std"] > 0 for p in summary["parameters"])


def test_cli_kinematic_writes_postures(tmp_path, iiwa):
    candidates = tmp_path / "candidates.csv"
    q = po.random_postures(iiwa, 200, iiwa.lower + 0.1, iiwa.upper - 0.1, np.random.default_rng(6))
    header = ",".join(f"q_{j}" for j in iiwa.joint_names)
    np.savetxt(candidates, q, delimiter=",", header=header, comments="")
    problem = tmp_path / "p.toml"
    problem.write_text(
        '[postures]\ncount = 12\ncandidates = "candidates.csv"\nmeasure = "pose"\n'
        "[output]\nanimation = false\n"
    )
    out = tmp_path / "out"
    assert (
        main(["excite", "--model", "iiwa", "--kind", "kinematic", "--out", str(out), str(problem)])
        == 0
    )
    chosen = read_log(out / "postures.csv", iiwa).q
    assert chosen.shape == (12, 7)
    assert all(np.any(np.all(np.isclose(q, row), axis=1)) for row in chosen)
    summary = json.loads((out / "summary.json").read_text())
    c = summary["criterion"]
    assert c["log_det"] <= c["upper_bound"] and c["log_det"] > c["random_selection_log_det"]


def test_twist_design_on_a_small_robot(two_link, tmp_path):
    problem = tmp_path / "p.toml"
    problem.write_text(
        "[trajectory]\nperiod = 3.0\nharmonics = 4\ncollocation = 32\n"
        "[design]\nmax_iterations = 300\n[output]\nanimation = false\n"
    )
    out = tmp_path / "out"
    args = ["excite", "--model", "planar_2r", "--kind", "twist", "--out", str(out), str(problem)]
    assert main(args) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["criterion"]["log_det"] > summary["criterion"]["initial_log_det"]
    names = [p["name"] for p in summary["parameters"]]
    assert names[0].startswith("eta") and "fv1" in names
