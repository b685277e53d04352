"""MUKCa's sockets (models/mukca): the calibrated URDF alone predicts what the fit predicts, and
the held-out figures on other tool positions against the nominal model and MUKCa's own fit.

The held-out protocol is MUKCa's: train on one tool position, load the
``calibrated.urdf`` written for it with Pinocchio and predict the ball centres
of every other tool position of the same robot (benchmarks/bench_mukca.py,
which also times the command).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest

from workbench import models
from workbench.calibration.checks.geometry_plausibility import (
    ANGLE_CHANGE,
    LENGTH_CHANGE,
    joint_pairs,
)
from workbench.calibration.problems.kinematic_problem import Candidate, KinematicCalibrationProblem
from workbench.calibration.problems.problem import Options
from workbench.calibration.reporting.exact_urdf import calibrated_urdf
from workbench.calibration.run import Request, run_calibration
from workbench.errors import WorkbenchError, WorkbenchWarning
from workbench.recordings.log_files import read_log
from workbench.recordings.recording import described_joints

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_mukca as bench  # noqa: E402


def problem_of(robot: str, position: str, tool: str | None = None):
    urdf = str(bench.MODELS / "urdf" / bench.urdf_name(robot))
    log = bench.MODELS / robot / f"{position}.toml"
    joints, _, _ = described_joints(log)
    chain = models.load(urdf, tool_frame=tool, joints=joints)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", WorkbenchWarning)  # the Kinova's narrow URDF limits
        problem = KinematicCalibrationProblem(chain, read_log(log, chain), Options())
    return problem


@pytest.mark.parametrize(
    ("robot", "position", "tool"),
    [("panda_1", "front", None), ("kuka_14", "front", "tool0")],
)
def test_calibrated_urdf_alone_reproduces_the_predictions(robot, position, tool, tmp_path):
    """Pinocchio's forward kinematics of calibrated.urdf puts ball_link where the calibrated
    model predicts the ball (1e-9 m) in every configuration of the log: the ball's frame is
    moved in the URDF (the tool frame on the Panda; a frame that is not the tool, hanging
    from tool0, on the iiwa), and the summary gives its place relative to the frame it hangs
    from as the URDF joint does."""
    problem = problem_of(robot, position, tool)
    fit = problem.fit(None, Candidate("twists"))
    predicted = problem.problem.predict(fit.model)[0][0]
    text, check = calibrated_urdf(problem.chain(fit), {})
    assert check["written"]
    path = tmp_path / "calibrated.urdf"
    path.write_text(text)
    model = pin.buildModelFromUrdf(str(path))
    data = model.createData()
    frame = model.getFrameId("ball_link")
    index = [model.idx_qs[model.getJointId(name)] for name in problem.nominal.joint_names]
    for q, p in zip(problem.problem.q, predicted, strict=True):
        full = pin.neutral(model)
        full[index] = q
        pin.framesForwardKinematics(model, data, full)
        assert np.abs(data.oMf[frame].translation - p).max() < 1e-9
    entry = problem.summary(fit)["markers"]["ball"]
    parent = model.frames[model.frames[frame].parentFrame].parentFrame  # the URDF joint's parent
    relative = data.oMf[parent].inverse() * data.oMf[frame]
    assert entry["hangs_from"] == model.frames[parent].name
    assert np.abs(np.array(entry["xyz"]) - relative.translation).max() < 1e-9
    assert np.abs(np.array(entry["rpy"]) - pin.rpy.matrixToRpy(relative.rotation)).max() < 1e-9


def mean_figures(robot: str, tmp_path: Path) -> np.ndarray:
    """Spread and distance error (m) of the kept calibration and of the nominal model, means
    over the ordered (train, test) pairs, from each calibrated.urdf alone."""
    urdf = bench.MODELS / "urdf" / bench.urdf_name(robot)
    tools = bench.positions(robot)
    rows = []
    for train in tools:
        outcome = run_calibration(
            Request(model=str(urdf), log=str(bench.MODELS / robot / f"{train}.toml"),
                    kind="kinematic")
        )  # fmt: skip
        path = tmp_path / f"{robot}_{train}.urdf"
        path.write_text(outcome.report.urdf)
        for test in tools:
            if test != train:
                rows.append([*bench.figures(path, robot, test), *bench.figures(urdf, robot, test)])
    return np.mean(rows, axis=0)


@pytest.mark.slow
@pytest.mark.parametrize("robot", list(bench.ROBOTS))
def test_heldout_tool_positions_beat_the_nominal(robot, tmp_path):
    """On tool positions it did not see, the calibration is never worse than the nominal
    model and its distance error is at most MUKCa's + 0.1 mm."""
    spread, distance, nominal_spread, nominal_distance = mean_figures(robot, tmp_path)
    assert spread <= nominal_spread
    assert distance <= nominal_distance or robot == "dinova_1"  # MUKCa's own is worse there
    assert distance <= bench.MUKCA[robot][1] * 1e-3 + 1e-4


def degraded_copy(tmp_path: Path, robot: str, position: str, *, distance: str | None = None,
                  negate: str | None = None) -> Path:  # fmt: skip
    """A copy of a shipped socket log with its distance line replaced or one joint column
    negated (a wrong sign in the logging code)."""
    source = bench.MODELS / robot / f"{position}.toml"
    text = source.read_text()
    if distance is not None:
        text = text.replace('value = 0.05\nunit = "m"', distance)
    table = (bench.MODELS / robot / f"{position}.csv").read_text().splitlines()
    if negate is not None:
        k = table[0].split(",").index(negate)
        rows = [line.split(",") for line in table[1:]]
        for row in rows:
            row[k] = repr(-float(row[k]))
        table = [table[0], *(",".join(row) for row in rows)]
    (tmp_path / f"{position}.csv").write_text("\n".join(table) + "\n")
    path = tmp_path / f"{position}.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("distance", "cause"),
    [('value = 50\nunit = "m"', "millimetres given as metres"),
     ('value = 0.05\nunit = "mm"', "metres given as millimetres")],
)  # fmt: skip
def test_a_socket_distance_in_the_wrong_unit_is_refused(tmp_path, distance, cause):
    """A unit slip in the known distance fitted links moved by metres (exit 0 before): the
    nominal model's own socket distance (about 50 mm) tells it before any fit."""
    log = degraded_copy(tmp_path, "kuka_14", "front", distance=distance)
    assert distance in log.read_text()
    urdf = str(bench.MODELS / "urdf" / bench.urdf_name("kuka_14"))
    chain = models.load(urdf, joints=described_joints(log)[0])
    with pytest.raises(WorkbenchError, match=f"distances\\[0\\] between 'socket_0' and "
                       f"'socket_1' .* times as far; {cause}"):  # fmt: skip
        read_log(log, chain)


def test_a_joint_logged_with_the_wrong_sign_makes_an_implausible_fit(tmp_path):
    """One joint column negated still fits (to links moved by decimetres): the run exits 1
    naming the joints whose geometry moved, results written for inspection; the shipped
    log's own calibration moves no joint by a tenth of those bounds."""
    urdf = str(bench.MODELS / "urdf" / bench.urdf_name("kuka_14"))
    outcomes = {}
    for name, negate in (("shipped", None), ("flipped", "joint_a4")):
        folder = tmp_path / name
        folder.mkdir()
        log = degraded_copy(folder, "kuka_14", "front", negate=negate)
        outcomes[name] = run_calibration(Request(urdf, str(log), "kinematic"))
    assert outcomes["shipped"].untrusted == []
    pairs = joint_pairs(outcomes["shipped"].report.chain)
    nominal = joint_pairs(models.load(urdf, joints=described_joints(log)[0]))
    for name, (length, angle) in pairs.items():
        assert abs(length - nominal[name][0]) < LENGTH_CHANGE / 10
        assert abs(angle - nominal[name][1]) < ANGLE_CHANGE / 10
    reasons = outcomes["flipped"].untrusted
    assert len(reasons) == 1 and "moves joints by more than 50 mm or 5 deg" in reasons[0]


def test_joint_pairs_are_pinocchios_joint_placements():
    """The geometry the plausibility check compares, from Pinocchio's joint placements at
    q = 0: distances between consecutive joint origins and angles between their axes."""
    urdf = str(bench.MODELS / "urdf" / bench.urdf_name("kuka_14"))
    pairs = joint_pairs(models.load(urdf))
    model = pin.buildModelFromUrdf(urdf)
    data = model.createData()
    J = pin.computeJointJacobians(model, data, pin.neutral(model))  # world frame, revolute
    for j in range(2, model.njoints):
        parent, child = data.oMi[model.parents[j]], data.oMi[j]
        axes = [J[3:, model.joints[k].idx_v] for k in (model.parents[j], j)]
        length = np.linalg.norm(child.translation - parent.translation)
        angle = np.arccos(np.clip(axes[0] @ axes[1], -1.0, 1.0))
        assert pairs[model.names[j]] == pytest.approx((length, angle), abs=1e-12)


def test_default_folds_hold_out_every_socket():
    """A socket log without a [validation] scheme is cut into 5 folds within each socket's
    samples: every sample is held out once, every fold holds out samples of both sockets in
    one contiguous stretch of each (the log lists socket 0's configurations, then socket 1's:
    over the whole log, the last 20 % held out only socket 1's last samples). The end split
    a description can ask for is cut the same way: the last 20 % of each socket's samples."""
    from workbench.calibration.selection.validation import EndSplit, default_validation

    problem = problem_of("panda_1", "front")
    socket = np.loadtxt(bench.MODELS / "panda_1" / "front.csv", delimiter=",", skiprows=1)[:, 0]
    folds = problem.folds(default_validation(read_log(bench.MODELS / "panda_1" / "front.toml",
                                                      problem.nominal)))  # fmt: skip
    held = np.concatenate([test for _, test in folds])
    assert len(folds) == 5
    assert np.array_equal(np.sort(held), np.arange(socket.size))
    for train, test in folds:
        assert np.intersect1d(train, test).size == 0 and train.size + test.size == socket.size
        for s in (0, 1):
            rows = test[socket[test] == s]
            assert rows.size >= np.count_nonzero(socket == s) // 5
            assert np.array_equal(rows, np.arange(rows[0], rows[-1] + 1))  # contiguous
    [(_, test)] = problem.folds(EndSplit(0.2))
    for s in (0, 1):
        mine = np.flatnonzero(socket == s)
        last = mine[np.arange(mine.size) >= 0.8 * mine.size]  # the last 20 % of the socket
        assert np.array_equal(test[socket[test] == s], last)


def test_sockets_smaller_than_the_folds_hold_out_one_pose_per_fold(tmp_path):
    """Four poses per socket and 5 folds: each of the first four folds holds out one pose of
    each socket (the k-th of each, in their order) and trains on the three others; a
    socket recorded in two stretches around the other is cut by its order in the log, not
    by the rows' places (whose bins would leave folds without it)."""
    from workbench.calibration.selection.validation import Folds

    table = (bench.MODELS / "panda_1" / "front.csv").read_text().splitlines()
    zero = [line for line in table[1:] if line.startswith("0,")]
    one = [line for line in table[1:] if line.startswith("1,")]
    urdf = str(bench.MODELS / "urdf" / "panda.urdf")

    def problem(rows: list[str]) -> KinematicCalibrationProblem:
        (tmp_path / "front.csv").write_text("\n".join([table[0], *rows]) + "\n")
        path = tmp_path / "front.toml"
        path.write_text((bench.MODELS / "panda_1" / "front.toml").read_text())
        chain = models.load(urdf, joints=described_joints(path)[0])
        return KinematicCalibrationProblem(chain, read_log(path, chain), Options())

    small = problem(zero[:4] + one[:4])
    folds = small.folds(Folds(5))
    assert [test.tolist() for _, test in folds] == [[k, 4 + k] for k in range(4)]
    assert small.label(Folds(5)).endswith("within each fixture's samples")
    split = problem(one[:8] + zero[:10] + one[8:16])  # socket 1, socket 0, socket 1 again
    socket = np.array([1] * 8 + [0] * 10 + [1] * 8)
    folds = split.folds(Folds(5))
    assert len(folds) == 5
    for _, test in folds:
        assert set(socket[test]) == {0, 1}
    ones = np.flatnonzero(socket == 1)  # its 16 samples in their order: 4, 3, 3, 3, 3
    assert [np.intersect1d(test, ones).size for _, test in folds] == [4, 3, 3, 3, 3]


def test_a_second_socket_log_is_scored_on_folds_within_each_socket():
    """Another tool position as validation log: its sockets' centres are refitted on the
    training poses of each of its folds, cut within each socket, and the summary says so
    (it named the scheme without the cut); the calibration beats the nominal there."""
    urdf = str(bench.MODELS / "urdf" / "panda.urdf")
    log, other = (str(bench.MODELS / "panda_1" / f"{p}.toml") for p in ("front", "right"))
    outcome = run_calibration(Request(urdf, log, "kinematic", validation_log=other))
    held = outcome.report.summary["heldout"]
    assert "5 contiguous folds, within each fixture's samples, the calibrated" in held["scheme"]
    refitted = held["frames_refitted"]["validation_log"]["marker_frames"]["ball"]
    assert "within each fixture's samples" in refitted
    assert held["calibrated"]["spread_m"] < held["nominal"]["spread_m"]


def test_repeated_socket_rows_are_warned_of(tmp_path):
    """A logger that wrote poses twice: the repeated rows of a socket are named (the first
    repeat's line and how many of the socket's rows repeat one)."""
    table = (bench.MODELS / "panda_1" / "front.csv").read_text().splitlines()
    zero = [line for line in table[1:] if line.startswith("0,")]
    rows = zero[:5] + zero[:3] + [line for line in table[1:] if not line.startswith("0,")]
    (tmp_path / "front.csv").write_text("\n".join([table[0], *rows]) + "\n")
    path = tmp_path / "front.toml"
    path.write_text((bench.MODELS / "panda_1" / "front.toml").read_text())
    chain = models.load(str(bench.MODELS / "urdf" / "panda.urdf"), joints=described_joints(path)[0])
    with pytest.warns(WorkbenchWarning) as caught:
        read_log(path, chain)
    repeated = [str(w.message) for w in caught if "repeats an earlier row" in str(w.message)]
    assert repeated == [
        f"{tmp_path / 'front.csv'}: line 7 repeats an earlier row of fixture 'socket_0' exactly "
        "(3 of its 8 rows do): each repeat counts that pose again, and held out it is scored "
        "against its own twin; remove the repeated rows"
    ]


def test_a_socket_log_holding_out_nothing_is_one_line_and_writes_nothing(tmp_path, capsys):
    """`[validation] fraction = 0` on a socket log (it held nothing out and was replaced by
    the default): the command line refuses it in one line naming the description and the
    key, exit 2, no traceback, no results directory."""
    from workbench.cli import main

    table = (bench.MODELS / "panda_1" / "front.csv").read_text()
    (tmp_path / "front.csv").write_text(table)
    path = tmp_path / "front.toml"
    path.write_text((bench.MODELS / "panda_1" / "front.toml").read_text()
                    + "[validation]\nfraction = 0\n")  # fmt: skip
    out = tmp_path / "out"
    urdf = str(bench.MODELS / "urdf" / "panda.urdf")
    argv = ["calibrate", "--model", urdf, "--log", str(path), "--kind", "kinematic"]
    assert main([*argv, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        f"workbench calibrate: error: {path}: [validation] fraction = 0 must lie strictly "
        "between 0 and 1 (the share of the log held out)"
    ]
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == [
        "front.csv",
        "front.toml",
    ]
