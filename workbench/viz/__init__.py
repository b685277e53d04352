"""Visualisation: the project's plots and meshcat scenes of robot trajectories.

* :mod:`workbench.viz.plots`: the shared matplotlib figures, written as PNG;
* :mod:`workbench.viz.scene`: a URDF robot, its animation and tool path in a meshcat scene;
* :mod:`workbench.viz.viewer`: self-contained HTML export and the live meshcat server;
* :mod:`workbench.viz.playback`: reading a results directory or trajectory file to show;
* :mod:`workbench.viz.drawing`: result files drawn in a worker process beside a command.

Names are imported on first use (``wb.viz.write_html``), so that importing
one does not load the others' dependencies.
"""

from __future__ import annotations

from workbench.exports import exports

_NAMES = {
    "drawing": None,
    "playback": None,
    "plots": None,
    "scene": None,
    "viewer": None,
    "Robot": "scene",
    "show_trajectory": "scene",
    "write_html": "viewer",
    "serve": "viewer",
}

__all__, __getattr__ = exports(__name__, _NAMES)
