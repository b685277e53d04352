"""Shared fixtures: reference robots and random states with fixed seeds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import workbench as wb

# Serial chains and trees the verification runs on (DESIGN.md "Verification").
ROBOTS = ("iiwa", "ur5", "panda_arm", "planar_2r", "talos_upper_body")


@pytest.fixture(scope="session")
def chains() -> dict[str, wb.Chain]:
    return {name: wb.models.load(name) for name in ROBOTS}


def random_state(chain: wb.Chain, samples: int, seed: int = 0):
    """Joint positions within the limits and velocities/accelerations of order one."""
    rng = np.random.default_rng(seed)
    lower = np.maximum(chain.lower, -np.pi)
    upper = np.minimum(chain.upper, np.pi)
    q = rng.uniform(lower, upper, size=(samples, chain.n))
    dq = rng.normal(size=(samples, chain.n))
    ddq = rng.normal(size=(samples, chain.n))
    f_tool = rng.normal(scale=20.0, size=(samples, 6))
    return q, dq, ddq, f_tool


@pytest.fixture(autouse=True, scope="session")
def _no_compile_line_in_process():
    """Command lines run in this process print no compile line: on a first run of the suite
    (an empty numba cache) it would be one more stderr line in the tests that read stderr.
    Subprocess tests check the line (tests/test_hardening_three.py)."""
    from workbench import runtime

    runtime._ANNOUNCER.said = True


def problem_copy(tmp_path: Path, name: str, **changes: str) -> Path:
    """A copy of the shipped problems/NAME with ``key = value`` lines replaced (keys must
    exist)."""
    lines = (Path(__file__).parents[1] / "problems" / name).read_text().splitlines()
    for key, value in changes.items():
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{key} ="))
        lines[at] = f"{key} = {value}"
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path
