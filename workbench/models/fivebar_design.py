"""Geometry of the spherical five-bar ([Kwon] §3, Figure 1) from design parameters.

All five joint axes meet at the origin O. Joints 1 and 4 are the base
motors, joints 2, 3 and 5 are passive; link 3 carries the end effector and
closes the loop through joint 5. At the home configuration (all joint
values zero) the axes are, with ``b`` the angle between the motor axes,
``a_p`` the proximal and ``a_d`` the distal arc angle::
    w1 = (-sin(b/2), 0, -cos(b/2))      w4 = (sin(b/2), 0, -cos(b/2))
    w3 = (0, 0, 1)                       (the end-effector axis, pointing up)
    w2 = (x, y, cos a_d),  x = -(cos a_p + cos(b/2) cos a_d) / sin(b/2), y > 0
    w5 = (-x, y, cos a_d)                (mirror image of w2)

so that angle(w1, w2) = angle(w4, w5) = a_p and angle(w2, w3) =
angle(w3, w5) = a_d. Links are spherical arcs with a rectangular cross
section (radial thickness x width normal to the arc's plane): link 1 from
w1 to w2 and link 4 from w4 to w5 at the proximal radius, link 2 from w2 to
w3 at the distal radius and link 3 from w3 to w5 one cross-section further
out (so the two distal arcs do not intersect). Each motor carries a rotor
(a solid cylinder on its axis, rigidly fixed to the proximal link it
drives) and link 3 carries a cylindrical payload on w3. Inertias come from
the meshes through :mod:`workbench.models.mesh`.

The spanning tree keeps all five joints: (1, 2, 3) on the first branch and
(4, 5) on the second, in that order, with link 5 massless after joint 5.
The loop is cut between link 3 and link 5: frames ``joint_5_on_link_3`` and
``joint_5_on_link_5`` (z along w5, at link 3's radius) coincide at home
and a ``rotation`` closure keeps them aligned (``fivebar.toml``); the tool
frame ``end_effector`` sits on w3 with its z axis along w3.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workbench import inertia, lie
from workbench.chain import Chain, Frame
from workbench.config import Section, read_toml
from workbench.errors import WorkbenchError
from workbench.io import atomic_write
from workbench.lie import Array
from workbench.models.mesh import mass_properties
from workbench.models.urdf import write_urdf

TREE_LINKS = ("link_1", "link_2", "link_3", "link_4", "link_5")
TREE_JOINTS = ("joint_1", "joint_2", "joint_3", "joint_4", "joint_5")
CUT_FRAMES = ("joint_5_on_link_3", "joint_5_on_link_5")
TOOL_FRAME = "end_effector"


@dataclass(frozen=True)
class Part:
    """A rigid piece of a link: a closed triangle mesh in the base frame at home.

    ``link`` is the tree link index (0..3 for links 1, 2, 3, 4), ``kind`` is
    "arc", "rotor" or "payload"; ``normal`` is the normal of an arc's plane
    (its width direction) and ``groups`` name vertex sets of the mesh
    ("top" and "bottom" faces of an arc, across its width).
    """

    name: str
    link: int
    kind: str
    vertices: Array
    faces: np.ndarray
    density: float
    normal: Array | None = None
    groups: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class FiveBarDesign:
    """Design parameters (SI units, angles in radians); see the module docstring."""

    base_angle: float = np.deg2rad(90.0)
    proximal_arc: float = np.deg2rad(75.0)
    distal_arc: float = np.deg2rad(90.0)
    proximal_radius: float = 0.10
    distal_radius: float = 0.125
    thickness: float = 0.008
    width: float = 0.02
    density: float = 2700.0
    rotor_radius: float = 0.02
    rotor_length: float = 0.02
    rotor_offset: float = 0.13
    rotor_density: float = 7850.0
    payload_radius: float = 0.015
    payload_length: float = 0.03
    payload_density: float = 2700.0
    active_limit: float = np.deg2rad(150.0)
    passive_limit: float = np.deg2rad(180.0)
    velocity_limit: float = 8.0
    effort_limit: float = 2.0
    arc_segments: int = 48

    @classmethod
    def from_toml(cls, path: str | os.PathLike) -> FiveBarDesign:
        """Read a design file: tables of parameters (any table names); angles are in degrees
        (keys ending in ``_deg``), ``arc_segments`` an integer, every other value a number."""
        path = Path(path)
        top = Section(read_toml(path, "five-bar design file"), str(path))
        values = {}
        for name in list(top.table):
            section = top.section(name)
            for key in list(section.table):
                field_name = key[: -len("_deg")] if key.endswith("_deg") else key
                if field_name not in cls.__dataclass_fields__:
                    raise WorkbenchError(f"{section.where(key)}: unknown design parameter")
                if field_name == "arc_segments":
                    values[field_name] = section.integer(key, minimum=1)
                else:
                    value = section.number(key)
                    values[field_name] = float(np.deg2rad(value)) if key.endswith("_deg") else value
            section.done()
        top.done()
        design = cls(**values)
        design.axes()  # validates the arc angles
        return design

    # ------------------------------------------------------------- geometry
    def axes(self) -> Array:
        """Joint axes w1..w5 (5, 3) at the home configuration (module docstring)."""
        s, c = np.sin(self.base_angle / 2), np.cos(self.base_angle / 2)
        z = np.cos(self.distal_arc)
        x = -(np.cos(self.proximal_arc) + c * z) / s
        y2 = 1.0 - x * x - z * z
        if not 0.0 < s < 1.0 or y2 <= 1e-6:
            raise WorkbenchError(
                "five-bar design cannot be assembled: the proximal and distal arcs "
                f"({np.rad2deg(self.proximal_arc):.1f}, {np.rad2deg(self.distal_arc):.1f} deg) "
                f"do not reach between motors {np.rad2deg(self.base_angle):.1f} deg apart"
            )
        y = np.sqrt(y2)
        return np.array([[-s, 0.0, -c], [x, y, z], [0.0, 0.0, 1.0], [s, 0.0, -c], [-x, y, z]])

    def joint_frames(self) -> Array:
        """Frames (5, 4, 4) at O with z along w1..w5 (joint 5 included)."""
        return np.array([_frame_with_z(w) for w in self.axes()])

    def link_3_radius(self) -> float:
        return self.distal_radius + 1.5 * self.thickness

    def parts(self) -> list[Part]:
        """Arcs, rotors and payload of the links, in the base frame at home."""
        w = self.axes()
        r3 = self.link_3_radius()
        arcs = [
            ("arc_1", 0, w[0], w[1], self.proximal_radius),
            ("arc_2", 1, w[1], w[2], self.distal_radius),
            ("arc_3", 2, w[2], w[4], r3),
            ("arc_4", 3, w[3], w[4], self.proximal_radius),
        ]
        parts = []
        for name, link, a, b, radius in arcs:
            vertices, faces, normal, groups = arc_mesh(
                a, b, radius, self.thickness, self.width, self.arc_segments
            )
            parts.append(Part(name, link, "arc", vertices, faces, self.density, normal, groups))
        rotor_v, rotor_f = cylinder_mesh(self.rotor_radius, self.rotor_length)
        for name, link, axis in (("rotor_1", 0, w[0]), ("rotor_4", 3, w[3])):
            frame = _frame_with_z(axis)
            frame[:3, 3] = self.rotor_offset * axis
            parts.append(
                Part(name, link, "rotor", _apply(frame, rotor_v), rotor_f, self.rotor_density)
            )
        payload_v, payload_f = cylinder_mesh(self.payload_radius, self.payload_length)
        frame = _frame_with_z(w[2])
        frame[:3, 3] = (r3 + self.thickness + self.payload_length / 2) * w[2]
        parts.append(
            Part("payload", 2, "payload", _apply(frame, payload_v), payload_f, self.payload_density)
        )
        return parts

    def tool_frame(self) -> Array:
        """End-effector frame at home: on w3, beyond the payload, z along w3."""
        frame = _frame_with_z(self.axes()[2])
        frame[:3, 3] = (self.link_3_radius() + self.thickness + self.payload_length) * frame[:3, 2]
        return frame

    def cut_frames(self) -> Array:
        """The two frames (2, 4, 4) of the cut joint 5 at home (both z along w5)."""
        frame = _frame_with_z(self.axes()[4])
        frame[:3, 3] = self.link_3_radius() * frame[:3, 2]
        return np.array([frame, frame])

    def chain(self, link_phi: Array | None = None) -> Chain:
        """The spanning tree as a Chain; link inertias from the parts unless ``link_phi`` (5, 10).

        ``link_phi`` gives each tree link's parameters in the base frame at
        home (docs/conventions.md phi order), e.g. after a design change.
        """
        if link_phi is None:
            link_phi = self.link_phi()
        frames = self.joint_frames()
        cut = self.cut_frames()
        revolute = (
            self.active_limit, self.passive_limit, self.passive_limit,
            self.active_limit, self.passive_limit,
        )  # fmt: skip
        return Chain(
            joint_names=TREE_JOINTS,
            link_names=TREE_LINKS,
            parents=np.array([-1, 0, 1, -1, 3]),
            joint_kinds=("revolute",) * 5,
            axes=np.tile([0.0, 0.0, 1.0], (5, 1)),
            joint_frames=frames,
            inertias=inertia.matrix_from_phi(link_phi),
            tool_name=TOOL_FRAME,
            tool_parent=2,
            tool_frame=self.tool_frame(),
            gravity=np.array([0.0, 0.0, -9.81]),
            lower=-np.array(revolute),
            upper=np.array(revolute),
            velocity_limit=np.full(5, self.velocity_limit),
            effort_limit=np.full(5, self.effort_limit),
            frames=(Frame(CUT_FRAMES[0], 2, cut[0]), Frame(CUT_FRAMES[1], 4, cut[1])),
            base_name="base",
            name="spherical_fivebar",
        )

    def link_phi(self) -> Array:
        """Inertial parameters (5, 10) of the tree links: the sum of their parts (mesh inertia).

        Link 5 has no parts: it is the massless link after joint 5.
        """

        phi = np.zeros((5, 10))
        for part in self.parts():
            phi[part.link] += mass_properties(part.vertices, part.faces, part.density).phi
        return phi

    def write_model(self, directory: str | os.PathLike) -> Path:
        """Write ``fivebar.urdf`` and one STL per part (in its link's frame) into ``directory``."""
        import trimesh

        directory = Path(directory)
        chain = self.chain()
        meshes: dict[str, list[str]] = {}
        for part in self.parts():
            to_link = lie.inverse(chain.joint_frames[part.link])
            mesh = trimesh.Trimesh(_apply(to_link, part.vertices), part.faces, process=False)
            filename = f"meshes/{part.name}.stl"
            atomic_write(directory / filename, lambda tmp, m=mesh: m.export(tmp, file_type="stl"))
            meshes.setdefault(TREE_LINKS[part.link], []).append(filename)
        return write_urdf(chain, directory / "fivebar.urdf", meshes)


def _frame_with_z(z: Array) -> Array:
    """A frame at the origin whose z axis is ``z`` (x chosen orthogonal, deterministic)."""
    z = z / np.linalg.norm(z)
    helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = helper - z * (helper @ z)
    x /= np.linalg.norm(x)
    T = np.eye(4)
    T[:3, :3] = np.column_stack([x, np.cross(z, x), z])
    return T


def _apply(T: Array, points: Array) -> Array:
    return points @ T[:3, :3].T + T[:3, 3]


def arc_mesh(
    start: Array, end: Array, radius: float, thickness: float, width: float, segments: int
) -> tuple[Array, np.ndarray, Array, dict[str, np.ndarray]]:
    """Closed triangle mesh of a spherical arc with a rectangular cross section.

    The arc runs from direction ``start`` to ``end`` at ``radius`` in their
    plane; the cross section spans ``radius +- thickness / 2`` radially and
    ``+- width / 2`` along the plane normal ``n``. Returns vertices (V, 3),
    outward-oriented faces (F, 3), ``n`` and the vertex groups "top"
    (``+n`` side) and "bottom".
    """
    e1 = start / np.linalg.norm(start)
    n = np.cross(start, end)
    n /= np.linalg.norm(n)
    e2 = np.cross(n, e1)
    angle = np.arctan2(end @ e2, end @ e1)
    s = np.linspace(0.0, angle, segments + 1)
    corners = np.array([[-1, -1], [1, -1], [1, 1], [-1, 1]]) * [thickness / 2, width / 2]
    radial = np.cos(s)[:, None] * e1 + np.sin(s)[:, None] * e2  # (K, 3)
    vertices = (
        (radius + corners[None, :, 0, None]) * radial[:, None, :]
        + corners[None, :, 1, None] * n[None, None, :]
    ).reshape(-1, 3)
    k = np.arange(segments)[:, None] * 4
    c = np.arange(4)[None, :]
    a, b = k + c, k + (c + 1) % 4  # (segments, 4) corner indices of section k
    sides = np.concatenate(
        [np.stack([a, b, b + 4], -1), np.stack([a, b + 4, a + 4], -1)], axis=1
    ).reshape(-1, 3)
    last = 4 * segments
    caps = np.array([[0, 2, 1], [0, 3, 2], [last, last + 1, last + 2], [last, last + 2, last + 3]])
    faces = np.concatenate([sides, caps])
    if _signed_volume(vertices, faces) < 0.0:
        faces = faces[:, ::-1]
    top = np.flatnonzero(np.tile(corners[:, 1] > 0, segments + 1))
    bottom = np.flatnonzero(np.tile(corners[:, 1] < 0, segments + 1))
    return vertices, faces, n, {"top": top, "bottom": bottom}


def cylinder_mesh(radius: float, length: float, sections: int = 32) -> tuple[Array, np.ndarray]:
    """A closed prism with ``sections`` sides approximating a cylinder along z, centred at O."""
    import trimesh

    mesh = trimesh.creation.cylinder(radius=radius, height=length, sections=sections)
    return np.asarray(mesh.vertices, dtype=float), np.asarray(mesh.faces, dtype=np.int64)


def _signed_volume(vertices: Array, faces: np.ndarray) -> float:
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    return float(np.einsum("ij,ij->", a, np.cross(b, c)) / 6.0)
