"""Issue 28, hardening round three: URDF checks, inputs never outputs, interrupts, one-line errors,
file references, bounded resources and only true claims.

Command lines run as subprocesses (exit code, one stderr line, no traceback,
inputs unchanged) where the operating system is part of the story and for the
URDF checks, where a crash of the C++ parser would otherwise take the test
process with it; the rest run in process through :func:`workbench.cli.main`.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import workbench as wb
from workbench.urdf_check import MAX_JOINTS, check_urdf

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
        wb.load_urdf(bad)
    captured = capfd.readouterr()
    assert "limits" not in captured.err + captured.out
