"""Issue 20, a new user's trial: each reproduction ends in one line and the right exit code.

Every bad input gives exit code 2 with one stderr line naming the problem and
no traceback, and leaves nothing behind; a calibration that does not help
exits with 1; results folders are replaced whole. Command lines run in
process through :func:`workbench.cli.main` except where the operating
system is part of the story (signals, pipes): those run as subprocesses.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.calibration.simulation.simulate import simulate_log
from workbench.cli import build_parser, main
from workbench.config import read_toml
from workbench.dynamics.kinematics import forward_kinematics
from workbench.io import MANIFEST_SUFFIX, json_ready, json_text, results_directory
from workbench.models.urdf import load_urdf, write_urdf
from workbench.recordings import plausibility
from workbench.recordings.log import Log
from workbench.recordings.log_files import read_log, write_log
from workbench.viz.report_page import report_page

NO_STAGING = ".*.staging"


def fails(capsys, argv: list[str], code: int = 2) -> str:
    """Run the command line; check the exit code and one stderr line; return that line."""
    assert main(argv) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


@pytest.fixture(scope="module")
def iiwa() -> wb.Chain:
    return wb.models.load("iiwa")


def _slow_log(chain: wb.Chain, amplitude: float = 0.015, samples: int = 200) -> Log:
    """A slow (0.1 Hz), small motion about q = 0.02 rad with exact tool positions."""
    t = 0.05 * np.arange(samples)
    phase = np.arange(chain.n)
    q = 0.02 + amplitude * np.sin(2 * np.pi * 0.1 * t[:, None] + phase)
    position = forward_kinematics(chain, q)[:, :3, 3]
    return Log(t=t, q=q, position=position, joint_names=chain.joint_names, source="slow.csv")


# ------------------------------------------------------------ wrong units (item 2)
def test_tool_positions_in_millimetres_are_refused(iiwa, tmp_path):
    log = _slow_log(iiwa)
    mm = replace(log, position=log.position * 1000)
    spread = np.ptp(mm.position, axis=0).max()
    assert spread < 20 * plausibility._reach(iiwa)  # the reach test alone lets it pass
    path = write_log(tmp_path / "mm.csv", mm)
    with pytest.raises(wb.WorkbenchError, match=r"marker 'tool'.*look like millimetres"):
        read_log(path, iiwa, require=("position",))
    read_log(write_log(tmp_path / "m.csv", log), iiwa, require=("position",))  # metres pass


def test_one_corrupted_position_is_not_called_a_unit(iiwa, tmp_path):
    """One tool position of 1e300 m among metres is a corrupted value at its sample, not a
    column in millimetres."""
    log = _slow_log(iiwa)
    position = log.position.copy()
    position[17, 0] = 1e300
    path = write_log(tmp_path / "huge.csv", replace(log, position=position))
    with pytest.raises(wb.WorkbenchError, match=r"marker 'tool' at sample 17 .*corrupted value"):
        read_log(path, iiwa, require=("position",))


def test_swapped_position_columns_beside_logged_velocities_are_named(iiwa, tmp_path):
    """q of joints 2 and 3 swapped in a log that also gives dq: each q differentiates
    (numpy's gradient) to the other joint's logged velocity, and the log is refused naming
    the pair; the log as simulated passes."""
    log, _ = simulate_log(iiwa, kind="dynamic", samples=400, noise=0.0)
    assert log.dq is not None
    read_log(write_log(tmp_path / "right.csv", log), iiwa)
    q = log.q.copy()
    q[:, [1, 2]] = q[:, [2, 1]]
    path = write_log(tmp_path / "swapped.csv", replace(log, q=q))
    expected = r"'iiwa_joint_2' moves as the logged velocities of 'iiwa_joint_3'.*swapped"
    with pytest.raises(wb.WorkbenchError, match=expected):
        read_log(path, iiwa)


@pytest.mark.parametrize(("scale", "unit"), [(100.0, "centimetres"), (1000.0, "millimetres")])
def test_a_prismatic_joint_in_another_length_unit_is_named(tmp_path, scale, unit):
    """The Panda's fingers (range [0, 0.04] m) logged in centimetres or millimetres: the
    refusal names the unit in which every logged value lies within the range."""
    panda = wb.models.load("panda")
    finger = panda.joint_kinds.index("prismatic")
    q = np.tile(0.3 * np.ones(panda.n), (50, 1))
    q[:, finger] = np.linspace(0.005, 0.035, 50) * scale
    log = Log(t=0.1 * np.arange(50), q=q, joint_names=panda.joint_names, source="f.csv")
    with pytest.raises(wb.WorkbenchError, match=f"the values look like {unit}"):
        read_log(write_log(tmp_path / "fingers.csv", log), panda)


def test_joint_positions_in_degrees_are_refused(iiwa, tmp_path):
    log = _slow_log(iiwa)
    degrees = replace(log, q=np.degrees(log.q))
    assert np.all(np.abs(degrees.q) < iiwa.upper)  # inside the joint range: not caught there
    path = write_log(tmp_path / "deg.csv", degrees)
    with pytest.raises(wb.WorkbenchError, match="joint positions in degrees"):
        read_log(path, iiwa, require=("position",))


def test_a_quaternion_that_is_not_unit_is_refused(iiwa, tmp_path):
    """Pinocchio's unit quaternions of the tool pass; one sample's scaled by 1e6 or zeroed
    (a corrupted row) is refused naming the sample, not normalised into a pose."""
    import pinocchio as pin

    log = _slow_log(iiwa, samples=40)
    frames = forward_kinematics(iiwa, log.q)
    quaternions = np.array([pin.Quaternion(R).coeffs() for R in frames[:, :3, :3]])
    read_log(write_log(tmp_path / "unit.csv", replace(log, orientation=quaternions)), iiwa)
    for scale in (1e6, 0.0):
        bad = quaternions.copy()
        bad[7] *= scale
        path = write_log(tmp_path / "bad.csv", replace(log, orientation=bad))
        with pytest.raises(wb.WorkbenchError, match=r"quaternion .* of sample 7 has norm"):
            read_log(path, iiwa)


def test_a_joint_column_naming_no_joint_names_the_log(iiwa, tmp_path):
    """A q_ column of a whole robot's log with a typo is the log's fault: the error names the
    log file and the column, with the model's joints."""
    from workbench.recordings.log_files import logged_joints

    path = write_log(tmp_path / "typo.csv", _slow_log(iiwa, samples=5))
    text = path.read_text().replace("q_iiwa_joint_3", "q_iiwa_joint3", 1)
    path.write_text(text)
    with pytest.raises(wb.WorkbenchError, match=r"typo\.csv: column\(s\) q_iiwa_joint3 name no"):
        logged_joints(path, iiwa.joint_names)


# ----------------------------------------------- underdetermined fits, NaN (item 3)
@pytest.fixture(scope="module")
def logs(tmp_path_factory, iiwa):
    folder = tmp_path_factory.mktemp("logs")
    for kind in ("kinematic", "dynamic"):
        log, _ = simulate_log(iiwa, kind=kind, samples=300, noise=1e-4)
        write_log(folder / f"{kind}.csv", log)
        lines = (folder / f"{kind}.csv").read_text().splitlines(keepends=True)
        (folder / f"{kind}_short.csv").write_text("".join(lines[:9]))  # 8 samples
        (folder / f"{kind}_tiny.csv").write_text("".join(lines[:4]))  # 3 samples
    return folder


@pytest.mark.parametrize(
    ("kind", "log", "extra", "message"),
    [
        ("kinematic", "kinematic_short", [], r"too few samples \(8\) to hold out 0.2 .* 1 held"),
        ("kinematic", "kinematic_tiny", [], r"kinematic_tiny\.csv: too few samples"),
        ("twist", "dynamic_tiny", [], r"dynamic_tiny\.csv: too few samples"),
        ("dynamic", "dynamic_short", [], "underdetermined identification"),
        ("dynamic", "dynamic", ["--validation", "0.999"], "underdetermined identification"),
    ],
)
def test_underdetermined_fits_are_refused(capsys, tmp_path, logs, kind, log, extra, message):
    out = tmp_path / "out"
    argv = ["calibrate", "--model", "iiwa", "--log", str(logs / f"{log}.csv"), "--kind", kind]
    line = fails(capsys, [*argv, "--out", str(out), "--quiet", *extra])
    assert __import__("re").search(message, line), line
    assert not out.exists() and not list(tmp_path.glob(NO_STAGING))


def test_a_joint_missing_between_logged_joints_is_refused(capsys, tmp_path, logs, iiwa):
    """A log without a middle joint's column (a column lost on the way) would lock that
    joint at 0 inside the chain and fit some other geometry, with exit 0: refused, naming
    the joint and the logged joints around it."""
    rows = [row.split(",") for row in (logs / "kinematic.csv").read_text().splitlines()]
    middle = iiwa.joint_names[3]
    keep = [i for i, name in enumerate(rows[0]) if name != f"q_{middle}"]
    path = tmp_path / "lost.csv"
    path.write_text("".join(",".join(row[i] for i in keep) + "\n" for row in rows))
    line = fails(capsys, ["calibrate", "--model", "iiwa", "--log", str(path), "--kind",
                          "kinematic", "--out", str(tmp_path / "out"), "--quiet"])  # fmt: skip
    names = iiwa.joint_names
    assert f"joint '{middle}' lies between the joints to calibrate '{names[2]}' and " in line
    assert f"'{names[4]}'" in line and f"no q_{middle} column" in line


def test_poses_of_another_frame_than_the_tool_exit_1(capsys, tmp_path, iiwa):
    """Tool positions over postures across the workspace, calibrated as if they were those
    of a link four moving joints above the tool, leave held-out errors (decimetres) that no
    geometry a calibration finds explains: exit 1, with the reason in summary.json."""
    q = np.random.default_rng(5).uniform(-1.5, 1.5, size=(60, iiwa.n))
    position = forward_kinematics(iiwa, q)[:, :3, 3]
    log = Log(t=np.arange(60.0), q=q, position=position, joint_names=iiwa.joint_names,
              source="poses.csv")  # fmt: skip
    out = tmp_path / "out"
    path = write_log(tmp_path / "poses.csv", log)
    argv = ["calibrate", "--model", "iiwa", "--log", str(path), "--kind", "kinematic",
            "--tool", "iiwa_link_3", "--out", str(out), "--quiet"]  # fmt: skip
    assert main(argv) == 1
    assert "(results written for inspection)" in capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["heldout"]["calibrated"]["position_rms_m"] > 0.05
    assert any("--tool frame" in reason for reason in summary["exit"]["reasons"])


def test_gross_outliers_in_the_poses_are_named(capsys, tmp_path, logs):
    """Three poses of the simulated log moved by 5 cm: the calibration warns naming them and
    the robust losses; the clean log gives no such warning."""
    rows = [row.split(",") for row in (logs / "kinematic.csv").read_text().splitlines()]
    column = rows[0].index("px")
    for k in (11, 60, 200):
        rows[k][column] = repr(float(rows[k][column]) + 0.05)
    path = tmp_path / "outliers.csv"
    path.write_text("".join(",".join(row) + "\n" for row in rows))
    for log, expected in ((path, True), (logs / "kinematic.csv", False)):
        argv = ["calibrate", "--model", "iiwa", "--log", str(log), "--kind", "kinematic",
                "--out", str(tmp_path / "out"), "--quiet"]  # fmt: skip
        main(argv)
        err = capsys.readouterr().err
        assert ("3 of 300 samples miss the calibrated model" in err) is expected, err
        assert ("--loss huber" in err) is expected


def test_noisy_stamps_of_a_regular_log_are_named(capsys, tmp_path, iiwa):
    """A torque log sampled regularly whose stamps carry noise (8 % of the period, RMS): the
    implausible fit names the clock's jitter, not a wrong sample period."""
    log, _ = simulate_log(iiwa, kind="dynamic", samples=3000, noise=1e-4)
    period = log.t[1] - log.t[0]
    stamps = log.t + np.random.default_rng(6).normal(0.0, 0.08 * period, len(log.t))
    noisy = Log(t=stamps, q=log.q, tau=log.tau, joint_names=log.joint_names, source="n.csv")
    path = write_log(tmp_path / "noisy.csv", noisy)
    argv = ["calibrate", "--model", "iiwa", "--log", str(path), "--kind", "dynamic",
            "--out", str(tmp_path / "out"), "--quiet"]  # fmt: skip
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "likely cause: clock jitter: the time stamps jitter by" in err, err


def test_folds_that_train_on_one_sample_are_refused():
    """Leave-one-out of a whole log of two samples (or two folds of three) fits each fold on
    one sample: refused; three samples' leave-one-out trains on two."""
    from workbench.calibration.selection.validation import Folds, whole_log_splits

    for k, samples in ((-1, 2), (2, 3)):
        with pytest.raises(wb.WorkbenchError, match="trains a fold on 1: too few samples"):
            whole_log_splits(Folds(k), np.arange(float(samples)))
    splits = whole_log_splits(Folds(-1), np.arange(3.0))
    assert [len(train) for train, _ in splits] == [2, 2, 2]


def test_a_joint_as_the_tool_of_a_kinematic_calibration_is_refused(capsys, tmp_path, logs):
    """A joint's name as --tool: the fit moved the tool frame, which the calibrated URDF can
    keep only on a link, and calibrated.urdf was silently not written (exit 0); refused
    naming the joint's child link."""
    argv = ["calibrate", "--model", "iiwa", "--log", str(logs / "kinematic.csv"), "--kind",
            "kinematic", "--tool", "iiwa_joint_7", "--out", str(tmp_path / "o")]  # fmt: skip
    line = fails(capsys, argv)
    assert "--tool iiwa_joint_7 is a joint of iiwa, not a link" in line
    assert "(the joint's child: iiwa_link_7)" in line


def test_an_implausible_fit_names_the_unlogged_joints_on_the_tool_path(capsys, tmp_path, iiwa):
    """The first joint's column lost from a log of postures across the workspace: locked at 0
    (nothing above it to tell), the fit cannot follow its motion and is implausible; the
    reason names that joint as given no value on the tool's path."""
    q = np.random.default_rng(7).uniform(-1.5, 1.5, size=(60, iiwa.n))
    position = forward_kinematics(iiwa, q)[:, :3, 3]
    joints = iiwa.joint_names[1:]
    log = Log(t=np.arange(60.0), q=q[:, 1:], position=position, joint_names=joints,
              source="lost.csv")  # fmt: skip
    out = tmp_path / "out"
    argv = ["calibrate", "--model", "iiwa", "--log", str(write_log(tmp_path / "l.csv", log)),
            "--kind", "kinematic", "--out", str(out), "--quiet"]  # fmt: skip
    assert main(argv) == 1
    capsys.readouterr()
    reasons = json.loads((out / "summary.json").read_text())["exit"]["reasons"]
    assert any("no value for iiwa_joint_1 on the tool's path" in r for r in reasons), reasons


def test_worse_calibration_exits_1_and_writes_valid_json(capsys, tmp_path, logs):
    out = tmp_path / "out"
    argv = ["calibrate", "--model", "iiwa", "--log", str(logs / "kinematic.csv")]
    argv += ["--kind", "kinematic", "--out", str(out), "--quiet", "--validation", "0.98"]
    argv += ["--parameters", "twists"]  # forced: auto would keep the nominal
    line = fails(capsys, argv, code=1)  # 6 samples fit, 294 held out
    assert "(results written for inspection)" in line
    summary = json.loads((out / "summary.json").read_text(), parse_constant=_no_constants)
    assert any("worse than the nominal" in reason for reason in summary["exit"]["reasons"])
    held = summary["heldout"]
    assert held["calibrated"]["relative_rms"] > held["nominal"]["relative_rms"]
    assert json_ready({"a": [math.nan, np.float64(np.inf), 1.0]}) == {"a": [None, None, 1.0]}


def test_a_reach_summary_without_a_simulation_is_strict_json():
    """A reach whose plan could not be simulated has NaN errors: its summary.json text (the
    writer's json_text) holds null there, which strict JSON parsers read, not NaN."""
    from workbench.ocp.problem import ReachResult

    t = np.linspace(0.0, 0.5, 3)
    result = ReachResult("solved", "ok", t, *np.zeros((4, 3, 2)), 1.0, 7, 0.1, 1e-9, "position")
    assert math.isnan(result.summary()["final_position_error_m"])
    summary = json.loads(json_text(result.summary()), parse_constant=_no_constants)
    assert summary["final_position_error_m"] is None and summary["objective"] == 1.0


def _no_constants(name: str):
    raise AssertionError(f"summary.json holds {name}, which is not JSON")


# ------------------------------------------------------- impossible inertias (item 6)
def _urdf_with(tmp_path: Path, mass: float, ixx: float = 0.01) -> Path:
    chain = wb.models.load("planar_2r")
    phi = chain.phi.copy()
    phi[1] = wb.inertia.phi_from_com(mass, np.array([0.1, 0, 0]), np.diag([ixx, 0.01, 0.01]))
    bad = replace(chain, inertias=wb.inertia.matrix_from_phi(phi))
    return write_urdf(bad, tmp_path / "bad.urdf")


def test_negative_mass_is_refused_on_load_naming_the_link(capsys, tmp_path):
    urdf = _urdf_with(tmp_path, mass=-1.0)
    with pytest.raises(wb.WorkbenchError, match=r"link 'link_2'.*mass -1 kg is negative"):
        load_urdf(urdf)
    line = fails(capsys, ["simulate-log", str(urdf), "--out", str(tmp_path / "log.csv")])
    assert "physically impossible inertia" in line
    assert not (tmp_path / "log.csv").exists()


def test_negative_principal_moment_is_refused(tmp_path):
    with pytest.raises(wb.WorkbenchError, match=r"link 'link_2'.*include a negative one"):
        load_urdf(_urdf_with(tmp_path, mass=1.0, ixx=-0.005))


@pytest.mark.parametrize(
    "name",
    [
        *("iiwa", "planar_2r", "staubli_tx40", "ur10e", "ur3", "ur5", "ur10_cb3", "panda"),
        *("panda_arm", "talos", "talos_upper_body", "z1", "double_pendulum"),
    ],
)
def test_shipped_and_example_robot_data_models_load(name):
    assert wb.models.load(name).n > 0


def test_massless_links_are_accepted(tmp_path):
    chain = wb.models.load("planar_2r")
    kinematic_only = replace(chain, inertias=np.zeros_like(chain.inertias))
    assert load_urdf(write_urdf(kinematic_only, tmp_path / "k.urdf")).n == 2


# --------------------------------------------------------- one line, exit 2 (tracebacks)
def test_non_utf8_csv_and_toml(capsys, tmp_path):
    (tmp_path / "log.csv").write_bytes(b"t,q_a\n0,\xff1\n")
    line = fails(capsys, _calibrate(tmp_path / "log.csv", tmp_path))
    assert "line 2 is not UTF-8" in line
    (tmp_path / "log.toml").write_bytes(b'[positions]\nfile = "\xff"\n')
    assert "line 2 is not UTF-8" in fails(capsys, _calibrate(tmp_path / "log.toml", tmp_path))


def _calibrate(log: Path, folder: Path) -> list[str]:
    return ["calibrate", "--model", "iiwa", "--log", str(log), "--kind", "kinematic",
            "--out", str(folder / "out"), "--quiet"]  # fmt: skip


def test_bom_header_is_accepted(iiwa, tmp_path, logs):
    text = (logs / "kinematic.csv").read_bytes()
    (tmp_path / "bom.csv").write_bytes(b"\xef\xbb\xbf" + text)
    assert read_log(tmp_path / "bom.csv", iiwa).t[0] == 0.0


@pytest.mark.parametrize("content", [b"PK\x03\x04trunc", b"\x00\x01random bytes", b""])
def test_truncated_or_random_npz(capsys, tmp_path, content):
    (tmp_path / "log.npz").write_bytes(content)
    line = fails(capsys, _calibrate(tmp_path / "log.npz", tmp_path))
    assert "log.npz" in line and "pickle" not in line


def test_unreadable_log(capsys, tmp_path):
    # /proc/self/mem is a file that exists and cannot be read from offset 0, even for root
    line = fails(capsys, _calibrate(Path("/proc/self/mem"), tmp_path))
    assert "cannot read /proc/self/mem" in line


def test_problem_directory_is_an_error(tmp_path):
    with pytest.raises(wb.WorkbenchError, match="is a directory, not a TOML file"):
        read_toml(tmp_path, "problem file")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--noise", "-1"], "--noise -1.0: must be a finite number, 0 or more"),
        (["--perturb", "nan"], "--perturb nan"),
        (["--kind", "dynamic", "--perturb", "1.5"], "must be below 1"),
        (["--samples", "5"], "need at least 20"),
    ],
)
def test_simulate_log_options(capsys, tmp_path, options, message):
    out = tmp_path / "log.csv"
    assert message in fails(capsys, ["simulate-log", "iiwa", "--out", str(out), *options])
    assert list(tmp_path.iterdir()) == []


def test_robot_without_joints(capsys, tmp_path):
    urdf = tmp_path / "brick.urdf"
    urdf.write_text('<robot name="brick"><link name="base"/></robot>')
    line = fails(capsys, ["simulate-log", str(urdf), "--out", str(tmp_path / "log.csv")])
    assert "has no revolute or prismatic joints" in line


@pytest.mark.parametrize("target", ["existing", "newdir/"])
def test_html_pointing_at_a_directory(capsys, tmp_path, target):
    (tmp_path / "existing").mkdir()
    np.savez(tmp_path / "traj.npz", t=np.arange(3.0), q=np.zeros((3, 2)))
    html = f"{tmp_path}/{target}"  # a Path would drop the trailing slash
    argv = ["view", str(tmp_path / "traj.npz"), "--model", "planar_2r", "--html", html]
    assert "is a directory; give a file name" in fails(capsys, argv)
    assert not (tmp_path / "newdir").exists()


def test_closed_pipe_ends_quietly():
    import subprocess

    argv = [sys.executable, "-m", "workbench.cli", "info", "iiwa"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # as `| head` does once it has its lines: nobody reads any more
    assert proc.wait(timeout=120) == 141
    assert proc.stderr.read() == ""


@pytest.mark.parametrize("function", ["inverse_dynamics", "twist_derivatives", "time_derivatives"])
@pytest.mark.parametrize("chain", [None, "iiwa"])
def test_api_names_a_chain_argument_that_is_not_a_chain(function, chain):
    q = np.zeros(7)
    arrays = (q,) * (5 if function == "time_derivatives" else 3)
    with pytest.raises(wb.WorkbenchError, match="chain must be a workbench Chain"):
        getattr(wb, function)(chain, *arrays)


def test_api_refuses_complex_input(iiwa):
    q = np.zeros(7, dtype=complex)
    q[0] = 1j
    with pytest.raises(wb.WorkbenchError, match="q is complex"):
        wb.inverse_dynamics(iiwa, q, np.zeros(7), np.zeros(7))


# ------------------------------------------------------- output paths and interrupts
@pytest.mark.parametrize("out", ["file", "/proc/results"])
def test_unusable_out_is_found_before_any_work(capsys, tmp_path, out):
    (tmp_path / "file").write_text("mine")
    out = out if out.startswith("/") else str(tmp_path / out)
    missing_log = str(tmp_path / "never-read.csv")
    argv = ["calibrate", "--model", "iiwa", "--log", missing_log, "--kind", "dynamic"]
    line = fails(capsys, [*argv, "--out", out])
    assert line.startswith(f"workbench calibrate: error: --out {out}")
    assert (tmp_path / "file").read_text() == "mine"


def test_results_folder_is_replaced_whole_and_user_files_stay(tmp_path):
    out = tmp_path / "results"
    with results_directory(out) as stage:
        (stage / "design.png").write_text("co-design run")
        (stage / "summary.json").write_text("1")
    with results_directory(out) as stage:
        (stage / "summary.json").write_text("2")
    assert sorted(p.name for p in out.iterdir()) == ["summary.json"]
    (out / "notes.txt").write_text("the user's")
    with results_directory(out) as stage:
        (stage / "trajectory.csv").write_text("3")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "trajectory.csv"]
    assert (out / "notes.txt").read_text() == "the user's"
    listed = (tmp_path / f".results{MANIFEST_SUFFIX}").read_text().splitlines()
    assert listed[0].startswith("# workbench results list ") and listed[1:] == ["trajectory.csv"]
    assert not list(tmp_path.glob(NO_STAGING))


def test_results_in_the_working_directory_never_move_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("a.txt", "b.txt"):
        with results_directory(".") as stage:
            (stage / name).write_text(name)
    assert Path.cwd() == tmp_path and sorted(p.name for p in tmp_path.iterdir()) == ["b.txt"]


def test_failed_run_leaves_the_previous_results(tmp_path):
    out = tmp_path / "results"
    with results_directory(out) as stage:
        (stage / "summary.json").write_text("good")
    with pytest.raises(wb.WorkbenchError), results_directory(out) as stage:
        (stage / "summary.json").write_text("half")
        raise wb.WorkbenchError("failed")
    assert (out / "summary.json").read_text() == "good"
    assert not list(tmp_path.glob(NO_STAGING))


def test_stale_staging_of_a_dead_process_is_swept(tmp_path):
    import subprocess

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = tmp_path / f".results.{dead.stdout.strip()}.abcd1234.staging"
    (stale / "sub").mkdir(parents=True)
    other = tmp_path / ".results.b.1.x.staging"  # not ours: another output's name
    other.mkdir()
    with results_directory(tmp_path / "results") as stage:
        (stage / "a.txt").write_text("a")
    assert not stale.exists() and other.exists()


SIGTERM_WRITER = """
import sys, time
from workbench.io import raise_on_sigterm, results_directory
raise_on_sigterm()
try:
    with results_directory(sys.argv[1]) as stage:
        (stage / "summary.json").write_text("partial")
        print("writing", flush=True)
        time.sleep(600)
except KeyboardInterrupt as exc:
    print(type(exc).__name__, flush=True)
    sys.exit(143)
"""


def test_sigterm_while_writing_leaves_nothing(tmp_path):
    import signal
    import subprocess

    out = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, "-c", SIGTERM_WRITER, str(out)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout.readline().strip() == "writing"
    assert list(tmp_path.glob(NO_STAGING))
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout.readline().strip() == "Terminated"
    assert proc.wait(timeout=60) == 143
    assert list(tmp_path.iterdir()) == []


def _children(pid: int) -> list[int]:
    """Process ids whose parent is ``pid`` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGKILL"])
def test_view_server_dies_with_the_command(tmp_path, signal_name):
    import signal
    import subprocess
    import time

    np.savez(tmp_path / "traj.npz", t=np.arange(3.0), q=np.zeros((3, 2)))
    argv = [sys.executable, "-m", "workbench.cli", "view", str(tmp_path / "traj.npz")]
    proc = subprocess.Popen([*argv, "--model", "planar_2r"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().startswith("meshcat viewer at")
    servers = _children(proc.pid)
    assert servers
    proc.send_signal(getattr(signal, signal_name))
    proc.wait(timeout=60)
    deadline = time.monotonic() + 30  # the kernel signals the orphan; wait for it to end
    while not all(_gone(pid) for pid in servers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(_gone(pid) for pid in servers)


# ----------------------------------------------------------- silent or heavy work
def test_warm_up_compiles_every_kernel():
    import numba

    from workbench.closed_chains import loop_kernels
    from workbench.dynamics import derivatives, inverse_dynamics, regressor, time_derivatives
    from workbench.warm_up import warm_up

    warm_up()
    for module in (derivatives, inverse_dynamics, regressor, time_derivatives, loop_kernels):
        for name, value in vars(module).items():
            if isinstance(value, numba.core.registry.CPUDispatcher) and value.targetoptions.get(
                "nogil"
            ):
                assert value.signatures, f"{module.__name__}.{name} is not compiled"


def test_compile_message_only_when_numba_compiles():
    import subprocess

    run = [sys.executable, "-m", "workbench.warm_up"]
    subprocess.run(run, capture_output=True, check=True)  # fills the cache if it was empty
    again = subprocess.run(run, capture_output=True, text=True, check=True)
    assert "compiling" not in again.stderr and "ready" in again.stdout


@pytest.mark.slow
def test_compile_message_on_an_empty_cache(tmp_path):
    import os
    import subprocess

    from workbench.runtime import COMPILE_MESSAGE

    env = os.environ | {"NUMBA_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "workbench.warm_up"], env=env,
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert done.stderr.count(COMPILE_MESSAGE) == 1


def test_calibrate_shows_progress_unless_quiet(capsys, tmp_path, logs):
    argv = ["calibrate", "--model", "iiwa", "--log", str(logs / "kinematic.csv")]
    argv += ["--kind", "kinematic", "--folds", "3", "--out", str(tmp_path / "out")]
    assert main(argv) in (0, 1)
    err = capsys.readouterr().err
    assert "reading kinematic.csv" in err and "validation fits" in err
    assert re.search(r" (\d+)/\1 ", err)  # the bar reaches its total
    assert "held-out figures of the candidates" in err
    assert main([*argv, "--quiet", "--parameters", "frames"]) in (0, 1)  # one candidate
    assert capsys.readouterr().err.count("\n") <= 1  # at most the "did not help" line


# -------------------------------------------------------------- small but visible
def test_help_shows_defaults_and_every_option_has_help():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name, command in commands.items():
        if name == "reach":
            continue
        for action in command._actions:
            assert action.help, f"{name} {action.option_strings or action.dest} has no help"
    text = commands["simulate-log"].format_help()
    assert "(default: 2000)" in text and "(default: kinematic)" in text


def test_version(capsys):
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == "workbench 0.1.0"


def test_model_help_says_name_or_urdf():
    commands = build_parser()._subparsers._group_actions[0].choices
    for name in ("info", "calibrate", "simulate-log", "view"):
        helps = [a.help for a in commands[name]._actions if a.dest == "model"]
        assert helps and "model name or URDF path" in helps[0], name


def test_simulate_log_writes_what_its_help_names(capsys, tmp_path):
    doc = " ".join(build_parser()._subparsers._group_actions[0].choices["simulate-log"]
                   .description.split())  # fmt: skip
    assert "results/log.truth.urdf" in doc
    assert main(["simulate-log", "planar_2r", "--out", str(tmp_path / "log.csv")]) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == ["log.csv", "log.truth.json", "log.truth.urdf"]


@pytest.mark.parametrize("model", ["ur5", "panda_arm"])
def test_example_robot_data_meshes_are_found(tmp_path, model):
    from workbench.viz.playback import robot_by_name

    robot = robot_by_name(model)
    assert robot.visual_model.ngeoms > 0
    assert all(Path(g.meshPath).is_file() for g in robot.visual_model.geometryObjects)


def test_calibrate_writes_one_report_page(tmp_path, logs):
    out = tmp_path / "out"
    argv = ["calibrate", "--model", "iiwa", "--log", str(logs / "dynamic.csv")]
    assert main([*argv, "--kind", "dynamic", "--out", str(out), "--quiet"]) in (0, 1)
    page = (out / "report.html").read_text()
    assert page.count("data:image/png;base64,") == 2  # residuals and held-out torques
    assert "held-out relative RMS" in page and "dynamic calibration of iiwa14" in page
    assert "report.html" in json.loads((out / "summary.json").read_text())["files"]


def test_report_page_escapes_and_embeds_an_animation():
    page = report_page("<b>", [("a & b", 1.0)], animation='<script>x="1"</script>')
    assert "<h1>&lt;b&gt;</h1>" in page and "a &amp; b" in page
    assert 'srcdoc="&lt;script&gt;x=&quot;1&quot;&lt;/script&gt;"' in page


SETTLED_WRITER = """
import sys, time
from workbench.io import raise_on_sigterm, results_directory, settle_on_publish
raise_on_sigterm()
settle_on_publish()
try:
    with results_directory(sys.argv[1]) as stage:
        (stage / "summary.json").write_text("complete")
    print("published", flush=True)
    time.sleep(3)  # the command's summary line and exit
except KeyboardInterrupt as exc:
    print(type(exc).__name__, flush=True)
    sys.exit(130)
"""


def test_an_interrupt_after_publishing_leaves_the_run_successful(tmp_path):
    """Ctrl-C or SIGTERM in the last moments of a command, after its results directory is
    published, ended it with 130 (sometimes with no message) although its results had
    replaced the previous ones: once published they are final and the command exits 0."""
    import signal
    import subprocess

    out = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, "-c", SETTLED_WRITER, str(out)],
                            stdout=subprocess.PIPE, text=True)  # fmt: skip
    assert proc.stdout.readline().strip() == "published"
    proc.send_signal(signal.SIGINT)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0 and proc.stdout.read() == ""
    assert (out / "summary.json").read_text() == "complete"
