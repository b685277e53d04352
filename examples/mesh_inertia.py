"""Inertial parameters of a part from its mesh, and how they change with its vertices.

    python examples/mesh_inertia.py

Mass, first moment and rotational inertia of one of the five-bar's arcs
(an STL file shipped with the model) at the density of aluminium, checked
against trimesh, and the derivative of the mass when the arc's top face
moves outwards.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import trimesh

import workbench as wb

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> None:
    mesh = trimesh.load_mesh(ROOT / "models" / "fivebar" / "meshes" / "arc_2.stl")
    vertices, faces = np.asarray(mesh.vertices), np.asarray(mesh.faces)
    props = wb.mesh.mass_properties(vertices, faces, density=2700.0, derivatives=True)
    mass, com, inertia = wb.inertia.com_from_phi(props.phi)
    mesh.density = 2700.0
    print(f"mass {mass:.6f} kg (trimesh {mesh.mass:.6f}), centre of mass {np.round(com, 6)}")
    print("inertia about the centre of mass [kg m^2]:\n", np.round(inertia, 9))
    print("trimesh:\n", np.round(mesh.moment_inertia, 9))
    top = vertices[:, 2] > np.median(vertices[:, 2])
    dm = props.dphi_dvertices[0][top, 2].sum()  # d mass / d z of the upper vertices
    print(f"moving the upper vertices up by 1 mm changes the mass by {dm * 1e-3 * 1e3:.3f} g")


if __name__ == "__main__":
    main()
