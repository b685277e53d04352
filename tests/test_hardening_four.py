"""Issue 35, hardening round four: nothing deleted or replaced outside the output, no absurd
answer with exit 0, no hang, memory checked before allocating, no traceback.

Each test takes the issue's reproduction as its input. The items, by number, and their tests:

1. ``test_a_listed_name_outside_the_folder_is_never_deleted``,
   ``test_a_list_the_project_did_not_write_deletes_nothing``.
2. ``test_an_output_that_is_not_a_regular_file_is_refused`` (a FIFO, and a link to one standing
   for ``/dev/null``), ``test_a_results_folder_entry_that_is_a_fifo_is_kept``.
3. ``test_payload_refuses_an_out_that_holds_its_inputs``.
4. ``test_export_never_writes_over_the_summary_it_reads``.
5. ``test_a_mimic_joint_of_a_calibrated_joint_is_refused_naming_it`` (refused: honouring
   the relation in the calibrated chain is a larger change).
6. ``test_a_quaternion_in_another_convention_is_named`` (quaternion orders),
   ``test_rotations_in_degrees_read_as_radians_are_named`` (rpy angles or rotation vectors
   beyond 2 pi read as radians are refused as degrees; degrees within 2 pi are not told).
7. ``test_zero_and_non_unit_quaternions_of_a_bag_are_normalised_or_left_out``.
8. ``test_an_axis_too_short_to_normalise_is_refused``.
9. ``test_a_flipped_transmission_sign_is_named`` (TX40 joint 1 through a ratio of the wrong
   sign), ``test_a_negated_position_or_effort_column_is_named``.
10. ``test_a_sparse_velocity_field_of_a_bag_is_not_interpolated``.
11. ``test_payload_excite_on_a_humanoid_holds_the_joints_off_the_path_at_neutral``.
12. ``test_tampered_results_are_not_exported`` (the values read; what the export refuses of
    plausible-looking results is the export's plausibility check).
13. ``test_a_diverging_open_loop_simulation_is_a_warning``.
14. ``test_a_clock_that_jumps_back_is_named`` (header stamps stepping back in recorded order;
    a bag whose recorder's clock also stepped back is read sorted by that clock and is not
    recognised), ``test_the_clock_block_of_a_bag_counts_what_the_bag_holds`` (out of order
    counted before sorting; a late stamp then an early one is no drop; jitter of 30 % and
    more still counts some).
15. ``test_complex_torques_are_refused_by_the_library``.
16. ``test_a_billion_design_starts_are_refused``.
17. ``test_a_bag_path_that_is_no_regular_file_is_refused``,
    ``test_a_bag_beyond_memory_is_refused_before_it_is_read``.
18. ``test_sizes_beyond_memory_are_refused_before_allocation``.
19. ``test_a_csv_cell_beyond_the_field_limit_is_one_line``.
20. ``test_python_api_errors_are_workbench_errors``.
21. ``test_a_table_log_of_a_robot_with_coupled_motors_calibrates`` (the coupled-motor
    refusal; the run still ends in an implausible-fit diagnosis, exit 1, since the simulated
    truth has none of the drive file's terms that the nominal model adds),
    ``test_payload_excite_on_a_mobile_base_with_its_whole_arm_moving_finds_a_posture``.
22. ``test_the_summary_lists_the_locked_joints_and_their_values``,
    ``test_a_duplicated_csv_column_is_named_in_the_log``,
    ``test_a_time_column_in_ms_read_as_seconds_is_named``,
    ``test_a_sample_period_ten_times_too_long_is_named``,
    ``test_a_dithering_joint_of_a_bag_is_locked_at_its_median``.

Issue 36: ``test_term_benefits_speak_of_the_final_model``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from tests.conftest import problem_copy
from tests.test_hardening_three import chain_urdf, fails
from workbench.calibration.problems.problem import Options
from workbench.calibration.selection.validation import EndSplit, Folds
from workbench.cli import main
from workbench.errors import WorkbenchError
from workbench.excitation.design import DesignOptions
from workbench.io import MANIFEST_SUFFIX, atomic_write_text, results_directory
from workbench.models import urdf_path
from workbench.recordings.log import Defaults, Log


# ------------------------------------------------------------------ losses (items 1-4)
def _results(out: Path, names: list[str]) -> None:
    with results_directory(out) as stage:
        for name in names:
            (stage / name).write_text(name)


@pytest.mark.parametrize("listed", ["absolute", "linked/x"])
def test_a_listed_name_outside_the_folder_is_never_deleted(tmp_path, listed):
    """A results list naming an absolute path, or a file reached through a symbolic link to
    another folder, deletes nothing there, even when the list is the one the run wrote."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / "x"
    victim.write_text("precious")
    out = tmp_path / "res"
    _results(out, ["summary.json"])
    (out / "notes.txt").write_text("the user's")  # so that the folder is updated, not swapped
    (out / "linked").symlink_to(elsewhere)
    manifest = tmp_path / f".res{MANIFEST_SUFFIX}"
    name = str(victim) if listed == "absolute" else "linked/x"
    lines = manifest.read_text().splitlines()
    manifest.write_text("\n".join([*lines, name]) + "\n")  # the project's list, one name more
    _results(out, ["report.html"])
    assert victim.read_text() == "precious"
    assert (out / "notes.txt").read_text() == "the user's"


def test_a_list_the_project_did_not_write_deletes_nothing(tmp_path):
    """A hand-written list naming the user's files in the folder is not trusted: no file of the
    folder is deleted nor the folder swapped away."""
    out = tmp_path / "res"
    out.mkdir()
    (out / "notes.txt").write_text("the user's")
    (tmp_path / f".res{MANIFEST_SUFFIX}").write_text("notes.txt\n")
    _results(out, ["summary.json"])
    assert (out / "notes.txt").read_text() == "the user's"
    assert (out / "summary.json").read_text() == "summary.json"


@pytest.fixture
def pipe(tmp_path) -> Path:
    path = tmp_path / "pipe.xml"
    os.mkfifo(path)  # never opened: opening it would block
    return path


@pytest.mark.parametrize("through_link", [False, True])
def test_an_output_that_is_not_a_regular_file_is_refused(capsys, tmp_path, pipe, through_link):
    """``export --mjcf pipe.xml`` (a FIFO) and a link to a special file (as ``/dev/null`` is
    for a root user's run) are refused, the FIFO left a FIFO; the library's writer too."""
    target = pipe
    if through_link:
        target = tmp_path / "null.xml"
        target.symlink_to(pipe)
    line = fails(capsys, ["export", "iiwa", "--mjcf", str(target)])
    assert f"--mjcf {target} is a FIFO, not a regular file" in line
    with pytest.raises(WorkbenchError, match="is a FIFO, not a regular file"):
        atomic_write_text(target, "<mujoco/>")
    assert pipe.is_fifo() and (not through_link or target.is_symlink())


def test_a_results_folder_entry_that_is_a_fifo_is_kept(tmp_path):
    out = tmp_path / "res"
    out.mkdir()
    os.mkfifo(out / "summary.json")
    with pytest.raises(WorkbenchError, match=r"summary\.json is a FIFO"):
        _results(out, ["summary.json"])
    assert (out / "summary.json").is_fifo()
    assert not list(tmp_path.glob(".res.*.staging"))


@pytest.fixture
def calibration_folder(tmp_path) -> Path:
    """A calibration results folder: its calibrated.urdf (the iiwa) and a summary.json."""
    folder = tmp_path / "calib"
    folder.mkdir()
    shutil.copy(urdf_path("iiwa"), folder / "calibrated.urdf")
    (folder / "summary.json").write_text('{"joint_names": null}\n')
    (folder / "log.csv").write_text("t,q_iiwa_joint_1\n0,0\n")
    return folder


def _unchanged(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize(
    "argv",
    [
        ["identify", "--model", "{d}/calibrated.urdf", "--log", "{t}/log.csv", "--out", "{d}"],
        ["excite", "--model", "{d}/calibrated.urdf", "--joints", "7", "--out", "{d}"],
        ["identify", "--model", "iiwa", "--log", "{d}/log.csv", "--out", "{d}"],
    ],
)
def test_payload_refuses_an_out_that_holds_its_inputs(capsys, tmp_path, calibration_folder, argv):
    before = _unchanged(calibration_folder)
    (tmp_path / "log.csv").write_text("t\n0\n")
    argv = [a.format(d=calibration_folder, t=tmp_path) for a in argv]
    line = fails(capsys, ["payload", *argv])
    assert f"--out {calibration_folder} holds the input" in line
    assert _unchanged(calibration_folder) == before


@pytest.mark.parametrize("name", ["summary.json", "calibrated.urdf"])
def test_export_never_writes_over_the_summary_it_reads(capsys, calibration_folder, name):
    before = _unchanged(calibration_folder)
    out = calibration_folder / name
    line = fails(capsys, ["export", str(calibration_folder), "--mjcf", str(out)])
    assert f"--mjcf {out} is an input of this export" in line
    assert _unchanged(calibration_folder) == before


# ------------------------------------------------------------ wrong answers (items 5-15)
@pytest.mark.parametrize("axis", ["1e-200 1e-200 0", "1e-320 0 0", "0 0 1e-9"])
def test_an_axis_too_short_to_normalise_is_refused(capsys, tmp_path, axis):
    """Item 8: an axis whose squared length underflows passed the zero check and gave NaN
    twists, ``axis="inf inf nan"`` in exports and NaN torques; the check is on the length the
    parsers normalise by. Exports and simulate-log read the model through the same check."""
    bad = tmp_path / "bad.urdf"
    bad.write_text(chain_urdf(3).replace('<axis xyz="0 0 1"/>', f'<axis xyz="{axis}"/>', 1))
    for argv in (["info", str(bad)], ["export", str(bad), "--mjcf", str(tmp_path / "m.xml")]):
        line = fails(capsys, argv)
        assert "line 5: joint 'j1': <axis> xyz has " in line and "too short" in line, line
    assert not (tmp_path / "m.xml").exists()


def test_complex_torques_are_refused_by_the_library():
    """Item 15: ``wb.calibration.calibrate`` dropped the imaginary part of complex torques."""
    chain = wb.models.load("planar_2r")
    t = np.linspace(0.0, 1.0, 50)
    q = np.column_stack([np.sin(t), np.cos(t)])
    with pytest.raises(WorkbenchError, match=r"tau is complex"):
        wb.calibration.calibrate(chain, "dynamic", Log(t=t, q=q, tau=q + 1e-3j))


def _planar_log(**changes) -> Log:
    t = np.linspace(0.0, 2.0, 200)
    q = np.column_stack([np.sin(3 * t), np.cos(2 * t)])
    return Log(**{"t": t, "q": q, "dq": np.cos(q), "ddq": -q, "tau": np.cos(q), **changes})


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: wb.calibration.calibrate(c, "dynamic", _planar_log(q=np.full((200, 2), np.nan))),
         r"q holds nan at sample 0, column 0"),
        (lambda c: wb.calibration.calibrate(c, "dynamic", _planar_log(tau=np.ones((200, 3)))),
         r"tau has shape \(200, 3\); expected \(200, 2\) for a model of 2 joints"),
        (lambda c: wb.calibration.calibrate(c, "dynamic", _planar_log(q=np.ones((200, 7)))),
         r"q has shape \(200, 7\); expected \(200, 2\)"),
        (lambda c: wb.calibration.calibrate(c, "dynamic", None), r"NoneType, not a calibration"),
        (lambda c: wb.calibration.calibrate(None, "dynamic", _planar_log()),
         r"the model is NoneType, not a Chain"),
        (lambda c: wb.calibration.calibrate(c, "dynamic", _planar_log(), validation=0.2),
         r"validation is float"),
        (lambda c: wb.calibration.calibrate(c, "dynamic", _planar_log(), options={}),
         r"options is dict, not Options"),
        (lambda c: wb.calibration.calibrate(c, "dynamic", _planar_log(dq=None)),
         r"the dynamic calibration needs dq in the log"),
        (lambda c: wb.calibration.calibrate(c, "kinematic", _planar_log()),
         r"the kinematic calibration needs position \(or markers\)"),
        (lambda c: Options(loss="soft_l1", f_scale=float("nan")), r"f_scale nan must be"),
        (lambda c: Options(rotation_weight="1"), r"rotation_weight '1' is not a number"),
        (lambda c: Folds(2.5), r"folds 2\.5 is not a whole number"),
        (lambda c: EndSplit(None), r"validation fraction None is not a number"),
        (lambda c: wb.models.load("iiwa", locked=[1, 2]), r"locked must map joint names"),
        (lambda c: wb.models.load("iiwa", joints="iiwa_joint_1"), r"joints must be a list"),
        (lambda c: wb.models.load(None), r"model must be a model name or a URDF path"),
    ],
)  # fmt: skip
def test_python_api_errors_are_workbench_errors(call, message):
    """Item 20: the library's entry points name what is wrong instead of an IndexError, a
    LinAlgError with LAPACK lines or a TypeError from deep inside."""
    with pytest.raises(WorkbenchError, match=message):
        call(wb.models.load("planar_2r"))


@pytest.fixture
def iiwa_results(tmp_path) -> Path:
    """A calibration results folder of the iiwa with drive friction on every joint, joint 6's
    damping 50 times the others'."""
    folder = tmp_path / "res"
    folder.mkdir()
    shutil.copy(urdf_path("iiwa"), folder / "calibrated.urdf")
    names = list(wb.models.load("iiwa").joint_names)
    (folder / "summary.json").write_text(json.dumps({"joint_names": names}))
    fv = {f"fv{j}": 50.0 if j == 6 else 1.0 for j in range(1, 8)}
    values = "\n".join(f"{k} = {v}" for k, v in fv.items())
    (folder / "calibrated.drives.toml").write_text(f'terms = ["friction"]\n[values]\n{values}\n')
    return folder


@pytest.mark.parametrize("tamper", ["reversed joint_names", "fv1 = 1e300"])
def test_tampered_results_are_not_exported(capsys, iiwa_results, tamper):
    """Item 12: a reversed ``joint_names`` in summary.json moved joint 6's damping onto joint 2
    and ``fv1 = 1e300`` became an MJCF damping of 1e300, both with exit 0."""
    mjcf = iiwa_results.parent / "robot.xml"
    assert main(["export", str(iiwa_results), "--mjcf", str(mjcf)]) == 0  # untampered: exported
    capsys.readouterr()
    mjcf.unlink()
    if tamper.startswith("reversed"):
        summary = iiwa_results / "summary.json"
        names = json.loads(summary.read_text())["joint_names"]
        summary.write_text(json.dumps({"joint_names": names[::-1]}))
        expected = r"summary\.json: joint_names .* are not in the model's joint order"
    else:
        drives = iiwa_results / "calibrated.drives.toml"
        drives.write_text(drives.read_text().replace("fv1 = 1.0", "fv1 = 1e300"))
        expected = r"calibrated\.drives\.toml: \[values\] fv1 = 1e\+300"
    line = fails(capsys, ["export", str(iiwa_results), "--mjcf", str(mjcf)])
    assert re.search(expected, line), line
    assert not mjcf.exists()


def _mocap_log(tmp_path: Path, quaternion_edit) -> tuple[Log, list]:
    """The tiago_pro arm's held postures from a bag of joint states and /tf mocap poses
    (tests/test_whole_robot.py's recording), after ``quaternion_edit`` changed the poses'
    quaternions; the log and the warnings reading it gave."""
    from tests.test_whole_robot import TIAGO_ARM, _posture_recording
    from workbench.recordings.log_files import read_log
    from workbench.testing.bag_writer import JointStateStream, PoseStream, write_bag

    chain = wb.models.load("tiago_pro", joints=list(TIAGO_ARM))
    t, q, pose_t, position, quaternion, _ = _posture_recording(chain, chain, 6)
    bag = tmp_path / "run.mcap"
    write_bag(bag, "mcap", [
        JointStateStream(t, list(TIAGO_ARM), position=q),
        PoseStream("/tf", pose_t, position, quaternion_edit(quaternion.copy()),
                   msgtype="TFMessage", child_frame="gripper_marker", frame_id="base_footprint"),
    ])  # fmt: skip
    description = tmp_path / "mocap.toml"
    description.write_text(
        f"[model]\njoints = {list(TIAGO_ARM)!r}\n".replace("'", '"')
        + f'[positions]\nfile = "{bag.name}"\n'
        f'[[markers]]\nname = "gripper"\nfile = "{bag.name}"\ntopic = "/tf"\n'
        f'child_frame = "gripper_marker"\nframe = "{chain.tool_name}"\n'
        "[postures]\nspeed = 0.01\nmin_duration = 0.8\n"
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log = read_log(description, chain, require=("position",))
    return log, [str(w.message) for w in caught]


def test_zero_and_non_unit_quaternions_of_a_bag_are_normalised_or_left_out(tmp_path):
    """Item 7: a lost marker publishing (0, 0, 0, 0), and quaternions scaled by 3, were used as
    they were; slightly scaled ones (a float32 publisher) are normalised. The held postures'
    orientations equal those read from the untouched bag."""
    (tmp_path / "clean").mkdir()
    (tmp_path / "lost").mkdir()
    clean, _ = _mocap_log(tmp_path / "clean", lambda x: x)

    def lose(x):
        x[40:70] = 0.0  # the marker lost during the first hold
        x[300:310] *= 3.0
        x[::3] *= 1.0 + 1e-4
        return x

    log, messages = _mocap_log(tmp_path / "lost", lose)
    assert any("40 of" in m and "far from unit norm" in m for m in messages), messages
    assert len(log) == len(clean)
    rotations = log.measured_markers()[0].rotation
    np.testing.assert_allclose(rotations, clean.measured_markers()[0].rotation, atol=1e-6)


def test_a_mimic_joint_of_a_calibrated_joint_is_refused_naming_it(tmp_path):
    """Item 5: a parallelogram whose j3 mimics j2 was calibrated with j3 locked at 0 (held-out
    23 mm against 0.1 mm of noise) and its calibrated.urdf kept the <mimic>; the same for a
    gripper's finger followers when the gripper joint is calibrated. Locked, the follower
    takes the relation's value (tests/test_whole_robot.py)."""
    from tests.test_whole_robot import TIAGO_ARM

    urdf = tmp_path / "parallelogram.urdf"
    mimic = '<mimic joint="j2" multiplier="-1" offset="0"/>'
    text = chain_urdf(3)
    at = text.index("</joint>", text.index('name="j3"'))
    urdf.write_text(text[:at] + mimic + text[at:])
    with pytest.raises(WorkbenchError, match=r"joint 'j3' mimics the calibrated joint 'j2'"):
        wb.models.load(str(urdf), joints=["j1", "j2"])
    assert wb.models.load(str(urdf), joints=["j1", "j2"], locked={"j3": 0.0}).n == 2
    assert wb.models.load(str(urdf), joints=["j1"]).reduction.locked == (("j2", 0.0), ("j3", 0.0))
    gripper = [*TIAGO_ARM, "gripper_left_finger_joint"]
    with pytest.raises(WorkbenchError, match=r"mimics the calibrated joint 'gripper_left_finger"):
        wb.models.load("tiago_pro", joints=gripper)


# ------------------------------------------------------------- hangs and memory (16-18)
def test_a_billion_design_starts_are_refused(capsys, tmp_path):
    """Item 16: ``[design] starts = 1e9`` ran forever (each start is one IPOPT solve)."""
    problem = problem_copy(tmp_path, "excite_dynamic.toml", starts="1e9")
    argv = ["excite", "--model", "planar_2r", "--kind", "dynamic", "--out", str(tmp_path / "o")]
    line = fails(capsys, [*argv, str(problem)])
    assert "[design] starts = 1000000000 must be at most 1000" in line, line
    with pytest.raises(WorkbenchError, match=r"starts = 0: from 1 to 1000"):
        DesignOptions(starts=0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["simulate-log", "iiwa", "--samples", "100000000", "--out", "{t}/log.csv"],
         "samples = 100000000 needs about"),
        (["payload", "excite", "--model", "iiwa", "--joints", "5,6,7", "--duration", "1e5",
          "--out", "{t}/o", "--quiet"], "duration * sample_rate = 100000 s * 100 Hz needs about"),
        (["view", "{t}/traj.npz", "--html", "{t}/v.html"], "an animation of 700000 samples needs"),
    ],
)  # fmt: skip
def test_sizes_beyond_memory_are_refused_before_allocation(capsys, tmp_path, argv, message):
    """Item 18: simulate-log --samples 1e8 and payload excite --duration 1e5 allocated until
    killed; view of 2,000,000 frames took 7.5 GB. Each is refused before it allocates."""
    samples = 700_000  # beyond the memory budget for the five-bar's 7 meshes
    np.savez(tmp_path / "traj.npz", t=np.arange(samples) / 100.0, q=np.zeros((samples, 5)))
    line = fails(capsys, [a.format(t=tmp_path) for a in argv])
    assert message in line and "GiB of memory" in line, line
    assert not {p.name for p in tmp_path.iterdir()} - {"traj.npz"}


BAG_INFO = ["info", "{log}"]
BAG_CALIBRATE = ["calibrate", "--model", "planar_2r", "--log", "{log}", "--kind", "dynamic",
                 "--out", "{tmp}/o", "--quiet"]  # fmt: skip


@pytest.mark.parametrize("name", ["run.mcap", "run.db3", "run.bag"])
@pytest.mark.parametrize("argv", [BAG_INFO, BAG_CALIBRATE])
def test_a_bag_path_that_is_no_regular_file_is_refused(capsys, tmp_path, name, argv):
    """Item 17: a FIFO named like a bag blocked ``info`` and ``calibrate`` (the .db3 one ignored
    SIGTERM) and a .bag link to /dev/zero grew to 6 GB: here a link to a FIFO stands for the
    device (on a regression it blocks rather than fills the memory of a shared machine)."""
    fifo = tmp_path / ("fifo" if name == "run.bag" else name)
    os.mkfifo(fifo)
    log = tmp_path / name
    if name == "run.bag":
        log.symlink_to(fifo)
    line = fails(capsys, [a.format(log=log, tmp=tmp_path) for a in argv])
    assert f"ROS bag file {log} is a FIFO, not a regular file" in line, line


def test_a_bag_beyond_memory_is_refused_before_it_is_read(tmp_path, monkeypatch):
    from workbench import config
    from workbench.recordings import bags
    from workbench.testing.bag_writer import write_joint_states

    bag = write_joint_states(tmp_path / "run.mcap", "mcap", np.arange(50) * 0.01, ["a"],
                             position=np.zeros((50, 1)))  # fmt: skip
    assert [topic.name for topic in bags.topics(bag)] == ["/joint_states"]
    monkeypatch.setattr(config, "MEMORY_BUDGET", 8 * bag.stat().st_size - 1)
    with pytest.raises(WorkbenchError, match=r"run\.mcap .* needs about .* GiB of memory"):
        bags.topics(bag)


# -------------------------------------------------------------------- tracebacks (19-22)
@pytest.mark.parametrize("where", ["header", "quoted cell"])
def test_a_csv_cell_beyond_the_field_limit_is_one_line(capsys, tmp_path, where):
    """Item 19: a CSV cell over 131,072 characters gave ``_csv.Error: field larger than field
    limit`` with a traceback."""
    rows = ["t,q_joint_1,q_joint_2,tau_joint_1,tau_joint_2"]
    rows += [f"{k / 100},{np.sin(k / 100)},{np.cos(k / 100)},{k % 7},{k % 5}" for k in range(100)]
    line = 1 if where == "header" else 51
    rows[line - 1] = rows[line - 1].replace(",", ',"' + "x" * 200_000 + '",', 1)
    log = tmp_path / "log.csv"
    log.write_text("\n".join(rows) + "\n")
    argv = ["calibrate", "--model", "planar_2r", "--log", str(log), "--kind", "dynamic"]
    message = fails(capsys, [*argv, "--out", str(tmp_path / "o"), "--quiet"])
    assert f"log.csv: line {line}: not a CSV row" in message and "field limit" in message


def test_a_diverging_open_loop_simulation_is_a_warning(monkeypatch):
    """Item 13: "solved" with a 3.1 rad simulated pointing error and no warning. The
    divergence is made by a drift added to the simulated motion (the plan and the knots'
    error are untouched): the warning says how far the simulation ends from the goal and the
    one-line summary counts it."""
    from dataclasses import replace

    from workbench.ocp import reach
    from workbench.ocp.problem import ReachProblem
    from workbench.resources import shipped

    true_simulate = reach.simulate

    def drifting(*args, **kwargs):
        q, dq = true_simulate(*args, **kwargs)
        return q + np.linspace(0.0, 1.5, len(q))[:, None], dq

    problem = replace(ReachProblem.from_toml(shipped("problems") / "fivebar_reach.toml"), knots=20)
    steady = reach.solve(problem, progress=False)
    assert steady.status == "solved" and not steady.warnings
    monkeypatch.setattr(reach, "simulate", drifting)
    result = reach.solve(problem, progress=False)
    assert result.status == "solved" and result.task_error > 0.5
    assert result.transcription_error == pytest.approx(steady.transcription_error, rel=1e-9)
    assert len(result.warnings) == 1, result.warnings
    assert (
        f"simulation of the planned torques ends {result.task_error:.3g} rad"
        in (result.warnings[0])
    )
    assert result.describe().endswith("(simulated), 1 warning(s) (above)")


def test_payload_excite_on_a_humanoid_holds_the_joints_off_the_path_at_neutral():
    """Item 11: ``payload excite`` on a humanoid held the other arm, the head and the grippers
    at a random posture; only the held joints between the base and the link are chosen."""
    from workbench.excitation.payload import frame_on_link, hold_posture
    from workbench.excitation.problem import read_problem

    chain = wb.models.load("talos_upper_body", moving=True)
    problem = read_problem(None, chain)
    limits = problem.limits.limits(chain, "limits")
    link, moving = "arm_left_7_link", ["arm_left_5_joint", "arm_left_6_joint", "arm_left_7_joint"]
    posture = hold_posture(chain, link, moving, limits, problem.noise(chain))
    on_path = chain.ancestors[:, frame_on_link(chain, link)[0]]
    zero_inside = (limits.lower <= 0.0) & (limits.upper >= 0.0)
    neutral = np.where(zero_inside, 0.0, (limits.lower + limits.upper) / 2)
    off = ~on_path
    assert off.sum() >= 10  # the right arm, both grippers, the head
    np.testing.assert_array_equal(posture[off], neutral[off])
    held = on_path & ~np.isin(chain.joint_names, moving)
    assert np.any(posture[held] != neutral[held])  # chosen among random postures


def test_a_table_log_of_a_robot_with_coupled_motors_calibrates(capsys, tmp_path):
    """Item 21 (first part): ``simulate-log staubli_tx40 --kind dynamic`` then ``calibrate`` on
    that log exited 2 on the drive file's coupled-motor terms, which a table log (no
    transmission) cannot use: they are left out of the nominal, with a warning naming them,
    and the calibration runs to its results."""
    log = tmp_path / "log.csv"
    assert main(["simulate-log", "staubli_tx40", "--kind", "dynamic", "--samples", "600",
                 "--out", str(log)]) == 0  # fmt: skip
    argv = ["calibrate", "--model", "staubli_tx40", "--log", str(log), "--kind", "dynamic"]
    code = main([*argv, "--out", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err
    assert "are not terms of" not in err and code != 2, err
    assert "coupled motors' nominal terms Iam6, fsm6, fvm6 are left out" in err
    assert (tmp_path / "o" / "summary.json").is_file()


def test_the_summary_lists_the_locked_joints_and_their_values(tmp_path):
    """Item 22 (part): calibrate's summary.json did not list the locked joints' values. A bag of
    a whole robot whose arm moves and whose head stands at (0.1, -0.3): the summary says so."""
    from tests.test_whole_robot import ARMS
    from workbench.calibration.simulation.simulate import simulate_log
    from workbench.testing.bag_writer import write_joint_states

    arm = ARMS["tiago"]
    log, _ = simulate_log(wb.models.load("tiago", joints=arm), kind="dynamic", samples=400)
    still = ["head_1_joint", "head_2_joint"]
    q = np.column_stack([log.q, np.tile([0.1, -0.3], (len(log), 1))])
    effort = np.column_stack([log.tau, np.zeros((len(log), 2))])
    bag = write_joint_states(tmp_path / "run.bag", "ros1", 100.0 + log.t, [*arm, *still],
                             position=q, effort=effort)  # fmt: skip
    out = tmp_path / "o"
    main(["calibrate", "--model", "tiago", "--log", str(bag), "--kind", "dynamic", "--out",
          str(out), "--quiet"])  # fmt: skip
    locked = json.loads((out / "summary.json").read_text())["locked_joints"]
    assert locked["head_1_joint"] == pytest.approx(0.1) and locked["head_2_joint"] == -0.3
    assert not set(locked) & set(arm)


def test_a_sparse_velocity_field_of_a_bag_is_not_interpolated(tmp_path):
    """Item 10: velocities in 1 message of 10 were interpolated between those messages and
    preferred to differentiating the positions (held-out 0.0161 against 0.0047); they are
    differentiated, with a warning that says how many messages carried them. A bag with
    every velocity keeps them."""
    from workbench.calibration.simulation.simulate import simulate_log
    from workbench.recordings.log_files import read_log
    from workbench.testing.bag_writer import write_joint_states

    chain = wb.models.load("planar_2r")
    truth, _ = simulate_log(chain, kind="dynamic", samples=400)
    sparse = np.full_like(truth.dq, np.nan)
    sparse[::10] = truth.dq[::10]
    logs = {}
    for name, velocity in (("sparse", sparse), ("full", truth.dq)):
        bag = write_joint_states(tmp_path / f"{name}.bag", "ros1", 100.0 + truth.t,
                                 chain.joint_names, truth.q, velocity, truth.tau)  # fmt: skip
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            logs[name] = read_log(bag, chain)
        logs[name + " warnings"] = " ".join(str(w.message) for w in caught)
    assert "only 40 of 400 messages carry every joint's velocity" in logs["sparse warnings"]
    assert logs["sparse"].differentiated and not logs["full"].differentiated
    assert "velocity" not in logs["full warnings"]


@pytest.mark.parametrize(
    ("columns", "cause"),
    [
        ("qw,qx,qy,qz", "the quaternion columns look like w, x, y, z under qx, qy, qz, qw"),
        ("qw,qy,qz,qx", "qw and qx look swapped"),
    ],
)
def test_a_quaternion_in_another_convention_is_named(capsys, tmp_path, columns, cause):
    """Item 6: quaternion columns in w, x, y, z order under qx..qw, or qw and qx swapped,
    calibrated silently to a tool 0.3-0.7 m and 1.3-2.2 rad from the truth: the nominal
    model's orientations are about pi from the measured ones and the named reading brings them
    within the nominal's error. The log as written calibrates."""
    log = tmp_path / "log.csv"
    assert main(["simulate-log", "iiwa", "--kind", "kinematic", "--orientation", "--samples",
                 "300", "--noise", "1e-4", "--out", str(log)]) == 0  # fmt: skip
    lines = log.read_text().splitlines()
    header = lines[0].split(",")
    source = [header.index(c) for c in columns.split(",")]
    target = [header.index(c) for c in ("qx", "qy", "qz", "qw")]
    rows = []
    for line in lines[1:]:
        cells = line.split(",")
        moved = list(cells)
        for to, of in zip(target, source, strict=True):
            moved[to] = cells[of]
        rows.append(",".join(moved))
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("\n".join([lines[0], *rows]) + "\n")
    argv = ["calibrate", "--model", "iiwa", "--kind", "kinematic", "--quiet", "--out"]
    assert main([*argv, str(tmp_path / "right"), "--log", str(log)]) == 0
    capsys.readouterr()
    line = fails(capsys, [*argv, str(tmp_path / "wrong_out"), "--log", str(wrong)])
    assert "the orientations of marker 'tool' are" in line and line.endswith(cause), line


def test_a_clock_that_jumps_back_is_named(capsys, tmp_path):
    """Item 14 (the jump): a clock set back 1.5 s after sample 200 (an NTP step, a restart) was
    sorted into interleaved samples and blamed on the torque scale or the sample period. A bag
    whose header stamps jump back (the publisher's clock set back, the recorder's not) is
    named; a table's t was refused as not increasing already. Samples delivered one period
    late still pass."""
    from workbench.calibration.simulation.simulate import simulate_log
    from workbench.recordings import bags
    from workbench.recordings.log_files import write_log
    from workbench.testing.bag_writer import write_joint_states

    chain = wb.models.load("planar_2r")
    log, _ = simulate_log(chain, kind="dynamic", samples=400)
    t = log.t.copy()
    t[200:] -= 1.5
    table = write_log(tmp_path / "log.csv", replace(log, t=t))
    argv = ["calibrate", "--model", "planar_2r", "--log", str(table), "--kind", "dynamic"]
    line = fails(capsys, [*argv, "--out", str(tmp_path / "o"), "--quiet"])
    assert "line 202, column 1 ('t'): t 0.5 does not increase (previous 1.99)" in line, line
    bag = write_joint_states(tmp_path / "run.bag", "ros1", 100.0 + t, chain.joint_names, log.q,
                             effort=log.tau, receive_t=100.0 + log.t)  # fmt: skip
    argv[4] = str(bag)
    line = fails(capsys, [*argv, "--out", str(tmp_path / "o"), "--quiet"])
    assert "time stamps: the clock jumps back by 1.49 s after sample 199" in line, line
    late = log.t.copy()
    late[[100, 101]] = late[[101, 100]]  # one message a period late
    ok = write_joint_states(tmp_path / "ok.bag", "ros1", 100.0 + late, chain.joint_names, log.q)
    assert len(bags.read_joint_states(ok, "/joint_states").t) == 400


def test_a_duplicated_csv_column_is_named_in_the_log(capsys, tmp_path):
    """Item 22 (part): a CSV whose header names q_joint_1 twice was blamed on the URDF
    ("joints joint_1 named twice"); the log's header is named."""
    log = tmp_path / "log.csv"
    assert main(["simulate-log", "planar_2r", "--kind", "dynamic", "--samples", "300",
                 "--out", str(log)]) == 0  # fmt: skip
    text = log.read_text()
    header, rest = text.split("\n", 1)
    log.write_text(header.replace("q_joint_2", "q_joint_1") + "\n" + rest)
    argv = ["calibrate", "--model", "planar_2r", "--log", str(log), "--kind", "dynamic"]
    line = fails(capsys, [*argv, "--out", str(tmp_path / "o"), "--quiet"])
    assert f"{log}: line 1, column 3 ('q_joint_1'): duplicate column" in line, line


# ------------------------------------------------------------------ item 9: transmission sign
TX40 = Path(urdf_path("staubli_tx40")).parent


@pytest.fixture(scope="module")
def tx40():
    """The TX40's nominal chain, drive values and shipped log (read once: 1.5 s)."""
    from workbench.identification.drives import nominal_drive_values
    from workbench.recordings import read_log

    chain = wb.models.load("staubli_tx40")
    drives = nominal_drive_values(urdf_path("staubli_tx40"), chain.joint_names)
    return chain, drives, read_log(TX40 / "identification.toml", chain, require=("tau",))


def _tx40_copy(tmp_path: Path, edit) -> Path:
    """The shipped description copied beside the shipped data, edited by ``edit``."""
    text = (TX40 / "identification.toml").read_text()
    path = tmp_path / "identification.toml"
    path.write_text(edit(text).replace('"data/', f'"{TX40}/data/'))
    return path


def test_a_flipped_transmission_sign_is_named(tmp_path, tx40):
    """Item 9: the TX40's joint 1 driven through a ratio of the wrong sign (its position and
    effort both negated: inertia and friction are even in the sign, so the joint's own ratio
    and correlation stay near 1) is diagnosed as a transmission sign naming the joint; the
    shipped log is not."""
    from workbench.calibration import diagnose
    from workbench.recordings import read_log

    chain, drives, shipped = tx40
    assert diagnose(shipped, chain, None, drives) == []
    flipped = _tx40_copy(tmp_path, lambda t: t.replace("ratios = [32.0", "ratios = [-32.0"))
    log = read_log(flipped, chain, require=("tau",))
    np.testing.assert_allclose(log.q[:, 0], -shipped.q[:, 0])
    (found,) = diagnose(log, chain, None, drives)
    assert found.cause == "transmission sign"
    assert "'joint_1'" in found.evidence and "'joint_2'" not in found.evidence


@pytest.mark.parametrize("column", ["q", "tau"])
def test_a_negated_position_or_effort_column_is_named(tx40, column):
    """Item 9, the other two reproductions: joint 1's position column (or its effort column)
    alone negated in a copy of the shipped log (the description's reading is linear, so the
    log read from such a copy is the shipped one with that joint's column negated)."""
    from workbench.calibration import diagnose

    chain, drives, shipped = tx40
    sign = np.ones(chain.n)
    sign[0] = -1.0
    if column == "q":
        log = replace(shipped, q=shipped.q * sign, dq=shipped.dq * sign, ddq=shipped.ddq * sign)
    else:
        log = replace(shipped, tau=shipped.tau * sign)
    found = diagnose(log, chain, None, drives)
    assert found and found[0].cause in ("transmission sign", "torque sign")
    assert "joint_1" in found[0].evidence


# ------------------------------------------------------------------ item 22: time, period, dither
def test_a_time_column_in_ms_read_as_seconds_is_named(capsys, tmp_path):
    """Item 22 (time unit): the TX40's log with a time column in ms and no unit (read as s: a
    5 Hz log whose speeds are 1000 times too small, so no sample passes min_speed) was refused
    with "log more samples"; the refusal names the time column in ms."""
    (tmp_path / "t.csv").write_text("t\n" + "\n".join(f"{0.2 * i:.1f}" for i in range(45000)))
    keep = ("lowpass_hz", "lowpass_order", "decimate_to_hz")  # 100 Hz is above a 5 Hz log's

    def edit(text: str) -> str:
        lines = [line for line in text.splitlines() if not line.startswith(keep)]
        return "\n".join(lines).replace("sample_period = 0.0002", 'file = "t.csv"\ncolumn = "t"')

    description = _tx40_copy(tmp_path, edit)
    argv = ["calibrate", "--model", "staubli_tx40", "--log", str(description), "--kind",
            "dynamic", "--out", str(tmp_path / "o"), "--quiet"]  # fmt: skip
    line = fails(capsys, argv)
    assert "look about 1000 times too long (a time column in ms read as s" in line, line


def test_a_sample_period_ten_times_too_long_is_named(tmp_path, tx40):
    """Item 22 (period): the TX40's sample_period written 10 times too long was diagnosed as
    "1.57 times too long" (the derivatives were filtered for the wrong rate, so the dynamic
    torques follow no single factor); the log re-differentiated at a tenth of the period
    names "10 times"."""
    from workbench.calibration import diagnose
    from workbench.recordings import read_log

    chain, drives, _ = tx40
    edit = lambda t: t.replace("sample_period = 0.0002", "sample_period = 0.002")  # noqa: E731
    log = read_log(_tx40_copy(tmp_path, edit), chain, require=("tau",))
    (found, *_) = diagnose(log, chain, None, drives)
    assert found.cause == "sample period", found.message
    assert "the sample times look 10 times too long" in found.evidence, found.message


def test_a_dithering_joint_of_a_bag_is_locked_at_its_median(tmp_path):
    """Item 22 (dither): a whole robot's bag whose head stands at (0.1, -0.3), dithering by one
    encoder count (0.0015 rad) above it in a third of the samples (its mean is off): the head
    is locked at the median (0.1, -0.3), not at 0 nor the mean, and the arm is calibrated.
    (calibrate's summary.json lists these values:
    ``test_the_summary_lists_the_locked_joints_and_their_values``.)"""
    from tests.test_whole_robot import ARMS
    from workbench.recordings.log_files import logged_joints
    from workbench.testing.bag_writer import write_joint_states

    arm = ARMS["tiago"]
    t = 100.0 + 0.01 * np.arange(300)
    moving = 0.3 * np.sin(np.outer(t, np.arange(1, len(arm) + 1)))
    head = np.tile([0.1, -0.3], (len(t), 1))
    head[::3] += 0.0015
    assert np.mean(head[:, 0]) > 0.1004
    still = ["head_1_joint", "head_2_joint"]
    bag = write_joint_states(tmp_path / "run.bag", "ros1", t, [*arm, *still],
                             position=np.column_stack([moving, head]))  # fmt: skip
    joints, locked, held = logged_joints(bag, wb.models.movable_joints("tiago"))
    assert joints == list(arm) and locked == {}
    assert held == {"head_1_joint": pytest.approx(0.1), "head_2_joint": pytest.approx(-0.3)}
    chain = wb.models.load("tiago", joints=joints, held=held, moving=True)
    assert dict(chain.reduction.locked)["head_1_joint"] == pytest.approx(0.1)


# ------------------------------------------------------------------ item 6: rpy in degrees
@pytest.mark.parametrize("kind", ["rpy", "rotation_vector"])
def test_rotations_in_degrees_read_as_radians_are_named(tmp_path, kind):
    """Item 6 (rest): rpy angles (or rotation vectors) in degrees under rotation_unit = "rad"
    calibrated silently (read as radians, the angles are lost modulo 2 pi); values beyond 2 pi,
    which no convention gives, are refused naming degrees. The same columns with
    rotation_unit = "deg" read as scipy's rotations."""
    from scipy.spatial.transform import Rotation

    from tests.test_recording import static_poses, write_table
    from workbench.recordings.log_files import read_log

    chain = wb.models.load("planar_2r")
    rotations = Rotation.random(30, random_state=3)
    degrees = np.degrees(rotations.as_euler("xyz") if kind == "rpy" else rotations.as_rotvec())
    write_table(tmp_path / "m.csv", ["qa", "qb", "r", "p", "y"],
                np.column_stack([static_poses(chain, 30, seed=4), degrees]))  # fmt: skip
    text = (
        '[positions]\nfile = "m.csv"\ncolumns = ["qa", "qb"]\n[[markers]]\n'
        f'rotation = ["r", "p", "y"]\nrotation_type = "{kind}"\nrotation_unit = "UNIT"\n'
    )
    (tmp_path / "rad.toml").write_text(text.replace("UNIT", "rad"))
    with pytest.raises(WorkbenchError, match=r"rotation_unit = \"rad\"\): beyond 2 pi, they look "
                       r"like degrees \(rotation_unit = \"deg\"\)"):  # fmt: skip
        read_log(tmp_path / "rad.toml", chain)
    (tmp_path / "deg.toml").write_text(text.replace("UNIT", "deg"))
    log = read_log(tmp_path / "deg.toml", chain)
    np.testing.assert_allclose(log.markers[0].rotation, rotations.as_matrix(), atol=1e-12)


# ------------------------------------------------------------------ item 14: a bag's clock
def test_the_clock_block_of_a_bag_counts_what_the_bag_holds(tmp_path):
    """Item 14 (counts): a bag's out-of-order count was 0 (counted after the reader sorted the
    messages by time) and pure jitter was reported as dropped samples (a late stamp then an
    early one is a step of about 2 periods). A 100 Hz bag with stamps jittering by up to 10 %
    of the period, three messages stamped 0.3 periods after their successor, and 5 samples
    left out: 3 out of order, 5 dropped; without the 5 left out, none dropped. (Jitter of
    30 % and more still counts some drops: steps of 1.5 periods are not told from drops.)"""
    from workbench.calibration.simulation.simulate import simulate_log
    from workbench.recordings.log_files import read_log
    from workbench.testing.bag_writer import write_joint_states

    chain = wb.models.load("planar_2r")
    log, _ = simulate_log(chain, kind="dynamic", samples=400)
    period = float(log.t[1] - log.t[0])
    jitter = np.random.default_rng(5).uniform(-0.1, 0.1, len(log)) * period
    stamps = 100.0 + log.t + jitter
    late = np.array([50, 150, 250])
    stamps[late] = stamps[late + 1] + 0.3 * period  # after its successor's stamp
    receive = 100.0 + log.t + 0.002  # the recorder's order: the publishing order
    for name, keep, out_of_order, dropped in (
        ("jitter", np.ones(len(log), bool), 3, 0),
        ("drops", ~np.isin(np.arange(len(log)), [100, 101, 200, 300, 301]), 3, 5),
    ):
        bag = write_joint_states(tmp_path / f"{name}.bag", "ros1", stamps[keep],
                                 chain.joint_names, log.q[keep], effort=log.tau[keep],
                                 receive_t=receive[keep])  # fmt: skip
        clock = read_log(bag, chain).clock
        assert clock["out_of_order_samples"] == out_of_order, (name, clock)
        assert clock["dropped_samples"] == dropped, (name, clock)


# ------------------------------------------------------------------ item 21: tiago's payload
def test_payload_excite_on_a_mobile_base_with_its_whole_arm_moving_finds_a_posture():
    """Item 21 (second part): ``payload excite --model tiago --link arm_7_link`` with all seven
    arm joints moving said "move more joints": TIAGo's default tool frame (a laser on the
    base, below its wheels' axes) was below the "nothing lower than the lowest joint at q = 0"
    floor in every candidate posture. The floor now includes the tool at q = 0: a posture is
    found, the robot holds it within its torque limits, and the payload's 10 parameters have
    full rank there."""
    from workbench.dynamics.inverse_dynamics import inverse_dynamics
    from workbench.excitation.payload import frame_on_link, hold_posture, information_rank
    from workbench.excitation.problem import read_problem

    chain = wb.models.load("tiago", moving=True)
    problem = read_problem(None, chain)
    limits = problem.limits.limits(chain, "defaults")
    arm = [f"arm_{i}_joint" for i in range(1, 8)]
    posture = hold_posture(chain, "arm_7_link", arm, limits, problem.noise(chain))
    rest = inverse_dynamics(chain, posture[None], np.zeros((1, chain.n)), np.zeros((1, chain.n)))
    assert np.all(np.abs(rest) <= limits.torque)
    moving = np.array([chain.joint_names.index(j) for j in arm])
    link = frame_on_link(chain, "arm_7_link")[0]
    assert information_rank(chain, link, moving, posture[None])[0] == 10


# ------------------------------------------------------------------ issue 36: term_benefits
@pytest.mark.filterwarnings("ignore:the calibrated model has")
def test_term_benefits_speak_of_the_final_model(monkeypatch):
    """Issue 36 (summary consistent with the final model): term_benefits said a further term
    was kept when the selection chose a model without it. A screening that passes every term
    (its test forced to say "better") on a log whose truth has none of them: the selection
    keeps a candidate without them, and each term is ``kept: false, passed_screening:
    true``."""
    from workbench.calibration.problems import dynamic_problem
    from workbench.calibration.selection.term_screening import benefit_rows, screen_terms
    from workbench.calibration.simulation.simulate import drive_truth, simulate_log

    def lenient(self, score, beats):
        terms = self.model.drives.terms
        always = lambda a, b: (True, *beats(a, b)[1:])  # noqa: E731
        self.candidates, self.term_benefits = screen_terms(terms, dynamic_problem.Terms, score,
                                                           always)  # fmt: skip

    monkeypatch.setattr(dynamic_problem.DynamicProblem, "screen", lenient)
    chain = wb.models.load("planar_2r")
    log, _ = simulate_log(chain, kind="dynamic", samples=600, perturb=0.01, noise=0.01,
                          drives=drive_truth(chain.n))  # fmt: skip
    log = replace(log, defaults=Defaults(("friction", "temperature", "sensor_delay"), 5))
    report = wb.calibration.calibrate(chain, "dynamic", log, Folds(5))
    assert not {"temperature", "sensor_delay"} & set(report.summary["terms"])
    benefits = report.summary["term_benefits"]["terms"]
    assert [b["term"] for b in benefits] == ["temperature", "sensor_delay"]
    assert all(b["passed_screening"] and not b["kept"] for b in benefits)
    assert all(b["term"] in report.summary["terms"] for b in benefits if b["kept"])
    rows = benefit_rows(report.summary["term_benefits"])
    assert all("not in the final model" in label for label, _ in rows)


# ------------------------------------------------------------------ trial: fixtures
MUKCA = Path(urdf_path("staubli_tx40")).parents[1] / "mukca"


def _socket_log(tmp_path: Path, rows, extra: str = "") -> Path:
    """The MUKCa kuka_14 'front' log (ball in socket 0, then socket 1) with the data rows
    ``rows(lines)`` and ``extra`` appended to its description."""
    lines = (MUKCA / "kuka_14" / "front.csv").read_text().splitlines()
    (tmp_path / "front.csv").write_text("\n".join([lines[0], *rows(lines[1:])]) + "\n")
    text = (MUKCA / "kuka_14" / "front.toml").read_text() + extra
    (tmp_path / "front.toml").write_text(text)
    return tmp_path / "front.toml"


def test_a_lost_socket_is_refused_not_a_traceback(capsys, tmp_path):
    """Trial: socket 1 with one sample left (the others lost), held out by the last 20 %:
    the fold's fit had no sample of it and ended in a LinAlgError traceback; refused naming
    the fixture."""

    def lost(rows: list[str]) -> list[str]:
        return [r for r in rows if r.startswith("0,")] + [
            next(r for r in rows if r.startswith("1,"))
        ]

    log = _socket_log(tmp_path, lost)
    argv = ["calibrate", "--model", str(MUKCA / "urdf" / "iiwa14.urdf"), "--log", str(log),
            "--kind", "kinematic", "--out", str(tmp_path / "o"), "--quiet"]  # fmt: skip
    line = fails(capsys, argv)
    assert "fixture 'socket_1' has 0 of its 1 samples among the training samples" in line, line


def test_two_distances_between_one_pair_are_refused(tmp_path):
    """Trial: a second [[distances]] between the same sockets (0.08 m after 0.05 m, in the
    other order) calibrated to a compromise with exit 0; refused naming the pair."""
    from workbench.recordings.log_files import read_log

    extra = '[[distances]]\nbetween = ["socket_1", "socket_0"]\nvalue = 0.08\n'
    log = _socket_log(tmp_path, lambda rows: rows, extra)
    with pytest.raises(WorkbenchError, match="a second distance between 'socket_1' and"):
        read_log(log, wb.models.load(str(MUKCA / "urdf" / "iiwa14.urdf")))


# ------------------------------------------------------------------ trial: parallel-robot folders
def test_a_parallel_robot_folder_missing_a_mesh_says_so(capsys, tmp_path):
    """Trial: the five-bar folder (its upstream form, with its STL files) with the rod mesh
    deleted exported with exit 0 and 2 meshes instead of 5, without a word; the export still
    runs (meshes are visual) and warns naming the file and the links."""
    from tests.test_robot_folder import FOLDERS

    folder = tmp_path / "5bar"
    shutil.copytree(FOLDERS / "5bar_linkage", folder)
    names = set(re.findall(r'filename="package:///([^"]+)"', (folder / "robot.urdf").read_text()))
    for name in names - {"rod.stl"}:  # the meshes of the upstream folder but the rod's
        (folder / name).write_text("solid empty\nendsolid empty\n")
    assert main(["export", str(folder), "--mjcf", str(tmp_path / "five.xml")]) == 0
    captured = capsys.readouterr()
    assert "3 visual mesh file(s) not found, left out: package:///rod.stl (link 'rod')" in (
        captured.err
    ), captured.err
    assert "2 meshes" in captured.out
