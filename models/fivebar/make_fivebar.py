"""Regenerate the spherical five-bar model from design.toml.

    python models/fivebar/make_fivebar.py

Writes fivebar.urdf (the spanning tree, joint 5 cut) and meshes/*.stl next
to this script, and the picture fivebar.png used by README.md.
"""

from __future__ import annotations

from pathlib import Path

from workbench.fivebar_design import FiveBarDesign

HERE = Path(__file__).resolve().parent

if __name__ == "__main__":
    design = FiveBarDesign.from_toml(HERE / "design.toml")
    print("wrote", design.write_model(HERE))
