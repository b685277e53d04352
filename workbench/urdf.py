"""URDF files: a Chain from a URDF, a Chain written as URDF, link inertias from meshes.

:func:`load_urdf` reads through Pinocchio's parser
(:mod:`workbench.pinocchio_conversion`); :func:`write_urdf` writes joint
origins, axes, limits, inertials, friction and attached frames so that
Pinocchio loads the same model back; :func:`with_mesh_inertias` rewrites a
URDF's inertials from its meshes (:mod:`workbench.mesh`).
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio as pin

from workbench import inertia, lie
from workbench.chain import REVOLUTE, Chain
from workbench.errors import WorkbenchError
from workbench.io import atomic_write_text, check_not_input
from workbench.mesh import mesh_file_properties
from workbench.pinocchio_conversion import from_pinocchio, load_urdf_model

_LARGEST = np.finfo(float).max


def _num(x: float) -> str:
    """Shortest text that reads back to the same double; infinities become +-DBL_MAX."""
    return repr(float(np.clip(x, -_LARGEST, _LARGEST)))


def _vec(x) -> str:
    return " ".join(_num(v) for v in x)


def _origin(parent: ET.Element, T: np.ndarray) -> None:
    ET.SubElement(parent, "origin", xyz=_vec(T[:3, 3]), rpy=_vec(pin.rpy.matrixToRpy(T[:3, :3])))


def _set_inertial(link: ET.Element, phi: np.ndarray) -> None:
    """Replace the <inertial> of ``link`` by phi (link frame): mass, COM, inertia about the COM."""
    for old in link.findall("inertial"):
        link.remove(old)
    m, c, Ic = inertia.com_from_phi(phi)
    inertial = ET.SubElement(link, "inertial")
    ET.SubElement(inertial, "origin", xyz=_vec(c), rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=_num(m))
    ET.SubElement(
        inertial,
        "inertia",
        ixx=_num(Ic[0, 0]), ixy=_num(Ic[0, 1]), ixz=_num(Ic[0, 2]),
        iyy=_num(Ic[1, 1]), iyz=_num(Ic[1, 2]), izz=_num(Ic[2, 2]),
    )  # fmt: skip


def urdf_string(
    chain: Chain,
    meshes: dict[str, list[str]] | None = None,
    dynamics: dict[str, tuple[float, float]] | None = None,
) -> str:
    """The URDF text of ``chain``: one link per joint (frame = joint frame), fixed frames, tool.

    ``meshes`` maps a link name to mesh files (paths relative to the URDF,
    vertices in the link's frame) that become its visual and collision
    geometry; ``dynamics`` a joint name to its viscous and Coulomb friction,
    written as ``<dynamics damping="..." friction="..."/>``.
    """
    meshes = meshes or {}
    dynamics = dynamics or {}
    robot = ET.Element("robot", name=chain.name)
    ET.SubElement(robot, "link", name=chain.base_name)
    phi = inertia.phi_from_matrix(chain.local_inertias())
    placements = chain.relative_placements()
    for i in range(chain.n):
        parent = chain.base_name if chain.parents[i] < 0 else chain.link_names[chain.parents[i]]
        kind = "revolute" if chain.joint_kinds[i] == REVOLUTE else "prismatic"
        joint = ET.SubElement(robot, "joint", name=chain.joint_names[i], type=kind)
        ET.SubElement(joint, "parent", link=parent)
        ET.SubElement(joint, "child", link=chain.link_names[i])
        _origin(joint, placements[i])
        ET.SubElement(joint, "axis", xyz=_vec(chain.axes[i]))
        ET.SubElement(
            joint,
            "limit",
            lower=_num(chain.lower[i]),
            upper=_num(chain.upper[i]),
            effort=_num(chain.effort_limit[i]),
            velocity=_num(chain.velocity_limit[i]),
        )
        if chain.joint_names[i] in dynamics:
            damping, friction = dynamics[chain.joint_names[i]]
            ET.SubElement(joint, "dynamics", damping=_num(damping), friction=_num(friction))
        link = ET.SubElement(robot, "link", name=chain.link_names[i])
        for filename in meshes.get(chain.link_names[i], ()):
            for kind in ("visual", "collision"):
                geometry = ET.SubElement(ET.SubElement(link, kind), "geometry")
                ET.SubElement(geometry, "mesh", filename=filename)
        _set_inertial(link, phi[i])
    for frame in chain.attached_frames:
        if frame.attached_to is not None:
            parent = frame.attached_to
            origin = lie.inverse(chain.placement_of(parent)) @ frame.placement
        else:
            parent = chain.base_name if frame.parent < 0 else chain.link_names[frame.parent]
            origin = chain.relative_to_link(frame)
        joint = ET.SubElement(
            robot, "joint", name=frame.joint_name or f"{frame.name}_joint", type="fixed"
        )
        ET.SubElement(joint, "parent", link=parent)
        ET.SubElement(joint, "child", link=frame.name)
        _origin(joint, origin)
        ET.SubElement(robot, "link", name=frame.name)
    ET.indent(robot)
    return '<?xml version="1.0"?>\n' + ET.tostring(robot, encoding="unicode") + "\n"


def load_urdf(path: str | os.PathLike, tool_frame: str | None = None) -> Chain:
    """A fixed-base URDF as a Chain (through Pinocchio's parser, errors naming the file).

    ``tool_frame`` names a frame of the model; the default is its last frame.
    """
    return from_pinocchio(load_urdf_model(path), tool_frame=tool_frame)


def write_urdf(
    chain: Chain,
    path: str | os.PathLike,
    meshes: dict[str, list[str]] | None = None,
    dynamics: dict[str, tuple[float, float]] | None = None,
) -> Path:
    """Write ``chain`` to ``path`` as URDF, atomically (arguments as in :func:`urdf_string`)."""
    return atomic_write_text(path, urdf_string(chain, meshes, dynamics))


def with_mesh_inertias(
    urdf: str | os.PathLike,
    out: str | os.PathLike,
    density: float | dict[str, float],
    links: list[str] | None = None,
    source: str = "collision",
    package_dirs: tuple[str | os.PathLike, ...] = (),
) -> dict[str, np.ndarray]:
    """Write a copy of ``urdf`` whose links take their inertia from their meshes.

    For each link in ``links`` (default: every link with a ``source``
    ("visual" or "collision") mesh) the meshes are read with their
    ``scale`` and ``<origin>``, their mass properties computed at
    ``density`` (kg/m^3, or per link name) by :mod:`workbench.mesh` and
    summed, and the link's ``<inertial>`` block replaced. Mesh filenames
    are resolved relative to the URDF's directory; ``package://name/...``
    against ``package_dirs`` (directories that contain ``name``). Returns
    phi (10,) per link in its frame. The input file is not modified; the
    output is written atomically.
    """
    urdf = Path(urdf)
    check_not_input(out, urdf, option="out")
    if source not in ("visual", "collision"):
        raise WorkbenchError(f"mesh inertia source must be 'visual' or 'collision'; got {source!r}")
    try:
        root = ET.parse(urdf).getroot()
    except (OSError, ET.ParseError) as exc:
        raise WorkbenchError(f"cannot read URDF {urdf}: {exc}") from exc
    by_name = {link.get("name"): link for link in root.iter("link")}
    wanted = (
        links
        if links is not None
        else [
            name
            for name, link in by_name.items()
            if link.find(f"{source}/geometry/mesh") is not None
        ]
    )
    result = {}
    for name in wanted:
        if name not in by_name:
            raise WorkbenchError(f"{urdf}: no link named '{name}'")
        link_density = density[name] if isinstance(density, dict) else density
        phi = np.zeros(10)
        elements = [e for e in by_name[name].findall(source) if e.find("geometry/mesh") is not None]
        if not elements:
            raise WorkbenchError(f"{urdf}: link '{name}' has no {source} mesh")
        for element in elements:
            mesh = element.find("geometry/mesh")
            filename = _resolve(mesh.get("filename", ""), urdf.parent, package_dirs)
            scale = np.array(mesh.get("scale", "1 1 1").split(), dtype=float)
            mp = mesh_file_properties(filename, link_density, scale=scale)
            phi += inertia.moved_phi(mp.phi, _placement(element.find("origin")))
        _set_inertial(by_name[name], phi)
        result[name] = phi
    ET.indent(root)
    atomic_write_text(out, '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n")
    return result


def _placement(origin: ET.Element | None) -> np.ndarray:
    """The 4x4 transform of a URDF <origin> (identity when absent)."""
    T = np.eye(4)
    if origin is not None:
        T[:3, 3] = np.array(origin.get("xyz", "0 0 0").split(), dtype=float)
        T[:3, :3] = lie.rpy_to_matrix(np.array(origin.get("rpy", "0 0 0").split(), dtype=float))
    return T


def _resolve(filename: str, base: Path, package_dirs: tuple[str | os.PathLike, ...]) -> Path:
    if filename.startswith("package://"):
        relative = filename[len("package://") :]
        for directory in package_dirs:
            candidate = Path(directory) / relative
            if candidate.is_file():
                return candidate
        raise WorkbenchError(f"mesh '{filename}' not found under package_dirs {list(package_dirs)}")
    if filename.startswith("file://"):
        filename = filename[len("file://") :]
    return base / filename
