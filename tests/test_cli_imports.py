"""The command line starts fast: building the parser imports no solver stack."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from workbench.calibration.problems.kind_names import KIND_NAMES
from workbench.calibration.problems.kinds import KINDS

ROOT = Path(__file__).resolve().parents[1]


def test_kind_names_are_the_registered_kinds():
    assert KIND_NAMES == tuple(KINDS)


def test_building_the_parser_imports_no_solver_stack():
    """Every command's options, in a fresh process, without scipy, CasADi, Pinocchio or numba."""
    code = (
        "import sys\n"
        "from workbench.cli import build_parser\n"
        "build_parser()\n"
        "print(*sorted({m.split('.')[0] for m in sys.modules}"
        " & {'scipy', 'casadi', 'pinocchio', 'numba', 'matplotlib', 'meshcat'}))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == []
