"""Issue 28, hardening round three: URDF checks, inputs never outputs, interrupts, one-line errors,
file references, bounded resources and only true claims.

Command lines run as subprocesses (exit code, one stderr line, no traceback,
inputs unchanged) where the operating system is part of the story and for the
URDF checks, where a crash of the C++ parser would otherwise take the test
process with it; the rest run in process through :func:`workbench.cli.main`.

The issue's reproductions, by number, and where each is tested (here unless named):

1. mis-described logs: ``test_a_mis_described_log_is_one_error_line`` (every one through
   the command line); their diagnoses in ``test_fit_plausibility.py``.
2. URDF values: ``test_non_finite_or_malformed_numbers_name_element_attribute_and_line``,
   ``test_axes_limits_and_the_tree``, ``test_ten_thousand_joints_are_refused_quickly``.
3. sizes: ``test_reach_knots_beyond_memory_are_refused_before_allocation``,
   ``test_excitation_sizes_beyond_memory_are_refused``, the posture candidates' tests,
   ``test_sweep_grids_beyond_the_task_limit_are_refused``,
   ``test_a_thousand_joints_load_in_well_under_a_gigabyte``; the ``.csv.gz`` in
   ``test_logs.py::test_a_log_too_long_for_memory_is_refused_before_it_is_read``.
4. inputs: section B.
5. interrupts: section C (and ``test_reach_cli.py::test_ctrl_c_during_ipopt_is_an_interrupt``).
6. file references: section E.
7. tracebacks: section D.
8. claims: ``test_a_task_that_ran_over_its_time_is_a_timeout_row_even_when_it_finished``,
   ``test_calibration_run.py::test_validation_log_equal_to_the_log_is_refused``,
   ``test_an_option_of_another_kind_is_one_line``,
   ``test_excite_refuses_a_problem_file_of_the_other_kind``,
   ``test_twist_design_at_its_iteration_limit_is_a_warning_and_exit_1``,
   ``test_excite_says_its_numbers_and_warns_at_the_iteration_limit``.
9. newcomers: ``test_the_first_line_of_a_first_run_says_it_compiles``,
   ``test_a_goal_equal_to_the_start_is_no_percentage_of_no_travel``,
   ``test_reach_cli.py::test_unreachable_target_is_infeasible_and_writes_nothing``,
   ``test_chain.py::test_continuous_joints_load_and_other_types_are_named``,
   ``test_a_fifo_is_not_a_regular_file``, ``test_a_directory_as_urdf``,
   ``test_urdfdom_output_is_captured_and_reported``, ``test_report_pages.py`` (excite's
   report.html), the ``ur10`` tests.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from tests.conftest import problem_copy
from workbench.cli import main
from workbench.config import read_toml
from workbench.models.urdf import load_urdf, with_mesh_inertias, write_urdf
from workbench.models.urdf_check import MAX_JOINTS, check_urdf

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*argv: str, timeout: float = 120, cwd: Path | None = None):
    """``workbench ARGV`` in a subprocess of this checkout; the completed process."""
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "workbench.cli", *argv],
        capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd,
    )  # fmt: skip


def one_line(done: subprocess.CompletedProcess, code: int = 2) -> str:
    """The single stderr line of a run that ended with ``code``, without a traceback."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, (done.returncode, done.stderr[-2000:])
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    return lines[0]


def fails(capsys, argv: list[str], code: int = 2) -> str:
    """Run the command line in process; check the exit code and one stderr line; return it."""
    assert main(argv) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    return err[0]


def chain_urdf(n: int, joint: str = "", link: str = "") -> str:
    """A serial chain of ``n`` revolute joints j1..jn between links l0..ln, one per line pair.

    ``joint`` and ``link`` are extra XML put into joint j1 and link l1.
    """
    lines = ['<?xml version="1.0"?>', '<robot name="long">', '<link name="l0"/>']
    for i in range(1, n + 1):
        lines.append(
            f'<link name="l{i}"><inertial><origin xyz="0 0 0.05" rpy="0 0 0"/><mass value="1"/>'
            '<inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial>'
            f"{link if i == 1 else ''}</link>"
        )
        lines.append(
            f'<joint name="j{i}" type="revolute"><parent link="l{i - 1}"/><child link="l{i}"/>'
            '<origin xyz="0 0 0.1" rpy="0 0 0"/><axis xyz="0 0 1"/>'
            '<limit lower="-1" upper="1" effort="10" velocity="2"/>'
            f"{joint if i == 1 else ''}</joint>"
        )
    return "\n".join([*lines, "</robot>\n"])


# ------------------------------------------------------------ A. URDF checks
LINK_LINE, JOINT_LINE = 4, 5  # where chain_urdf puts link l1 and joint j1


@pytest.mark.parametrize(
    ("old", "new", "who", "attribute", "line"),
    [
        ('<mass value="1"/>', '<mass value="nan"/>', "link 'l1'", "<mass> value", LINK_LINE),
        ('<mass value="1"/>', '<mass value="heavy"/>', "link 'l1'", "<mass> value", LINK_LINE),
        ('<mass value="1"/>', '<mass value="inf"/>', "link 'l1'", "<mass> value", LINK_LINE),
        ('ixx="0.01"', 'ixx="1e999"', "link 'l1'", "<inertia> ixx", LINK_LINE),
        ('<origin xyz="0 0 0.05"', '<origin xyz="0 inf 0.05"', "link 'l1'", "<origin> xyz",
         LINK_LINE),
        ('<origin xyz="0 0 0.1" rpy="0 0 0"/>', '<origin xyz="0 0 0.1" rpy="0 0"/>', "joint 'j1'",
         "<origin> rpy", JOINT_LINE),
        ('<axis xyz="0 0 1"/>', '<axis xyz="0 0 -inf"/>', "joint 'j1'", "<axis> xyz",
         JOINT_LINE),
        ('lower="-1"', 'lower="-1e400"', "joint 'j1'", "<limit> lower", JOINT_LINE),
        ('effort="10"', 'effort="ten"', "joint 'j1'", "<limit> effort", JOINT_LINE),
        ('velocity="2"', 'velocity="NaN"', "joint 'j1'", "<limit> velocity", JOINT_LINE),
        ('<axis xyz="0 0 1"/>', '<axis xyz="0 0 1"/><dynamics damping="0.1" friction="-nan"/>',
         "joint 'j1'", "<dynamics> friction", JOINT_LINE),
        ('<axis xyz="0 0 1"/>', '<axis xyz="0 0 1"/><mimic joint="j2" multiplier="inf"/>',
         "joint 'j1'", "<mimic> multiplier", JOINT_LINE),
    ],
)  # fmt: skip
def test_non_finite_or_malformed_numbers_name_element_attribute_and_line(
    tmp_path, old, new, who, attribute, line
):
    text = chain_urdf(3)
    first = text.index(old, text.index("l1" if who.startswith("link") else "j1"))
    bad = tmp_path / "bad.urdf"
    bad.write_text(text[:first] + new + text[first + len(old) :])
    before = bad.read_bytes()
    message = one_line(run_cli("info", str(bad)))
    assert f"bad.urdf: line {line}: {who}: {attribute} = " in message, message
    assert bad.read_bytes() == before


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (('<axis xyz="0 0 1"/>', '<axis xyz="0 0 0"/>'), "line 5: joint 'j1': <axis> xyz has "
         "zero length"),
        (('lower="-1" upper="1"', 'lower="1" upper="-1"'), "line 5: joint 'j1': <limit> lower = "
         "1 is above upper = -1"),
        (('<parent link="l1"/><child link="l2"/>', '<parent link="l2"/><child link="l2"/>'),
         "line 7: joint 'j2' has link 'l2' as both its parent and its child"),
        (('<parent link="l0"/><child link="l1"/>', '<parent link="l3"/><child link="l1"/>'),
         "joint 'j1' has as its child link 'l1', an ancestor of its parent link 'l3'"),
        (('<parent link="l1"/><child link="l2"/>', '<parent link="l1"/><child link="l3"/>'),
         "link 'l3' is the child of joint 'j3' and of joint 'j2' (line 7)"),
        (('<child link="l3"/>', '<child link="l9"/>'), "joint 'j3': child link 'l9' is not "
         "defined"),
        (('type="revolute"', 'type="ball"'), "joint 'j1': type 'ball' is not one of"),
    ],
)  # fmt: skip
def test_axes_limits_and_the_tree(tmp_path, edit, message):
    bad = tmp_path / "bad.urdf"
    bad.write_text(chain_urdf(3).replace(*edit, 1))
    assert message in one_line(run_cli("info", str(bad)))


def test_a_second_root_is_named(tmp_path):
    bad = tmp_path / "bad.urdf"
    bad.write_text(chain_urdf(2).replace("</robot>", '<link name="stray"/></robot>'))
    with pytest.raises(wb.WorkbenchError, match=r"2 root links 'l0' \(line 3\), 'stray'"):
        check_urdf(bad)


@pytest.mark.parametrize(
    "doctype",
    [
        '<!DOCTYPE robot [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>',
        '<!DOCTYPE robot [<!ENTITY secret SYSTEM "/etc/passwd">]>',
    ],
)
def test_entities_are_refused(tmp_path, doctype):
    bad = tmp_path / "bad.urdf"
    bad.write_text(f'<?xml version="1.0"?>{doctype}<robot name="&b;"><link name="l"/></robot>')
    with pytest.raises(wb.WorkbenchError, match=r"entity declaration .* is refused"):
        check_urdf(bad)


def test_ten_thousand_joints_are_refused_quickly(tmp_path):
    big = tmp_path / "big.urdf"
    big.write_text(chain_urdf(10_000))
    message = one_line(run_cli("info", str(big)))
    assert f"10000 joints; at most {MAX_JOINTS} are loaded" in message


def test_urdfdom_output_is_captured_and_reported(tmp_path, capfd):
    """urdfdom prints its complaints on the C-level stderr; they end up in the error only."""
    bad = tmp_path / "bad.urdf"
    text = chain_urdf(2)
    start = text.index("<limit ")
    bad.write_text(text[:start] + text[text.index("/>", start) + 2 :])  # j1 has no <limit>
    printed = r"cannot load URDF .*the parser printed: .*\[j1\] .* does not specify limits"
    with pytest.raises(wb.WorkbenchError, match=printed):
        load_urdf(bad)
    captured = capfd.readouterr()
    assert "limits" not in captured.err + captured.out


# ------------------------------------------------------- B. inputs are never outputs
@pytest.fixture
def result_folder(tmp_path) -> Path:
    folder = tmp_path / "r"
    folder.mkdir()
    np.savez(folder / "trajectory.npz", t=np.arange(3.0), q=np.zeros((3, 2)))
    return folder


@pytest.mark.parametrize("given", ["r/trajectory.npz", "r"])
def test_view_html_onto_its_trajectory_is_refused(capsys, result_folder, given):
    before = (result_folder / "trajectory.npz").read_bytes()
    argv = ["view", str(result_folder.parent / given), "--model", "planar_2r"]
    line = fails(capsys, [*argv, "--html", str(result_folder / "trajectory.npz")])
    assert "--html" in line and "the input" in line and "inputs are never overwritten" in line
    assert (result_folder / "trajectory.npz").read_bytes() == before


def test_results_folder_that_holds_the_problem_file_is_refused(capsys, tmp_path):
    problem = tmp_path / "problem.toml"
    problem.write_text((ROOT / "problems" / "fivebar_reach.toml").read_text())
    line = fails(capsys, ["reach", str(problem), "--out", str(tmp_path), "--quiet"])
    assert f"--out {tmp_path} holds the input {problem}" in line
    argv = ["excite", "--model", "planar_2r", "--kind", "dynamic", "--out", str(tmp_path)]
    line = fails(capsys, [*argv, str(problem)])
    assert f"--out {tmp_path} holds the input {problem}" in line


def test_simulate_log_keeps_an_existing_recording_unless_forced(capsys, tmp_path):
    log = tmp_path / "log.csv"
    log.write_text("t,q_joint_1,q_joint_2\n0,0,0\n")
    argv = ["simulate-log", "planar_2r", "--out", str(log), "--samples", "20"]
    assert "give --force to overwrite a recording" in fails(capsys, argv)
    assert log.read_text() == "t,q_joint_1,q_joint_2\n0,0,0\n"
    assert main([*argv, "--force"]) == 0
    assert log.read_text().startswith("t,q_joint_1,q_joint_2,")


def test_simulate_log_never_writes_its_truth_over_the_model(capsys, tmp_path):
    model = write_urdf(wb.models.load("planar_2r"), tmp_path / "log.truth.urdf")
    before = model.read_bytes()
    argv = ["simulate-log", str(model), "--out", str(tmp_path / "log.csv"), "--force"]
    assert "the truth file" in fails(capsys, argv) and model.read_bytes() == before


def test_mesh_inertias_never_overwrite_their_urdf(tmp_path):
    urdf = write_urdf(wb.models.load("planar_2r"), tmp_path / "robot.urdf")
    before = urdf.read_bytes()
    with pytest.raises(wb.WorkbenchError, match=r"is the input .*robot\.urdf"):
        with_mesh_inertias(urdf, tmp_path / "." / "robot.urdf", density=1000.0)
    assert urdf.read_bytes() == before


def test_simulate_log_negative_seed(capsys, tmp_path):
    argv = ["simulate-log", "planar_2r", "--out", str(tmp_path / "log.csv"), "--seed", "-1"]
    assert "--seed -1: must be 0 or more" in fails(capsys, argv)


# ------------------------------------------------------------------- C. interrupts
def _signalled(argv: list[str], ready: str, signal_name: str, delay: float) -> tuple[int, str]:
    """Start ``workbench ARGV``, wait (bounded) for a stdout line starting with ``ready``, send
    the signal after ``delay`` s; the exit code and stderr. The process never outlives the test."""
    import selectors
    import signal
    import time

    env = os.environ | {"PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "workbench.cli", *argv], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        selector = selectors.DefaultSelector()
        selector.register(proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + 180
        line = ""
        while not line.startswith(ready):
            assert selector.select(timeout=deadline - time.monotonic()), "no sign of the start"
            line = proc.stdout.readline()
            assert line, f"ended before '{ready}': {proc.stderr.read()[-2000:]}"
        time.sleep(delay)
        proc.send_signal(getattr(signal, signal_name))
        _, err = proc.communicate(timeout=120)
        return proc.returncode, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


SIGNAL_ENDS = [("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "terminated")]


@pytest.mark.parametrize(("signal_name", "code", "word"), SIGNAL_ENDS)
@pytest.mark.parametrize("delay", [0.0, 0.3])
def test_reach_ends_with_the_signal_code(tmp_path, signal_name, code, word, delay):
    """Inside a callback or in IPOPT's own check, IPOPT reports the interrupt as an exception it
    caught ("NonIpopt_Exception_Thrown"); the command ends as interrupted, not "failed"."""
    out = tmp_path / "out"
    returncode, err = _signalled(["reach", "--out", str(out)], "iter", signal_name, delay)
    assert returncode == code, err[-2000:]
    lines = [line for line in err.splitlines() if not line.startswith("workbench: compiling")]
    assert lines == [f"workbench reach: {word}"], err[-2000:]  # CasADi's own warning dropped
    assert not out.exists() and not list(tmp_path.glob(".*.staging"))


@pytest.mark.parametrize(("signal_name", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_live_view_ends_with_the_signal_code(tmp_path, signal_name, code):
    np.savez(tmp_path / "traj.npz", t=np.arange(3.0), q=np.zeros((3, 2)))
    argv = ["view", str(tmp_path / "traj.npz"), "--model", "planar_2r"]
    returncode, err = _signalled(argv, "meshcat viewer at", signal_name, 0.0)
    assert returncode == code and len(err.strip().splitlines()) == 1, err


# ------------------------------------------------- D. one line instead of a traceback
def first_line(argv: list[str], env: dict[str, str], timeout: float = 120) -> tuple[str, str]:
    """The stream ("stdout" or "stderr") and text of the first line ``workbench ARGV`` prints;
    the process is killed once it has."""
    import selectors

    env = os.environ | {"PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"} | env
    process = subprocess.Popen(
        [sys.executable, "-m", "workbench.cli", *argv], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ, "stdout")
            selector.register(process.stderr, selectors.EVENT_READ, "stderr")
            ready = selector.select(timeout)
            assert ready, f"no output in {timeout} s"
            key = ready[0][0]
            return key.data, key.fileobj.readline().rstrip("\n")
    finally:
        process.kill()
        process.communicate()


@pytest.mark.parametrize(
    "argv",
    [
        ["reach", "--out", "{tmp}/reach"],
        ["calibrate", "--model", "ur10e", "--log", str(ROOT / "models/ur10/calibration.toml"),
         "--kind", "kinematic", "--out", "{tmp}/calibration"],
    ],
)  # fmt: skip
def test_the_first_line_of_a_first_run_says_it_compiles(tmp_path, argv):
    from workbench.runtime import COMPILE_MESSAGE

    argv = [a.format(tmp=tmp_path) for a in argv]
    cache = tmp_path / "numba-cache"  # empty: a first run after installing
    stream, line = first_line(argv, {"NUMBA_CACHE_DIR": str(cache)})
    assert (stream, line) == ("stderr", COMPILE_MESSAGE)


def test_excite_says_what_it_designs_before_it_starts(capsys, tmp_path):
    problem = tmp_path / "postures.toml"
    problem.write_text("[postures]\ncount = 6\ncandidates = 60\n[output]\nanimation = false\n")
    argv = ["excite", "--model", "planar_2r", "--kind", "kinematic", str(problem)]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "workbench excite: choosing 6 postures of planar_2r from 60 random candidates..."
    ]
    assert main([*argv, "--out", str(tmp_path / "b"), "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_the_kernel_modules_are_every_module_with_kernels():
    import re

    from workbench.runtime import KERNEL_MODULES

    package = ROOT / "workbench"
    pattern = re.compile(r"^from workbench\.runtime import .*\b(jit|leaf)\b", re.M)
    found = {
        path.relative_to(package).as_posix()
        for path in package.rglob("*.py")
        if pattern.search(path.read_text(encoding="utf-8"))
    }
    assert found == set(KERNEL_MODULES)


@pytest.mark.slow  # compiles the mesh kernels: 12 s
def test_a_cache_with_any_kernel_is_not_a_first_run(tmp_path):
    """After one kernel module only has compiled (the mesh's, as `workbench.models.mesh` alone
    would), no command says "first run" any more: later compilations say it when they start."""
    env = os.environ | {"PYTHONPATH": str(ROOT), "NUMBA_CACHE_DIR": str(tmp_path)}
    ask = [sys.executable, "-c", "from workbench import runtime; print(runtime.cache_is_empty())"]
    assert subprocess.run(ask, env=env, capture_output=True, text=True).stdout == "True\n"
    cube = (
        "import numpy as np, trimesh; from workbench.models.mesh import mass_properties; "
        "m = trimesh.creation.box(); mass_properties(m.vertices, m.faces, 1000.0)"
    )
    subprocess.run([sys.executable, "-c", cube], env=env, check=True, capture_output=True)
    assert subprocess.run(ask, env=env, capture_output=True, text=True).stdout == "False\n"


@pytest.fixture(scope="module")
def p2r_log(tmp_path_factory) -> Path:
    """A simulated planar_2r dynamic log (500 samples, 0.01 N m noise)."""
    log = tmp_path_factory.mktemp("p2r") / "p2r.csv"
    argv = ["simulate-log", "planar_2r", "--kind", "dynamic", "--out", str(log)]
    assert main([*argv, "--samples", "500", "--noise", "0.01"]) == 0
    return log


Q_COLUMNS = 'file = "p2r.csv"\ncolumns = ["q_joint_1", "q_joint_2"]\nunit = "rad"\n'
TAU_COLUMNS = 'file = "p2r.csv"\ncolumns = ["tau_joint_1", "tau_joint_2"]\n'
MOTOR_SIDE = 'side = "motor"\n'


@pytest.mark.parametrize(
    ("sections", "code", "message"),
    [
        ({"positions": Q_COLUMNS.replace('"rad"', '"deg"')}, 1, "likely cause: angle unit"),
        ({"time": "sample_period = 0.1\n"}, 1, "likely cause: sample period"),
        ({"positions": Q_COLUMNS.replace('"q_joint_2"', '"q_joint_1"')}, 2,
         "joints 'joint_1' and 'joint_2' are the same column"),
        ({"transmission": "ratios = [-1, 1]\n", "positions": Q_COLUMNS + MOTOR_SIDE,
          "torques": TAU_COLUMNS + MOTOR_SIDE}, 1, "likely cause: transmission sign"),
        ({"torques": TAU_COLUMNS + "scale = -1\n"}, 1, "likely cause: torque sign"),
        ({"torques": TAU_COLUMNS.replace("p2r.csv", "negated.csv")}, 1,
         "likely cause: torque sign"),
        ({"model.payload": "mass = 1.0\ninertia = [0.01, 0.01, 0.03, 0.0, 0.0, 0.0]\n"}, 2,
         "triangle inequality"),
    ],
    ids=["degrees", "period", "duplicated", "ratios", "scale", "negated", "payload"],
)  # fmt: skip
def test_a_mis_described_log_is_one_error_line(capsys, tmp_path, p2r_log, sections, code, message):
    """Issue 28, reproduction 1 through the command line: exit 1 naming the likely cause (the
    results are written for inspection) or exit 2 at read time, one error line, no traceback,
    the recording and its description unchanged."""
    text = p2r_log.read_text()
    (tmp_path / "p2r.csv").write_text(text)
    rows = [line.split(",") for line in text.splitlines()]
    taus = [k for k, name in enumerate(rows[0]) if name.startswith("tau_")]
    for row in rows[1:]:
        for k in taus:
            row[k] = repr(-float(row[k]))
    (tmp_path / "negated.csv").write_text("".join(",".join(row) + "\n" for row in rows))
    described = {"time": "sample_period = 0.01\n", "positions": Q_COLUMNS, "torques": TAU_COLUMNS}
    described |= sections
    description = tmp_path / "log.toml"
    description.write_text("".join(f"[{key}]\n{value}\n" for key, value in described.items()))
    inputs = {path: path.read_bytes() for path in tmp_path.iterdir()}
    argv = ["calibrate", "--model", "planar_2r", "--log", str(description), "--kind", "dynamic"]
    assert main([*argv, "--out", str(tmp_path / "out"), "--quiet"]) == code
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if ": error: " in line]
    assert len(errors) == 1 and message in errors[0] and "Traceback" not in err, err
    assert {path: path.read_bytes() for path in inputs} == inputs
    assert (tmp_path / "out" / "summary.json").is_file() == (code == 1)


def test_one_corrupted_torque_is_named(capsys, tmp_path, p2r_log):
    rows = [line.split(",") for line in p2r_log.read_text().splitlines()]
    rows[11][rows[0].index("tau_joint_2")] = "1e300"  # sample 10
    log = tmp_path / "big.csv"
    log.write_text("".join(",".join(row) + "\n" for row in rows))
    argv = ["calibrate", "--model", "planar_2r", "--log", str(log), "--kind", "dynamic"]
    line = fails(capsys, [*argv, "--out", str(tmp_path / "out"), "--quiet"])
    assert "('tau_joint_2'): 1e+300 N m at sample 10 (t = 0.1 s)" in line, line
    assert not (tmp_path / "out").exists()


def test_deeply_nested_toml_is_an_error_naming_the_file(tmp_path):
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(wb.WorkbenchError, match=r"deep\.toml: arrays or inline tables nested"):
        read_toml(deep, "problem file")


@pytest.mark.parametrize("block", [0, 1, 2])
def test_with_eta_refuses_complex_and_non_finite_twists(block):
    chain = wb.models.load("planar_2r")
    eta = np.zeros(6 * (chain.n + 1), dtype=complex)
    eta[6 * block + 3] = 1j
    with pytest.raises(wb.WorkbenchError, match="eta is complex"):
        chain.with_eta(eta)
    eta = np.zeros(6 * (chain.n + 1))
    eta[6 * block : 6 * block + 6] = 1e300  # finite, but exp() of it is not
    name = "the tool frame" if block == chain.n else f"joint '{chain.joint_names[block]}'"
    with pytest.raises(wb.WorkbenchError, match=f"moves {name} to non-finite values"):
        chain.with_eta(eta)
    assert np.isfinite(chain.with_eta(1e-3 * np.ones(6 * (chain.n + 1))).twists).all()


def test_npy_renamed_npz_is_one_line(capsys, tmp_path):
    np.save(tmp_path / "x.npy", np.zeros((5, 3)))
    (tmp_path / "x.npy").rename(tmp_path / "x.npz")
    argv = ["calibrate", "--model", "planar_2r", "--log", str(tmp_path / "x.npz")]
    assert "not an NPZ archive" in fails(capsys, [*argv, "--kind", "dynamic", "--quiet",
                                                  "--out", str(tmp_path / "out")])  # fmt: skip


def test_load_none_is_a_workbench_error():
    with pytest.raises(wb.WorkbenchError, match="model must be a model name or a URDF path"):
        wb.models.load(None)


# ------------------------------------------------------------------ E. file references
SECRET = "root:$6$" + "SECRETHASH" * 8 + ":19000:0:99999:7:::"


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "pipe.urdf"
    os.mkfifo(path)  # opening it for reading would block: it must never be opened
    return path


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        (["info", "{fifo}"], "URDF file"),
        (["reach", "{fifo}"], "problem file"),
        (["sweep", "{fifo}"], "sweep file"),
        (["view", "{fifo}"], "trajectory file"),
    ],
)
def test_a_fifo_is_not_a_regular_file(capsys, fifo, argv, what):
    line = fails(capsys, [a.format(fifo=fifo) for a in argv])
    assert f"{what} {fifo} is a FIFO, not a regular file" in line


def test_a_directory_as_urdf(capsys, tmp_path):
    (tmp_path / "robot.urdf").mkdir()
    line = fails(capsys, ["info", str(tmp_path / "robot.urdf")])
    assert "robot.urdf is a directory, not a regular file" in line


def test_a_log_header_is_quoted_short_and_escaped(capsys, tmp_path):
    log = tmp_path / "log.csv"
    log.write_text(f"{SECRET}\x1b[2J,x\n1,2\n2,3\n3,4\n")
    argv = ["calibrate", "--model", "planar_2r", "--log", str(log), "--kind", "dynamic"]
    line = fails(capsys, [*argv, "--out", str(tmp_path / "out"), "--quiet"])
    assert f"column 1 ({SECRET[:40]!r}...): unknown column" in line
    assert "SECRETHASH" * 4 not in line and "\x1b" not in line


def test_a_wrong_file_in_a_log_description_is_not_echoed(capsys, tmp_path):
    second = "daemon:" + "SECONDHASH" * 6
    (tmp_path / "shadow").write_text(f"{SECRET}\n{second}\n")
    (tmp_path / "log.toml").write_text('[positions]\nfile = "shadow"\n')
    argv = ["calibrate", "--model", "planar_2r", "--log", str(tmp_path / "log.toml")]
    line = fails(capsys, [*argv, "--kind", "dynamic", "--out", str(tmp_path / "o"), "--quiet"])
    assert "SECRETHASH" * 4 not in line and "SECONDHASH" * 4 not in line
    assert f"{SECRET[:40]!r}..." in line  # a short, escaped excerpt says which file it was


# -------------------------------------------------------------- F. bounded resources
def test_reach_knots_beyond_memory_are_refused_before_allocation(capsys, tmp_path):
    problem = problem_copy(tmp_path, "fivebar_reach.toml", knots="1000000000")
    line = fails(capsys, ["reach", str(problem), "--out", str(tmp_path / "out"), "--quiet"])
    assert "[transcription] knots = 1000000000 needs about" in line and "GiB of memory" in line
    assert "KiB per knot for 5 tree joints" in line and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"collocation": "100000000"}, "[trajectory] collocation = 100000000 needs about"),
        ({"sample_rate": "1e9"}, "period * periods * sample_rate = 10 s * 1 * 1e+09 Hz needs"),
        ({"periods": "1000000000"}, "10 s * 1000000000 * 100 Hz needs about"),
    ],
)
def test_excitation_sizes_beyond_memory_are_refused(capsys, tmp_path, changes, message):
    problem = problem_copy(tmp_path, "excite_dynamic.toml", **changes)
    argv = ["excite", "--model", "planar_2r", "--kind", "dynamic", "--out", str(tmp_path / "o")]
    line = fails(capsys, [*argv, str(problem)])
    assert message in line and "GiB of memory" in line, line


def test_posture_candidates_beyond_memory_are_refused(capsys, tmp_path):
    problem = tmp_path / "postures.toml"
    text = '[postures]\ncandidates = 100000000\nmeasure = "pose"\ndevice_known = false\n'
    problem.write_text(text)
    argv = ["excite", "--model", "iiwa", "--kind", "kinematic", "--out", str(tmp_path / "o")]
    line = fails(capsys, [*argv, str(problem)])
    assert f"{problem}: [postures] candidates = 100000000 needs about" in line, line
    assert "GiB of memory" in line and "KiB per candidate for 7 joints, pose measured" in line
    assert not (tmp_path / "o").exists() and problem.read_text() == text


def test_a_candidate_file_beyond_memory_is_refused_naming_it(capsys, tmp_path, monkeypatch):
    import workbench.config

    monkeypatch.setattr(workbench.config, "MEMORY_BUDGET", 3 * 2**20)  # 3 MiB: the defaults fit
    rows = np.random.default_rng(0).uniform(-1, 1, size=(2000, 2))
    postures = tmp_path / "candidates.csv"
    postures.write_text("q_joint_1,q_joint_2\n" + "".join(f"{a},{b}\n" for a, b in rows))
    problem = tmp_path / "postures.toml"
    problem.write_text('[postures]\ncount = 6\ncandidates = "candidates.csv"\n')
    argv = ["excite", "--model", "planar_2r", "--kind", "kinematic", "--out", str(tmp_path / "o")]
    line = fails(capsys, [*argv, "--quiet", str(problem)])
    assert f"{postures}: 2000 candidate postures needs about" in line, line
    assert not (tmp_path / "o").exists()


def test_too_few_postures_for_the_directions_are_refused(capsys, tmp_path):
    problem = tmp_path / "postures.toml"
    problem.write_text("[postures]\ncount = 4\ncandidates = 60\n")  # 12 rows, rank 10 of 11
    argv = ["excite", "--model", "planar_2r", "--kind", "kinematic", "--out", str(tmp_path / "o")]
    line = fails(capsys, [*argv, "--quiet", str(problem)])
    assert "[postures] count = 4: the best 4 postures of the candidates determine only" in line
    assert "of the 11 identifiable directions; select more postures" in line
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        ("azimuth_deg = {from = -90.0, to = 90.0, count = 1000000000}",
         "[goal.azimuth_deg] count = 1000000000: more values than a sweep may have tasks"),
        ("azimuth_deg = {from = -90.0, to = 90.0, count = 1000}\n"
         "elevation_deg = {from = 20.0, to = 80.0, count = 1000}",
         "1000000 tasks (azimuth_deg x elevation_deg = 1000 x 1000) would take about 278 hours"),
    ],
)  # fmt: skip
def test_sweep_grids_beyond_the_task_limit_are_refused(capsys, tmp_path, grid, message):
    (tmp_path / "fivebar_reach.toml").write_text(
        (ROOT / "problems" / "fivebar_reach.toml").read_text()
    )
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(f'[sweep]\nproblem = "fivebar_reach.toml"\n[goal]\n{grid}\n')
    line = fails(capsys, ["sweep", str(sweep), "--out", str(tmp_path / "out"), "--quiet"])
    assert message in line, line


def test_neutral_placements_equal_pinocchio_kinematics():
    import pinocchio as pin

    from workbench.models.placements import neutral_placements

    model = wb.models.load_pinocchio("talos_upper_body")
    joints, frames = neutral_placements(model)
    data = model.createData()
    pin.framesForwardKinematics(model, data, pin.neutral(model))
    np.testing.assert_allclose(joints, [m.homogeneous for m in data.oMi], atol=1e-12)
    np.testing.assert_allclose(frames, [m.homogeneous for m in data.oMf], atol=1e-12)


MEMORY_PROBE = """
import contextlib, io, resource, sys
limit = 4 * 2**30  # address space: a regression fails here instead of taking the machine's memory
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from workbench.cli import main
with contextlib.redirect_stdout(io.StringIO()):
    main(["info", sys.argv[1]])  # every import and kernel the command needs, on 10 joints
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
code = main(["info", sys.argv[2]])
print("growth_kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before, file=sys.stderr)
sys.exit(code)
"""


def test_a_thousand_joints_load_in_well_under_a_gigabyte(tmp_path):
    """What 1,000 joints add to the memory of `workbench info` over 10 joints (24 GB before:
    pinocchio.Data's nv^3 tensors; imports and compilation, shared by both, not counted)."""
    small, urdf = tmp_path / "short.urdf", tmp_path / "long.urdf"
    small.write_text(chain_urdf(10))
    urdf.write_text(chain_urdf(1000))
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", MEMORY_PROBE, str(small), str(urdf)], env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "long: 1000 joints" in done.stdout
    growth = int(done.stderr.split("growth_kib")[-1])
    assert growth < 256 * 1024, f"{growth / 1024:.0f} MiB"


# ------------------------------------------------------------- G. only true claims
def test_a_task_that_ran_over_its_time_is_a_timeout_row_even_when_it_finished(tmp_path):
    """Tasks that end between two checks for overdue ones keep the sweep file's promise."""
    from workbench.sweep import Sweep
    from workbench.sweep.runner import _retry_worthy, _Run

    reach = ROOT / "problems" / "fivebar_reach.toml"
    text = f'[sweep]\nproblem = "{reach}"\ntask_timeout_s = 0.5\n[goal]\nlist = [[0, 0, 1]]\n'
    (tmp_path / "sweep.toml").write_text(text)
    sweep = Sweep.from_toml(tmp_path / "sweep.toml")
    run = _Run(sweep, tmp_path / "out", "rescue", None)
    task = sweep.tasks[0]
    row = {"status": "solved", "message": "Solve_Succeeded", "task_time_s": 0.9,
           "warm_start_from": "0003"}  # fmt: skip
    late = run._in_time(task, {"id": task.id, "row": row, "arrays": {"t": np.zeros(2)}})
    assert late["row"]["status"] == "timeout" and late["arrays"] is None
    assert late["row"]["message"] == (
        "timeout: the task ran 0.9 s, longer than task_timeout_s = 0.5 s"
    )
    assert late["row"]["task_time_s"] == 0.9
    in_time = {"id": task.id, "row": dict(row, task_time_s=0.4), "arrays": None}
    assert run._in_time(task, in_time) is in_time
    assert _retry_worthy(dict(late["row"], warm_start_from="0003"))  # warm: again from the guess
    assert not _retry_worthy(late["row"])


@pytest.mark.parametrize(
    ("kind", "file", "message"),
    [
        ("kinematic", "excite_dynamic.toml", "is a dynamic or twist problem file (it has "
         "[trajectory], [model]); --kind kinematic reads [postures]"),
        ("dynamic", "excite_kinematic.toml", "is a kinematic problem file (it has [postures]); "
         "--kind dynamic reads [trajectory]"),
    ],
)  # fmt: skip
def test_excite_refuses_a_problem_file_of_the_other_kind(capsys, tmp_path, kind, file, message):
    argv = ["excite", "--model", "planar_2r", "--kind", kind, "--out", str(tmp_path / "out")]
    line = fails(capsys, [*argv, str(ROOT / "problems" / file)])
    assert message in line and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("kind", "option"), [("dynamic", "--inertial"), ("kinematic", "--physical")]
)
def test_an_option_of_another_kind_is_one_line(capsys, tmp_path, p2r_log, kind, option):
    argv = ["calibrate", "--model", "planar_2r", "--log", str(p2r_log), "--kind", kind, option]
    line = fails(capsys, [*argv, "--out", str(tmp_path / "out"), "--quiet"])
    assert f"{option} applies to" in line and not (tmp_path / "out").exists()


def test_twist_design_at_its_iteration_limit_is_a_warning_and_exit_1(capsys, tmp_path):
    problem = problem_copy(tmp_path, "excite_twist.toml", max_iterations="3")
    argv = ["excite", "--model", "planar_2r", "--kind", "twist", "--out", str(tmp_path / "o")]
    assert main([*argv, "--quiet", str(problem)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "warning: IPOPT stopped with Maximum_Iterations_Exceeded" in err[0]


@pytest.mark.parametrize(
    ("knots", "warning"), [("100", None), ("4", "the goal is about the start")]
)
def test_a_goal_equal_to_the_start_is_no_percentage_of_no_travel(capsys, tmp_path, knots, warning):
    import json

    start = "[0.0, -0.5, 0.866]"  # the start of problems/fivebar_reach.toml
    problem = problem_copy(tmp_path, "fivebar_reach.toml", goal=start, start=start, knots=knots)
    before = problem.read_bytes()
    assert main(["reach", str(problem), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    err = capsys.readouterr().err
    warnings = json.loads((tmp_path / "out" / "summary.json").read_text())["warnings"]
    assert "%" not in err and problem.read_bytes() == before
    if warning is None:
        assert err == "" and warnings == []
    else:
        assert len(warnings) == 1 and warning in warnings[0] and warning in err


def _printed_numbers(text: str, label: str) -> list[float]:
    """The four numbers after ``label``: log det A -> B, condition number C -> D."""
    import re

    part = text.split(label, 1)[1]
    match = re.search(r"log det (\S+) -> (\S+), condition number (\S+) -> (\S+?)[ ,]", part)
    return [float(v) for v in match.groups()]


def test_excite_says_its_numbers_and_warns_at_the_iteration_limit(capsys, tmp_path):
    import json

    problem = problem_copy(tmp_path, "excite_dynamic.toml", max_iterations="3")
    out = tmp_path / "out"
    argv = ["excite", "--model", "planar_2r", "--kind", "dynamic", "--out", str(out)]
    assert main([*argv, "--quiet", str(problem)]) == 1
    captured = capsys.readouterr()
    warning = captured.err.strip().splitlines()
    assert len(warning) == 1 and warning[0].startswith("workbench excite: warning: IPOPT stopped")
    assert "Maximum_Iterations_Exceeded after 3 iterations" in warning[0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["warnings"] == [warning[0].split("warning: ", 1)[1]]
    for label, entry in (("criterion", "criterion"), ("written trajectory", "prediction")):
        values = summary[entry]
        expected = [values["initial_log_det"], values["log_det"],
                    values["initial_condition_number"], values["condition_number"]]  # fmt: skip
        printed = _printed_numbers(captured.out, label)
        np.testing.assert_allclose(printed, expected, rtol=5e-4)  # printed with 4 digits
    parameters = summary["parameters"]
    zero = sum(p["nominal"] == 0 for p in parameters)
    assert 0 < zero < len(parameters)  # friction terms start at 0
    assert f"{zero} of {len(parameters)} parameters have nominal 0: no relative std" in captured.out
    notes = [p.get("relative_std_note") for p in parameters]
    assert notes.count("nominal value 0: relative std undefined; predicted_std is absolute") == zero
    assert all(
        (p["predicted_relative_std_percent"] is None) == ("relative_std_note" in p)
        for p in summary["parameters"]
    )


def test_pinocchio_data_beyond_memory_is_refused_before_allocation(tmp_path):
    from workbench.models.pinocchio_conversion import load_urdf_model
    from workbench.models.placements import create_data

    urdf = tmp_path / "long.urdf"
    urdf.write_text(chain_urdf(600))  # Data would be 64 * 600^3 bytes = 13.8 GB
    model = load_urdf_model(urdf)
    with pytest.raises(wb.WorkbenchError, match=r"long \(600 joint velocities\) needs about 12.9 "
                       "GiB of memory"):  # fmt: skip
        create_data(model, "long")
    small = load_urdf_model(write_urdf(wb.models.load("planar_2r"), tmp_path / "p.urdf"))
    assert len(create_data(small).oMi) == small.njoints


def test_a_fifo_as_mesh_or_candidate_postures_file(tmp_path):
    from workbench.excitation.postures import read_postures
    from workbench.models.mesh import mesh_file_properties

    pipe = tmp_path / "pipe.stl"
    os.mkfifo(pipe)
    with pytest.raises(wb.WorkbenchError, match=r"mesh file .*pipe\.stl is a FIFO, not a regular"):
        mesh_file_properties(pipe, 1000.0)
    with pytest.raises(wb.WorkbenchError, match=r"candidate postures file .* is a FIFO"):
        read_postures(pipe, wb.models.load("planar_2r"))


def test_ur10_is_refused_pointing_to_the_two_robots(capsys):
    line = fails(capsys, ["info", "ur10"])
    assert "model 'ur10' named example-robot-data's CB3-series UR10, not the UR10e whose " in line
    assert "use 'ur10e' for the UR10e of models/ur10 or 'ur10_cb3' for the CB3-series" in line
    with pytest.raises(wb.WorkbenchError, match="'ur10_cb3'"):
        wb.models.load("ur10")


def test_ur10e_is_the_robot_of_the_recordings_and_ur10_cb3_another():
    shipped = load_urdf(ROOT / "models" / "ur10" / "ur10e.urdf", tool_frame="flange")
    ur10e, cb3 = wb.models.load("ur10e"), wb.models.load("ur10_cb3")
    np.testing.assert_array_equal(ur10e.twists, shipped.twists)
    np.testing.assert_array_equal(ur10e.tool_frame, shipped.tool_frame)
    # the shoulder height (a point on joint 2's axis) tells the two UR10s apart
    height = [chain.twists[1, 3:] @ np.cross([0, 0, 1], chain.twists[1, :3]) for chain in
              (ur10e, cb3)]  # fmt: skip
    assert abs(height[0] - height[1]) > 0.01, height


def test_info_lists_every_model_and_says_what_it_is(capsys):
    assert main(["info"]) == 0
    lines = capsys.readouterr().out.splitlines()
    described = dict(line.split(None, 1) for line in lines)
    assert set(wb.models.MODELS) <= set(described) and "ur10" not in described
    assert "models/ur10" in described["ur10e"] and "not the UR10e" in described["ur10_cb3"]
    assert main(["info", "ur10_cb3"]) == 0
    first, second = capsys.readouterr().out.splitlines()[:2]
    assert first.startswith("ur10_cb3: Universal Robots UR10, CB3 series")
    assert second.startswith("ur10_cb3 (URDF robot 'ur10'): 6 joints")


def test_the_model_names_of_the_shipped_commands_load():
    import re

    from workbench.closed_chains import SHIPPED

    texts = [ROOT / "README.md", *sorted((ROOT / "models").glob("*/README.md"))]
    pattern = r"(?:--model|workbench (?:info|export|simulate-log)) ([A-Za-z0-9_]+)(?=\s)"
    names = {name for path in texts for name in re.findall(pattern, path.read_text())}
    assert "ur10e" in names and "MODEL" in names
    for name in names - {"MODEL"}:
        assert name in wb.models.MODELS or name in SHIPPED, name


def test_out_of_memory_is_one_line(capsys, monkeypatch):
    import workbench.commands.info as info

    def too_big(args):
        raise MemoryError

    monkeypatch.setattr(info, "run", too_big)
    assert "error: out of memory" in fails(capsys, ["info", "iiwa"])


def test_a_fifo_as_log_is_not_a_regular_file(capsys, tmp_path):
    os.mkfifo(tmp_path / "log.csv")
    argv = ["calibrate", "--model", "planar_2r", "--log", str(tmp_path / "log.csv")]
    line = fails(capsys, [*argv, "--kind", "dynamic", "--out", str(tmp_path / "o"), "--quiet"])
    assert "log.csv is a FIFO, not a regular file" in line


def test_calibrate_results_folder_that_holds_the_log_is_refused(capsys, tmp_path, p2r_log):
    folder = tmp_path / "r"
    folder.mkdir()
    log = folder / "log.csv"
    log.write_bytes(p2r_log.read_bytes())
    argv = ["calibrate", "--model", "planar_2r", "--log", str(log), "--kind", "dynamic"]
    line = fails(capsys, [*argv, "--out", str(folder), "--quiet"])
    assert f"--out {folder} holds the input {log}" in line


def test_only_casadis_interrupt_warning_is_dropped(capsys):
    from workbench.ocp.nlp import interrupt_warnings_dropped

    pieces = ['CasADi - WARNING("', "KeyboardInterruptException", '")\n',
              'CasADi - WARNING("NaN ', 'detected")\n', "no newline"]  # fmt: skip
    with interrupt_warnings_dropped():
        for piece in pieces:  # CasADi writes a line in pieces
            sys.stderr.write(piece)
    assert capsys.readouterr().err == 'CasADi - WARNING("NaN detected")\nno newline'


QUIET_NAN = """
import casadi as ca
from workbench.ocp.nlp import ipopt_options
x = ca.MX.sym("x")
solver = ca.nlpsol("s", "ipopt", {"x": x, "f": x**2, "g": ca.sqrt(x)},
                   ipopt_options(1e-8, 20, progress=False))
solver(x0=-1.0, lbg=-10.0, ubg=10.0)
"""


def test_a_quiet_solve_prints_nothing_where_the_model_is_nan():
    """A NaN at a point IPOPT tries (it steps back) was printed by CasADi under --quiet, so
    the last stderr line of a command was not its own."""
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", QUIET_NAN], capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == "" and done.stderr == ""
