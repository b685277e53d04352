"""The public API: examples and README snippets import only exported names; packages
export their names in one style, each resolving to a real object."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = (
    "workbench",
    "workbench.calibration",
    "workbench.closed_chains",
    "workbench.excitation",
    "workbench.identification",
    "workbench.ocp",
    "workbench.recordings",
    "workbench.sweep",
    "workbench.testing",
    "workbench.viz",
)


def _imports(source: str) -> list[tuple[str, str]]:
    """(module, name) of every ``from workbench... import name`` and ``import workbench...``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("workbench"):
            found += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, "") for a in node.names if a.name.startswith("workbench")]
    return found


def _snippets() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


SOURCES = [p.read_text() for p in sorted((ROOT / "examples").glob("*.py"))] + _snippets()


@pytest.mark.parametrize("source", SOURCES, ids=lambda s: s.splitlines()[0][:40])
def test_examples_and_readme_import_only_public_names(source):
    for module, name in _imports(source):
        assert module in PUBLIC, f"{module} is not a public package"
        if name:
            exported = importlib.import_module(module).__all__
            assert name in exported, f"{module}.{name} is not exported"


@pytest.mark.parametrize("package", PUBLIC)
def test_every_exported_name_resolves(package):
    module = importlib.import_module(package)
    assert module.__all__ == sorted(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None, f"{package}.{name}"
    with pytest.raises(AttributeError):
        module.no_such_name  # noqa: B018
