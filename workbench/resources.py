"""Where the shipped models and problem files live."""

from __future__ import annotations

from pathlib import Path

from workbench.errors import WorkbenchError

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def shipped(kind: str) -> Path:
    """The project's ``models`` or ``problems`` directory.

    They live beside the package in the source tree, so the project is
    installed in editable mode (``pip install -e .``), as the README says.
    """
    path = PROJECT_ROOT / kind
    if not path.is_dir():
        raise WorkbenchError(
            f"the shipped {kind}/ directory is missing at {path}; install the project from "
            "its source tree with `pip install -e .`"
        )
    return path
