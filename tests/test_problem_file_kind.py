"""A reaching problem file that states ``kind = "reach"`` (as the format allows) reads the
same through ReachProblem.from_toml as through the kind registry and as without the key."""

import dataclasses

import numpy as np
import pytest

from workbench.errors import WorkbenchError
from workbench.ocp import kinds
from workbench.ocp.problem import ReachProblem
from workbench.resources import shipped

BASE = shipped("problems") / "fourbar_reach.toml"


def _fields(problem):
    values = dataclasses.asdict(problem)
    values.pop("source")
    return values


def _same(a, b):
    fa, fb = _fields(a), _fields(b)
    assert fa.keys() == fb.keys()
    for key in fa:
        np.testing.assert_array_equal(np.asarray(fa[key]), np.asarray(fb[key]), err_msg=key)


def test_stated_kind_reads_like_the_registry_and_like_no_kind(tmp_path):
    stated = tmp_path / "fourbar_reach.toml"
    text = BASE.read_text(encoding="utf-8")  # model = "fourbar": a shipped name
    stated.write_text('kind = "reach"\n' + text, encoding="utf-8")
    plain = tmp_path / "plain.toml"
    plain.write_text(text, encoding="utf-8")
    direct = ReachProblem.from_toml(stated)  # refused "unknown key(s) kind" before
    _same(direct, kinds.read(stated))
    _same(direct, ReachProblem.from_toml(plain))


def test_another_kind_is_refused_naming_the_key(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text('kind = "other"\n' + BASE.read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(WorkbenchError, match=rf"{path}: kind = 'other' must be one of 'reach'"):
        ReachProblem.from_toml(path)
