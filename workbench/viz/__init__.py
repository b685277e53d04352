"""Visualisation: the project's plots and meshcat scenes of robot trajectories.

* :mod:`workbench.viz.plots`: the shared matplotlib figures, written as PNG;
* :mod:`workbench.viz.scene`: a URDF robot, its animation and tool path in a meshcat scene;
* :mod:`workbench.viz.viewer`: self-contained HTML export and the live meshcat server;
* :mod:`workbench.viz.playback`: reading a results directory or trajectory file to show.

Submodules are imported on first use (``wb.viz.plots``), so that importing
one does not load the others' dependencies.
"""

from __future__ import annotations

import importlib
from types import ModuleType

_SUBMODULES = ("playback", "plots", "scene", "viewer")

__all__ = list(_SUBMODULES)


def __getattr__(name: str) -> ModuleType:
    if name in _SUBMODULES:
        return importlib.import_module(f"workbench.viz.{name}")
    raise AttributeError(f"module 'workbench.viz' has no attribute {name!r}")
