"""Regenerate the spherical five-bar model from design.toml.

    python models/fivebar/make_fivebar.py

Writes fivebar.urdf (the spanning tree, joint 5 cut) and meshes/*.stl next
to this script, and the picture fivebar.png used by README.md.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from mpl_toolkits.mplot3d.art3d import Poly3DCollection

from workbench.io import atomic_write
from workbench.models.fivebar_design import FiveBarDesign

HERE = Path(__file__).resolve().parent
COLOURS = {"arc": "#9aa7b8", "rotor": "#c0504d", "payload": "#4f81bd"}


def render(design: FiveBarDesign, path: Path) -> Path:
    """The parts at home, the five joint axes through the centre and the pointing axis."""
    fig = Figure(figsize=(6, 6), dpi=120)
    ax = fig.add_subplot(projection="3d")
    for part in design.parts():
        triangles = part.vertices[part.faces]
        ax.add_collection3d(
            Poly3DCollection(triangles, facecolor=COLOURS[part.kind], edgecolor="none", alpha=0.9)
        )
    for k, w in enumerate(design.axes(), start=1):
        ax.plot(*np.stack([np.zeros(3), 0.16 * w]).T, color="k", lw=0.8, ls="--")
        ax.text(*(0.17 * w), f"w{k}", fontsize=9)
    ax.set(xlim=(-0.11, 0.11), ylim=(-0.11, 0.11), zlim=(-0.11, 0.11), box_aspect=(1, 1, 1))
    ax.view_init(elev=20, azim=-60)
    ax.set_axis_off()
    fig.suptitle("Spherical five-bar at home: all five axes meet at the centre")
    return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png"))


if __name__ == "__main__":
    design = FiveBarDesign.from_toml(HERE / "design.toml")
    print("wrote", design.write_model(HERE))
    print("wrote", render(design, HERE / "fivebar.png"))
