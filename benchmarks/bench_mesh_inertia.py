"""Mesh inertia with and without vertex derivatives vs trimesh's mass properties (issue 4).

    python benchmarks/bench_mesh_inertia.py [--subdivisions 7] [--repeats 5]

An icosphere with 20 * 4^s faces (327,680 at s = 7), same vertices and
faces for both sides. trimesh's side is ``trimesh.triangles.mass_properties``
on the triangle array ``vertices[faces]`` (the gather is part of the call,
as our side gathers too), with the inertia taken about the origin. Ours:
phi alone without and with the mesh checks (watertight, winding, ...), and
phi with all 10 x V x 3 vertex derivatives (one compiled pass over the
faces, one thread; the numba kernels are compiled or loaded from the disk
cache by the untimed accuracy check first). Median of the repeats; the
ratio is ours / trimesh.
"""

from __future__ import annotations

import argparse

import numpy as np
import trimesh
from timing import machine, median_seconds, row

import workbench as wb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subdivisions", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    sphere = trimesh.creation.icosphere(subdivisions=args.subdivisions, radius=0.1)
    vertices, faces = np.array(sphere.vertices), np.array(sphere.faces)
    origin = np.zeros(3)

    def theirs():
        return trimesh.triangles.mass_properties(
            vertices[faces], density=2700.0, center_mass=origin
        )

    ours = wb.mesh.mass_properties(vertices, faces, 2700.0, derivatives=True).phi
    assert np.abs(ours[[4, 5, 6]] - np.diag(theirs()["inertia"])).max() < 1e-12
    t_ref = median_seconds(theirs, args.repeats)
    cases = {
        "workbench phi, checks off": dict(validate=False),
        "workbench phi, checks on": dict(),
        "workbench phi + d phi / d vertices, checks off": dict(validate=False, derivatives=True),
        "workbench phi + d phi / d vertices, checks on": dict(derivatives=True),
    }
    print(machine())
    print(f"icosphere, {len(faces)} faces, {len(vertices)} vertices, median of {args.repeats}\n")
    print(row("method", "ms", "ours / trimesh"))
    print(row("---", "---", "---"))
    print(row("trimesh.triangles.mass_properties", f"{t_ref * 1e3:.1f}", "1.00"))
    for label, options in cases.items():
        t = median_seconds(
            lambda o=options: wb.mesh.mass_properties(vertices, faces, 2700.0, **o), args.repeats
        )
        print(row(label, f"{t * 1e3:.1f}", f"{t / t_ref:.2f}"))


if __name__ == "__main__":
    main()
