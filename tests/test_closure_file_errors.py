"""A closure file's unknown joint, frame, tool frame or URDF is a WorkbenchError naming the
file (and the key where one is at fault); before, the message named neither."""

import re

import pytest

from workbench.closed_chains import read
from workbench.errors import WorkbenchError
from workbench.resources import shipped

MODEL = shipped("models") / "planar_fivebar"


@pytest.fixture
def folder(tmp_path):
    for path in MODEL.iterdir():
        if path.suffix != ".toml":
            (tmp_path / path.name).symlink_to(path)
    return tmp_path


def _edited(folder, old: str, new: str):
    text = (MODEL / "planar_fivebar.toml").read_text(encoding="utf-8")
    assert re.search(old, text, flags=re.M)
    path = folder / "closure.toml"
    path.write_text(re.sub(old, new, text, flags=re.M), encoding="utf-8")
    return path


def test_the_shipped_file_reads_from_the_copy(folder):
    assert read(_edited(folder, r"^task = ", "task = ")).actuated == ("joint_1", "joint_4")


@pytest.mark.parametrize(
    "old, new, message",
    [
        (r"^joint_2 = ", "joint_x = ", r"\[home\] joint_x: unknown joint 'joint_x'"),
        (r"^actuated = .*$", 'actuated = ["joint_1", "joint_9"]', r"actuated: unknown joint"),
        (r'"joint_5_on_link_3"', '"link_x"', r"\[closure\[0\]\] frames: unknown frame 'link_x'"),
        (r"^tool = .*$", 'tool = "toool"', r"unknown tool frame 'toool'"),
        (r"^urdf = .*$", 'urdf = "nope.urdf"', r"URDF file not found: .*nope.urdf"),
    ],
)
def test_closure_file_errors_name_the_file_and_key(folder, old, new, message):
    path = _edited(folder, old, new)
    with pytest.raises(WorkbenchError, match=f"^{re.escape(str(path))}: {message}"):
        read(path)
