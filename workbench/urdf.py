"""Writing a Chain as URDF (joint origins, axes, limits, inertials, attached frames)."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from workbench import inertia, lie
from workbench.chain import REVOLUTE, Chain
from workbench.io import atomic_write_text

_LARGEST = np.finfo(float).max


def _num(x: float) -> str:
    """Shortest text that reads back to the same double; infinities become +-DBL_MAX."""
    return repr(float(np.clip(x, -_LARGEST, _LARGEST)))


def _vec(x) -> str:
    return " ".join(_num(v) for v in x)


def _origin(parent: ET.Element, T: np.ndarray) -> None:
    import pinocchio as pin

    ET.SubElement(parent, "origin", xyz=_vec(T[:3, 3]), rpy=_vec(pin.rpy.matrixToRpy(T[:3, :3])))


def urdf_string(chain: Chain, meshes: dict[str, list[str]] | None = None) -> str:
    """The URDF text of ``chain``: one link per joint (frame = joint frame), fixed frames, tool.

    ``meshes`` maps a link name to mesh files (paths relative to the URDF,
    vertices in the link's frame) that become its visual and collision
    geometry.
    """
    meshes = meshes or {}
    robot = ET.Element("robot", name=chain.name)
    ET.SubElement(robot, "link", name=chain.base_name)
    m, c, I_c = inertia.com_from_phi(inertia.phi_from_matrix(chain.local_inertias()))
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
        link = ET.SubElement(robot, "link", name=chain.link_names[i])
        for filename in meshes.get(chain.link_names[i], ()):
            for kind in ("visual", "collision"):
                geometry = ET.SubElement(ET.SubElement(link, kind), "geometry")
                ET.SubElement(geometry, "mesh", filename=filename)
        inertial = ET.SubElement(link, "inertial")
        ET.SubElement(inertial, "origin", xyz=_vec(c[i]), rpy="0 0 0")
        ET.SubElement(inertial, "mass", value=_num(m[i]))
        Ic = I_c[i]
        ET.SubElement(
            inertial,
            "inertia",
            ixx=_num(Ic[0, 0]), ixy=_num(Ic[0, 1]), ixz=_num(Ic[0, 2]),
            iyy=_num(Ic[1, 1]), iyz=_num(Ic[1, 2]), izz=_num(Ic[2, 2]),
        )  # fmt: skip
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


def write_urdf(
    chain: Chain, path: str | os.PathLike, meshes: dict[str, list[str]] | None = None
) -> Path:
    """Write ``chain`` to ``path`` as URDF, atomically (``meshes`` as in :func:`urdf_string`)."""
    return atomic_write_text(path, urdf_string(chain, meshes))
