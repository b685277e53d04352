"""URDF files: a Chain from a URDF, a Chain written as URDF, link inertias from meshes.

:func:`load_urdf` reads through Pinocchio's parser
(:mod:`workbench.models.pinocchio_conversion`); :func:`write_urdf` writes joint
origins, axes, limits, inertials, friction and attached frames so that
Pinocchio loads the same model back; :func:`with_mesh_inertias` rewrites a
URDF's inertials from its meshes (:mod:`workbench.models.mesh`).
"""

from __future__ import annotations

import os
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pinocchio as pin

from workbench import inertia, lie
from workbench.chain import REVOLUTE, Chain, Reduction, inertia_problem
from workbench.errors import WorkbenchError, WorkbenchWarning
from workbench.io import atomic_write_text, check_not_input
from workbench.models.mesh import mesh_file_properties
from workbench.models.pinocchio_conversion import from_pinocchio, load_urdf_model, reduced_model

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

    A chain cut from a whole robot (``chain.reduction``, :func:`load_robot`)
    is written as that whole robot instead: the robot's own URDF with only
    what the chain changed (:func:`whole_robot_string`). ``meshes`` maps a
    link name to mesh files (paths relative to the URDF, vertices in the
    link's frame) that become its visual and collision geometry;
    ``dynamics`` a joint name to its viscous and Coulomb friction, written
    as ``<dynamics damping="..." friction="..."/>``.
    """
    if chain.reduction is not None:
        if meshes:
            raise WorkbenchError("a whole robot keeps its own meshes; give no meshes to write it")
        return whole_robot_string(chain, dynamics)
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


def load_robot(
    path: str | os.PathLike,
    joints: Sequence[str] | None = None,
    locked: Mapping[str, float] | None = None,
    tool_frame: str | None = None,
    *,
    physical: bool = True,
    held: Mapping[str, float] | None = None,
) -> Chain:
    """A whole robot's URDF as the chain of the joints to calibrate, the rest locked.

    ``joints`` names the joints that stay (None: all, when all are revolute,
    continuous or prismatic); every other movable joint (wheels, a floating
    or planar root, head, grippers) is locked at its ``locked`` value, where
    a log ``held`` it still, at the mimic relation's value, or at zero
    (:func:`workbench.models.pinocchio_conversion.reduced_model`). The chain
    remembers the URDF and the locked values (``chain.reduction``), so that
    :func:`write_urdf` writes the whole robot back. The default tool is the
    last frame fixed to the last joint's link (not through a locked joint).
    Mesh files are not read.
    """
    path = Path(path)
    model = load_urdf_model(path)
    reduced, values = reduced_model(model, joints, locked, _mimic(path), str(path), held)
    if not values:
        return from_pinocchio(model, tool_frame=tool_frame, physical=physical)
    tool = tool_frame or _default_tool(reduced, values)
    chain = from_pinocchio(reduced, tool_frame=tool, physical=physical)
    reduction = Reduction(str(path.resolve()), tuple(values.items()))
    return replace(chain, reduction=reduction, name=model.name or chain.name)


def reload_urdf(chain: Chain, path: str | os.PathLike) -> Chain:
    """Read back a URDF written from ``chain`` (same tool and locked joints), any inertias."""
    if chain.reduction is None:
        return from_pinocchio(load_urdf_model(path), tool_frame=chain.tool_name, physical=False)
    return load_robot(
        path,
        chain.joint_names,
        None,
        chain.tool_name,
        physical=False,
        held=dict(chain.reduction.locked),
    )


def whole_robot_string(chain: Chain, dynamics: dict[str, tuple[float, float]] | None = None) -> str:
    """The whole robot's URDF with what ``chain`` (cut from it by :func:`load_robot`) changed.

    The poses at q = 0 (locked joints at their values) of every link, the
    tool and the attached frames are taken from ``chain``; a joint whose
    parent or child link moved gets the origin that puts them there
    (``origin = P_parent^-1 P_child exp(-[axis] q_locked)``), the other
    joints keep their text. Inertias stay where the chain has them: a
    moved link keeps its spatial inertia in the base frame, and a link of
    the chain whose spatial inertia changed takes the change on the URDF
    link of its joint, the links fixed or locked to it keeping theirs;
    when that link cannot carry the change (no rigid body has the result),
    the links fixed to it, then also those locked to it, are folded into it
    (a warning names them). ``dynamics`` adds ``<dynamics>`` to the chain's
    joints. Every other element of the file is kept as it is.
    """
    reduction = chain.reduction
    path = Path(reduction.urdf)
    locked = dict(reduction.locked)
    nominal = load_robot(
        path, chain.joint_names, None, chain.tool_name, physical=False, held=locked
    )
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise WorkbenchError(f"cannot read URDF {path}: {exc}") from exc
    links = {link.get("name"): link for link in root.findall("link")}
    now = {name: _pose(chain, name) for name in links}
    before = {name: _pose(nominal, name) for name in links}
    moved = {name for name in links if not np.allclose(now[name], before[name], rtol=0, atol=1e-13)}
    index = {name: i for i, name in enumerate(chain.joint_names)}
    dynamics = dynamics or {}
    for joint in root.findall("joint"):
        name = joint.get("name")
        parent, child = joint.find("parent").get("link"), joint.find("child").get("link")
        if name in dynamics:
            for old in joint.findall("dynamics"):
                joint.remove(old)
            damping, friction = dynamics[name]
            ET.SubElement(joint, "dynamics", damping=_num(damping), friction=_num(friction))
        if parent not in moved and child not in moved:
            continue
        axis = _axis(joint)
        if name in index:
            axis = chain.axes[index[name]]
            for old in joint.findall("axis"):
                joint.remove(old)
            ET.SubElement(joint, "axis", xyz=_vec(axis))
        origin = (
            lie.inverse(now[parent])
            @ now[child]
            @ _joint_motion(joint.get("type"), axis, -locked.get(name, 0.0))
        )
        for old in joint.findall("origin"):
            joint.remove(old)
        _origin(joint, origin)
    changes = {}
    for i, name in enumerate(chain.joint_names):
        change = chain.phi[i] - nominal.phi[i]
        scale = max(1.0, np.abs(nominal.phi[i]).max())
        if not np.allclose(change, 0.0, rtol=0, atol=1e-14 * scale):
            changes[root.find(f"joint[@name='{name}']/child").get("link")] = change
    base = {name: inertia.moved_phi(_inertial(link), before[name]) for name, link in links.items()}
    folded, zeroed = [], set()
    for child, change in changes.items():  # the identified body on the robot's own links
        fixed, carried = _attached(root, child, set(index))
        for take in (set(), fixed, fixed | carried):  # fold more links in only when needed
            target = base[child] + change + sum((base[name] for name in take), np.zeros(10))
            if inertia_problem(inertia.moved_phi(target, lie.inverse(now[child]))) is None:
                break
        else:
            problem = inertia_problem(inertia.moved_phi(target, lie.inverse(now[child])))
            raise WorkbenchError(
                f"{path}: the calibrated inertia of the body on link '{child}' is impossible: "
                f"{problem}"
            )
        base[child] = target
        for name in take:
            base[name] = np.zeros(10)
        zeroed |= take
        if take:
            folded.append(f"{', '.join(sorted(take))} into '{child}'")
    for name, link in links.items():  # a moved link keeps its inertia in the base frame
        if name in moved or name in changes or name in zeroed:
            _set_inertial(link, inertia.moved_phi(base[name], lie.inverse(now[name])))
    if folded:
        warnings.warn(
            f"{path}: an identified body cannot be split as the robot's own links are; the "
            f"inertias of the links fixed or locked to it are folded into the calibrated link: "
            f"{'; '.join(folded)} (the body is exactly the identified one; the folded links "
            "become massless)",
            WorkbenchWarning,
            stacklevel=3,
        )
    ET.indent(root)
    return '<?xml version="1.0"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _attached(root: ET.Element, link: str, stop: set[str]) -> tuple[set[str], set[str]]:
    """The links rigidly fixed to ``link`` by fixed joints, and those carried by it through a
    locked movable joint (joints in ``stop``, the calibrated ones, are not crossed)."""
    children: dict[str, list[tuple[str, str, str]]] = {}
    for joint in root.findall("joint"):
        parent = joint.find("parent").get("link")
        children.setdefault(parent, []).append(
            (joint.get("name"), joint.get("type"), joint.find("child").get("link"))
        )
    fixed, carried, pending = set(), set(), [(link, False)]
    while pending:
        parent, moving = pending.pop()
        for name, kind, child in children.get(parent, ()):
            if name in stop:
                continue
            through = moving or kind != "fixed"
            (carried if through else fixed).add(child)
            pending.append((child, through))
    return fixed, carried


def _pose(chain: Chain, name: str) -> np.ndarray:
    """Pose of a URDF link in the base frame at q = 0 (locked joints at their values)."""
    if name == chain.tool_name:
        return chain.tool_frame
    return chain.placement_of(name)


def _axis(joint: ET.Element) -> np.ndarray:
    axis = joint.find("axis")
    xyz = np.array((axis.get("xyz", "1 0 0") if axis is not None else "1 0 0").split(), float)
    norm = np.linalg.norm(xyz)
    return xyz / norm if norm > 0 else xyz  # a fixed joint's axis may be zero


def _joint_motion(kind: str | None, axis: np.ndarray, value: float) -> np.ndarray:
    """The motion of a 1-DoF joint by ``value`` (identity for fixed and multi-DoF joints)."""
    T = np.eye(4)
    if kind in ("revolute", "continuous"):
        T[:3, :3] = lie.exp_so3(axis * value)
    elif kind == "prismatic":
        T[:3, 3] = axis * value
    return T


def _inertial(link: ET.Element) -> np.ndarray:
    """phi (10,) of a URDF link's <inertial> in the link frame (zero without one)."""
    inertial = link.find("inertial")
    if inertial is None:
        return np.zeros(10)
    mass = float(inertial.find("mass").get("value"))
    T = _placement(inertial.find("origin"))
    element = inertial.find("inertia")
    get = {k: float(element.get(k, "0")) for k in ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")}
    I = np.array(
        [
            [get["ixx"], get["ixy"], get["ixz"]],
            [get["ixy"], get["iyy"], get["iyz"]],
            [get["ixz"], get["iyz"], get["izz"]],
        ]
    )
    R = T[:3, :3]
    return inertia.phi_from_com(mass, T[:3, 3], R @ I @ R.T)


def _mimic(path: Path) -> dict[str, tuple[str, float, float]]:
    """joint -> (mimicked joint, multiplier, offset) from a URDF's <mimic> elements."""
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise WorkbenchError(f"cannot read URDF {path}: {exc}") from exc
    result = {}
    for joint in root.findall("joint"):
        mimic = joint.find("mimic")
        if mimic is not None:
            result[joint.get("name")] = (
                mimic.get("joint"),
                float(mimic.get("multiplier", "1")),
                float(mimic.get("offset", "0")),
            )
    return result


def _default_tool(model, locked: Mapping[str, float]) -> str | None:
    """The last frame fixed to the last joint's link without a locked joint in between."""
    last = model.njoints - 1
    if last == 0:
        return None
    body, op = pin.FrameType.BODY, pin.FrameType.OP_FRAME
    best = None
    for fid, frame in enumerate(model.frames):
        if frame.parentJoint != last or frame.type not in (body, op):
            continue
        parent, through_locked, seen = frame.parentFrame, False, {fid}
        while parent not in seen and model.frames[parent].parentJoint == last:
            if model.frames[parent].type == pin.FrameType.JOINT:
                break
            through_locked |= model.frames[parent].name in locked
            seen.add(parent)
            parent = model.frames[parent].parentFrame
        if not through_locked:
            best = fid
    return model.frames[best].name if best is not None else None


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
    ``density`` (kg/m^3, or per link name) by :mod:`workbench.models.mesh` and
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


def link_meshes(
    urdf: str | os.PathLike,
    source: str = "visual",
    package_dirs: tuple[str | os.PathLike, ...] = (),
) -> dict[str, list[tuple[Path, np.ndarray, np.ndarray]]]:
    """The ``source`` ("visual" or "collision") mesh files of each link that exist on disk.

    Per link name a list of (file, origin 4x4 in the link frame, scale (3,));
    names resolve as in :func:`with_mesh_inertias`. Meshes whose files cannot
    be found are left out with a warning naming them (a URDF copied without them).
    """
    urdf = Path(urdf)
    try:
        root = ET.parse(urdf).getroot()
    except (OSError, ET.ParseError) as exc:
        raise WorkbenchError(f"cannot read URDF {urdf}: {exc}") from exc
    result: dict[str, list[tuple[Path, np.ndarray, np.ndarray]]] = {}
    missing = []
    for link in root.iter("link"):
        for element in link.findall(source):
            mesh = element.find("geometry/mesh")
            if mesh is None:
                continue
            try:
                filename = _resolve(mesh.get("filename", ""), urdf.parent, package_dirs)
            except WorkbenchError:
                filename = None
            if filename is None or not filename.is_file():
                missing.append(f"{mesh.get('filename', '')} (link '{link.get('name')}')")
                continue
            scale = np.array(mesh.get("scale", "1 1 1").split(), dtype=float)
            entry = (filename, _placement(element.find("origin")), scale)
            result.setdefault(link.get("name"), []).append(entry)
    if missing:
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        warnings.warn(
            f"{urdf}: {len(missing)} {source} mesh file(s) not found, left out: "
            + ", ".join(missing[:5])
            + more,
            WorkbenchWarning,
            stacklevel=2,
        )
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
        if relative.startswith("/"):  # package:///NAME (onshape-to-robot): beside the URDF
            return base / relative.lstrip("/")
        for directory in package_dirs:
            candidate = Path(directory) / relative
            if candidate.is_file():
                return candidate
        raise WorkbenchError(f"mesh '{filename}' not found under package_dirs {list(package_dirs)}")
    if filename.startswith("file://"):
        filename = filename[len("file://") :]
    return base / filename
