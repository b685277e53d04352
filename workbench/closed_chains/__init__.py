"""Closed-chain mechanisms: spanning tree + loop closures + motors.

``load("planar_fivebar")`` returns a shipped closed chain by name (or a
closure file by path) as a :class:`ClosedChain`; kinematics, dynamics and
derivatives are in the submodules of the same names.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from workbench.closed_chains.model import ClosedChain, Closure
from workbench.errors import WorkbenchError

# name -> closure file under the shipped models/ directory
SHIPPED = {
    "fivebar": "fivebar/fivebar.toml",
    "planar_fivebar": "planar_fivebar/planar_fivebar.toml",
    "fourbar": "fourbar/fourbar.toml",
    "delta": "delta/delta.toml",
}

__all__ = ["SHIPPED", "ClosedChain", "Closure", "is_closed_chain", "load"]


def is_closed_chain(name: str | os.PathLike) -> bool:
    """Whether ``name`` names a shipped closed chain or a closure file (.toml)."""
    return str(name) in SHIPPED or str(name).endswith(".toml")


def load(name: str | os.PathLike) -> ClosedChain:
    """A shipped closed chain by name, or a closure file by path."""
    if str(name) in SHIPPED:
        from workbench.resources import shipped

        return _load(shipped("models") / SHIPPED[str(name)])
    if str(name).endswith(".toml"):
        return ClosedChain.from_toml(name)
    raise WorkbenchError(
        f"unknown closed chain '{name}'; shipped: {', '.join(SHIPPED)}, or a closure file (.toml)"
    )


@functools.cache
def _load(path: Path) -> ClosedChain:
    return ClosedChain.from_toml(path)
