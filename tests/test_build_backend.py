"""The install step's warm up (tools/build_backend.py): its build environment holds what it imports.

``pip install -e .`` builds in an isolated environment holding only the
backend's requirements; the warm up it runs there fails (and the first command
compiles instead) if it imports a dependency the backend did not ask for.
"""

from __future__ import annotations

import importlib.metadata as metadata
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from build_backend import requirement_name, warm_up_requirements  # noqa: E402


def _closure(names: set[str]) -> set[str]:
    """The distributions ``names`` and everything they require (extras left out)."""
    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [requirement_name(r) for r in requires if "extra ==" not in r]
    return seen


def test_the_warm_up_runs_with_only_the_dependencies_the_build_environment_holds():
    """The warm up in a process where every other dependency of the project (and what
    only they require) cannot be imported, as in pip's build environment."""
    with open(ROOT / "pyproject.toml", "rb") as file:
        project = {requirement_name(d) for d in tomllib.load(file)["project"]["dependencies"]}
    asked = _closure({requirement_name(r) for r in warm_up_requirements()})
    absent = _closure(project) - asked
    blocked = sorted(
        module for module, names in metadata.packages_distributions().items()
        if module.isidentifier() and {requirement_name(d) for d in names} <= absent
    )  # fmt: skip
    assert "matplotlib" in blocked and "numba" not in blocked
    script = (
        "import json, sys\n"
        f"BLOCKED = set({json.dumps(blocked)})\n"
        "class Absent:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCKED:\n"
        "            raise ModuleNotFoundError(f'not in the build environment: {name}')\n"
        "sys.meta_path.insert(0, Absent())\n"
        "from workbench.warm_up import warm_up\n"
        "warm_up()\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
