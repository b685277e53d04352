"""Hostile and odd inputs against problem kinds, drive terms and log readers: each is
refused with a WorkbenchError naming what and where, never a traceback."""

from __future__ import annotations

import pytest

from workbench.errors import WorkbenchError
from workbench.ocp import kinds


@pytest.fixture
def own_kinds(monkeypatch):
    """A copy of the registry, so that nothing registered here outlives the test."""
    monkeypatch.setattr(kinds, "KINDS", dict(kinds.KINDS))


@pytest.mark.parametrize(
    ("name", "module", "named"),
    [
        (3, "workbench.ocp.reach_kind", "3"),
        ("", "workbench.ocp.reach_kind", "''"),
        (["a"], "workbench.ocp.reach_kind", "['a']"),
        ("ghost", "no.such.module", "no.such.module"),
        ("osk", "os", "read, solve, write"),
    ],
)
def test_register_refuses_a_kind_that_cannot_be_used(own_kinds, name, module, named):
    with pytest.raises(WorkbenchError, match=r"problem kind") as error:
        kinds.register(name, module)
    assert named in str(error.value)
    assert name not in kinds.KINDS if isinstance(name, str) else True
