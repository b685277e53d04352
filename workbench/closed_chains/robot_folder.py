"""Closed chains from a folder of Gepetto's example-parallel-robots: robot.urdf + robot.yaml.

A folder ``DIR`` holds ``robot.urdf`` (the spanning tree) and ``robot.yaml``::

    closed_loop: [[A1, B1], [A2, B2]]   # frame pairs the loops close
    type: [6d, 3d]                      # 6d: a weld (the frames coincide); 3d: a point closure
    name_mot: [mot1, mot2]              # the actuated joints, in motor order
    joint_name: [J1, J2, J3]            # optional: joints replaced before closing ...
    joint_type: [SPHERICAL, UJOINT_XY, FIXED]  # ... by these

Reading rules (those of the upstream loader, ``completeRobotLoader``, where
it defines them):

* ``joint_name`` entries that name no joint of the URDF are ignored (as
  upstream; the collection has such entries);
* ``SPHERICAL``: three revolute joints ``J_X``, ``J_Y``, ``J_Z`` about the
  joint frame's axes (the first at the joint's origin, massless links
  between them, the child link after ``J_Z``); ``UJOINT_AB``: two revolute
  joints ``J_A``, ``J_B`` about the axes A then B; ``FIXED``: a fixed joint
  at the joint's zero;
* a closure frame is a link, an attached frame, or a joint name, which
  stands for its child link's frame (the joint's frame in Pinocchio);
* a ``<limit>`` without ``lower``/``upper`` is no position limit (urdfdom
  reads [0, 0]); the efforts onshape-to-robot writes are placeholders: no
  torque limit is read (a reach problem gives them, ``[limits] torque``);
* meshes are not read (``package:///NAME`` names ``DIR/NAME``; missing ones
  are never an error), nor ``<transmission>`` elements (their ``<joint>``
  entries name joints too);
* refused in one line: a robot.yaml that is not UTF-8, a joint replaced twice,
  a loop closed on one frame, limits with lower above upper, a URDF that
  :func:`workbench.models.urdf_check.check_urdf` refuses (a mass ``nan``:
  urdfdom drops an ``<inertial>`` it cannot read, and the link weighed
  nothing); warned of: links
  heavier than :data:`HEAVY`;
* no home configuration is given: q = 0 is closed with the smallest move by
  Levenberg-Marquardt on all joints ([Nocedal] §10.3, Marquardt's scaling,
  steps of at most ``MAX_STEP`` projected into the joint limits, iterates on a grid of
  ``GRID``, so that the home does not depend on the processor's rounding),
  with the rotation residual ``R - I`` (no half-turn roots), then Newton's
  method with minimum-norm steps on the closure residual; a closure left
  above ``CLOSED`` is refused naming it.
"""

from __future__ import annotations

import difflib
import os
import warnings
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import numpy as np
import pinocchio as pin
import yaml

from workbench.closed_chains.kinematics import Closures, check_assembly
from workbench.closed_chains.model import ClosedChain, Closure
from workbench.errors import WorkbenchError, WorkbenchWarning
from workbench.lie import Array
from workbench.models.pinocchio_conversion import from_pinocchio
from workbench.models.urdf_check import check_urdf, parse_quietly

YAML_NAME = "robot.yaml"
URDF_NAME = "robot.urdf"
KINDS = {"6d": "weld", "3d": "point"}
AXES = {"X": "1 0 0", "Y": "0 1 0", "Z": "0 0 1"}
MOVING = ("revolute", "continuous", "prismatic")
# The closure at the home configuration found from q = 0 must hold to this (m or rad).
CLOSED = 1e-10
LM_ITERATIONS = 300
RESTARTS = 8  # further Levenberg-Marquardt starts when the first stops short
MAX_STEP = 0.3  # rad or m: the largest joint move of one Levenberg-Marquardt step
GRID = 2.0**-30  # rad or m (9.3e-10): Levenberg-Marquardt's iterates on this grid ...
LM_CLOSED = 1e-8  # ... until the residual is this small; Newton's method closes from there
HEAVY = 1000.0  # kg: a link of a legged or parallel mechanism heavier than this is warned of


def is_robot_folder(path: str | os.PathLike) -> bool:
    """Whether ``path`` is such a folder (with a robot.yaml) or its robot.yaml."""
    path = Path(path)
    return (path.is_dir() and (path / YAML_NAME).is_file()) or path.name == YAML_NAME


def warn_open_tree(path: str | os.PathLike) -> None:
    """Warn when ``path`` is a folder's robot.urdf given alone: it is read as the open tree,
    while the robot.yaml beside it closes that tree."""
    path = Path(path)
    if path.name == URDF_NAME and (path.parent / YAML_NAME).is_file():
        warnings.warn(
            f"{path} is read as an open tree; {path.parent / YAML_NAME} beside it closes it: "
            f"give {path.parent} or that {YAML_NAME} for the closed chain",
            WorkbenchWarning,
            stacklevel=2,
        )


def read_folder(path: str | os.PathLike, tool: str | None = None) -> ClosedChain:
    """The closed chain of a folder or its robot.yaml (module docstring); ``tool`` names
    the tool frame (default the tree's last frame that is not a closure frame)."""
    path = Path(path)
    yaml_path = path / YAML_NAME if path.is_dir() else path
    folder = yaml_path.parent
    spec = _spec(yaml_path)
    urdf = folder / URDF_NAME
    check_urdf(urdf)  # urdfdom drops an <inertial> it cannot read (a mass 'nan'): weighs 0
    try:
        root = ET.parse(urdf).getroot()
    except (OSError, ET.ParseError) as exc:
        raise WorkbenchError(f"{urdf}: {exc}") from None
    children = {}
    for joint in root.findall("joint"):  # the robot's own: a <transmission> names joints too
        child = joint.find("child")
        if child is None or child.get("link") is None:
            raise WorkbenchError(f"{urdf}: joint '{joint.get('name')}' has no <child link=...>")
        children[joint.get("name")] = child.get("link")
    unlimited = _replace_joints(root, spec["joint_name"], spec["joint_type"], yaml_path)
    text = ET.tostring(root, encoding="unicode")
    model = parse_quietly(urdf, lambda: pin.buildModelFromXML(text))
    if tool is None:
        tool = _default_tool(model, spec["closed_loop"], children)
    try:
        tree = from_pinocchio(model, tool_frame=tool)
    except WorkbenchError as exc:
        raise WorkbenchError(f"{urdf}: {exc}") from None
    _check_limits(tree, urdf, unlimited)
    _warn_heavy_links(tree, urdf)
    free = np.array([name in unlimited for name in tree.joint_names])
    tree = replace(
        tree,
        lower=np.where(free, -np.inf, tree.lower),
        upper=np.where(free, np.inf, tree.upper),
        effort_limit=np.full(tree.n, np.inf),
        name=folder.name,
    )
    known = {tree.base_name, *tree.link_names, *(f.name for f in tree.attached_frames)}
    closures = []
    for k, (pair, kind) in enumerate(zip(spec["closed_loop"], spec["type"], strict=True)):
        frames = []
        for name in pair:
            frame = name if name in known else children.get(name, name)
            if frame not in known:
                raise WorkbenchError(
                    f"{yaml_path}: closed_loop[{k}] names '{name}', neither a frame nor a joint "
                    f"of {urdf.name}"
                )
            frames.append(frame)
        if frames[0] == frames[1]:
            raise WorkbenchError(
                f"{yaml_path}: closed_loop[{k}] closes frame '{frames[0]}' on itself ({pair[0]}, "
                f"{pair[1]}): the loop stays open"
            )
        closures.append(Closure(f"{pair[0]}-{pair[1]}", KINDS[kind], (frames[0], frames[1])))
    for motor in spec["name_mot"]:
        if motor not in tree.joint_names:
            raise WorkbenchError(f"{yaml_path}: name_mot names '{motor}', not a moving joint")
    chain = ClosedChain(
        tree, tuple(closures), tuple(spec["name_mot"]), np.zeros(tree.n), "position",
        folder.name, urdf, yaml_path,
    )  # fmt: skip
    try:
        return check_assembly(replace(chain, home=closed_configuration(chain)))
    except WorkbenchError as exc:
        ignored = _ignored_names(spec["joint_name"], children)
        if not ignored:
            raise
        raise WorkbenchError(
            f"{exc}; robot.yaml's joint_name entries that name no joint of {urdf.name} were "
            f"ignored: {ignored}"
        ) from None


def _check_limits(tree, urdf: Path, unlimited: set[str]) -> None:
    """Refuse a joint whose URDF limits have lower above upper (the MJCF export refuses it too;
    closing the chain within them would fail with a misleading residual)."""
    for name, lower, upper in zip(tree.joint_names, tree.lower, tree.upper, strict=True):
        if name not in unlimited and lower > upper:
            raise WorkbenchError(
                f"{urdf}: joint '{name}': <limit> lower = {lower:g} is above upper = {upper:g}"
            )


def _warn_heavy_links(tree, urdf: Path) -> None:
    """Warn of links heavier than :data:`HEAVY` (upstream's 5bar_linkage has two 'sphere' links
    of 654,498 kg each: its dynamics, reaches and MJCF export use them as they are, and MuJoCo's
    simulation of that export diverges within 0.1 s)."""
    masses = tree.inertias[:, 3, 3]
    heavy = [f"'{link}' ({m:.4g} kg)" for link, m in zip(tree.link_names, masses, strict=True)
             if m > HEAVY]  # fmt: skip
    if heavy:
        warnings.warn(
            f"{urdf}: links heavier than {HEAVY:g} kg: {', '.join(heavy)}; a unit slip or a "
            "placeholder in the CAD export? Dynamics, reaches and exports use these masses as "
            "they are",
            WorkbenchWarning,
            stacklevel=3,
        )


def _ignored_names(names: list, joints: dict) -> str:
    """The replacements naming no joint, each with the URDF's closest joint name (upstream's
    disney_robot names 'left_spherical_free_foot' in its yaml, its URDF spells it with an
    h circumflex: its left leg keeps one joint fewer and its motors are tied)."""
    out = []
    for name in names:
        if name not in joints:
            close = difflib.get_close_matches(str(name), list(joints), n=1, cutoff=0.8)
            out.append(f"'{name}'" + (f" (the URDF has '{close[0]}')" if close else ""))
    return ", ".join(out)


def _default_tool(model: pin.Model, pairs: list, children: dict[str, str]) -> str | None:
    """The last frame of ``model`` that is not a closure frame (named by a closure, the child
    link of a joint a closure names, or the joint of such a link): a closure frame as the
    tool would let the tool's eta block move the closure. None (the last frame) when every
    frame is a closure's."""
    named = {name for pair in pairs for name in pair}
    named |= {children[name] for name in named if name in children}
    named |= {joint for joint, child in children.items() if child in named}  # their joints
    for frame in reversed(model.frames.tolist()):
        if frame.name not in named and frame.name != "universe":
            return frame.name
    return None


def _spec(yaml_path: Path) -> dict:
    """The robot.yaml's keys, checked (types and lengths), with defaults for the optional."""
    try:
        raw = yaml.safe_load(yaml_path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise WorkbenchError(
            f"{yaml_path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset "
            f"{exc.start}); save it as UTF-8"
        ) from None
    except (OSError, yaml.YAMLError) as exc:
        raise WorkbenchError(f"{yaml_path}: {exc}") from None
    if not isinstance(raw, dict):
        raise WorkbenchError(f"{yaml_path}: expected a mapping with closed_loop, type, name_mot")
    spec = {}
    for key, required in (("closed_loop", True), ("type", True), ("name_mot", True),
                          ("joint_name", False), ("joint_type", False)):  # fmt: skip
        value = raw.get(key, None if required else [])
        if value is None or not isinstance(value, list):
            raise WorkbenchError(f"{yaml_path}: '{key}' must be a list")
        spec[key] = value
    if not spec["name_mot"] or not all(isinstance(m, str) for m in spec["name_mot"]):
        raise WorkbenchError(f"{yaml_path}: 'name_mot' must list the motors' joint names")
    if not spec["closed_loop"] or not all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p)
        for p in spec["closed_loop"]
    ):
        raise WorkbenchError(f"{yaml_path}: 'closed_loop' must list pairs of frame names")
    types = [str(t).lower() for t in spec["type"]]
    if len(types) != len(spec["closed_loop"]) or any(t not in KINDS for t in types):
        raise WorkbenchError(
            f"{yaml_path}: 'type' must give one of {', '.join(KINDS)} per closed_loop pair "
            f"({len(spec['closed_loop'])}), not {spec['type']}"
        )
    spec["type"] = types
    if len(spec["joint_name"]) != len(spec["joint_type"]):
        raise WorkbenchError(f"{yaml_path}: 'joint_name' and 'joint_type' differ in length")
    for key in ("joint_name", "joint_type"):
        for k, x in enumerate(spec[key]):
            if not isinstance(x, str):
                raise WorkbenchError(
                    f"{yaml_path}: '{key}' must list strings; entry {k} is a {type(x).__name__}"
                )
    twice = sorted({x for x in spec["joint_name"] if spec["joint_name"].count(x) > 1})
    if twice:
        raise WorkbenchError(f"{yaml_path}: 'joint_name' names {', '.join(twice)} twice")
    for k, pair in enumerate(spec["closed_loop"]):
        if pair[0] == pair[1]:
            raise WorkbenchError(f"{yaml_path}: closed_loop[{k}] names '{pair[0]}' twice")
    return spec


def _replace_joints(root: ET.Element, names: list, kinds: list, where: Path) -> set[str]:
    """Apply the yaml's joint replacements to the URDF tree ``root`` in place; return the
    moving joints without position limits (``<limit>`` without lower/upper, new joints)."""
    joints = {j.get("name"): j for j in root.findall("joint")}
    unlimited = {
        name for name, j in joints.items()
        if j.get("type") in ("revolute", "prismatic")
        and (j.find("limit") is None or j.find("limit").get("lower") is None
             or j.find("limit").get("upper") is None)
    }  # fmt: skip
    for name, kind in zip(names, kinds, strict=True):
        joint = joints.get(name)
        kind = str(kind).upper()
        if joint is None:  # as upstream: a replacement of no joint of the URDF does nothing
            continue
        if kind == "FIXED":
            joint.set("type", "fixed")
            for tag in ("axis", "limit", "dynamics", "mimic"):
                for element in joint.findall(tag):
                    joint.remove(element)
            unlimited.discard(name)
            continue
        if kind == "SPHERICAL":
            axes = "XYZ"
        elif (kind.startswith("UJOINT_") and len(kind) == 9 and set(kind[7:]) <= set(AXES)
              and kind[7] != kind[8]):  # fmt: skip
            axes = kind[7:]
        else:
            raise WorkbenchError(
                f"{where}: joint_type '{kind}' of '{name}': SPHERICAL, UJOINT_AB (A, B two of X, "
                "Y, Z) or FIXED"
            )
        unlimited.discard(name)
        unlimited.update(_split(root, joint, axes))
    return unlimited


def _split(root: ET.Element, joint: ET.Element, axes: str) -> list[str]:
    """Replace ``joint`` by revolute joints NAME_A, ... about ``axes`` of its frame; their names."""
    name = joint.get("name")
    parent = joint.find("parent").get("link")
    child = joint.find("child").get("link")
    limit = joint.find("limit")
    effort = "1" if limit is None else limit.get("effort", "1")
    velocity = "20" if limit is None else limit.get("velocity", "20")
    index = list(root).index(joint)
    root.remove(joint)
    names = []
    for k, axis in enumerate(axes):
        new = ET.Element("joint", name=f"{name}_{axis}", type="revolute")
        last = k == len(axes) - 1
        link = child if last else f"{name}_{axis}_link"
        ET.SubElement(new, "parent", link=parent)
        ET.SubElement(new, "child", link=link)
        origin = joint.find("origin")
        if k == 0 and origin is not None:
            new.append(origin)
        ET.SubElement(new, "axis", xyz=AXES[axis])
        ET.SubElement(new, "limit", effort=effort, velocity=velocity)
        root.insert(index + 2 * k, new)
        if not last:
            root.insert(index + 2 * k + 1, ET.Element("link", name=link))
        parent = link
        names.append(f"{name}_{axis}")
    return names


def _rotation_free_residual(closures: Closures) -> Array:
    """Per sample the closures' residual with ``R - I`` (9) for the rotation rows (N, r)."""
    parts = []
    for closure, loop in zip(closures.model.closures, closures.loops, strict=True):
        X = loop.X
        parts.append(X[:, :3, 3])
        if closure.kind == "weld":
            parts.append((X[:, :3, :3] - np.eye(3)).reshape(len(X), 9))
    return np.concatenate(parts, axis=1)


def closed_configuration(chain: ClosedChain, start: Array | None = None) -> Array:
    """The closed configuration nearest ``start`` (default q = 0) (module docstring).

    Levenberg-Marquardt from ``start``; where it stops short (a stationary
    point of the residual: a half-turn misalignment is one), again from
    ``RESTARTS`` starts spread around ``start`` by growing random moves
    (seeded: the same model gives the same home, on any processor: :func:`_snapped`),
    keeping the first that
    closes. Raises WorkbenchError naming the closure and its residual when
    none closes to ``CLOSED``.
    """
    start = np.zeros(chain.n) if start is None else np.asarray(start, dtype=float)
    rng = np.random.default_rng(0)
    best = None
    for k in range(RESTARTS + 1):
        move = 0.0 if k == 0 else np.pi * k / RESTARTS * rng.uniform(-1.0, 1.0, chain.n)
        q0 = np.clip(start + move, chain.tree.lower, chain.tree.upper)
        q, error, angle = _close(chain, q0)
        if best is None or (error.max(), angle.max()) < (best[1].max(), best[2].max()):
            best = q, error, angle
        if error.max() <= CLOSED and angle.max() <= np.pi / 2:
            return q
    q, c, angle = best
    rows = np.cumsum([k.rows for k in chain.closures])
    row = int(np.argmax(c))
    k = int(np.searchsorted(rows, row, side="right"))
    if angle.max() > np.pi / 2:
        k = int(np.argmax(angle))
        row = rows[k] - 1
    closure = chain.closures[k]
    raise WorkbenchError(
        f"{chain.where}: no closed configuration found from q = 0: closure "
        f"'{closure.name}' ({closure.kind} of {closure.frames[0]} and {closure.frames[1]}) "
        f"keeps residual {c[row]:.3g} and misalignment {np.rad2deg(angle[k]):.3g} deg "
        f"(Levenberg-Marquardt on all joints from {RESTARTS + 1} starts)"
    )


def _snapped(q: Array) -> Array:
    """``q`` on the grid of ``GRID``: Levenberg-Marquardt's iterates there, where it ends
    is no longer decided by the last bits of its linear algebra (its path on the closed
    configurations, all equally good to it, is chaotic: from q = 0 moved by 1e-13,
    cassie_like's ended up to 3.5 rad apart, and a processor with other BLAS kernels gave
    another home). Rounding then moves an iterate only where it lies within rounding of a
    grid cell's edge."""
    return np.round(q / GRID) * GRID


def _close(chain: ClosedChain, q: Array) -> tuple[Array, Array, Array]:
    """Levenberg-Marquardt then Newton from q: (q, |closure residual|, misalignments)."""
    n = chain.n
    lower, upper = chain.tree.lower, chain.tree.upper
    h = 1e-7
    units = np.vstack([np.eye(n), -np.eye(n)]) * h

    def value(x: Array) -> Array:
        return _rotation_free_residual(Closures(chain, np.atleast_2d(x)))

    q = np.clip(_snapped(q), lower, upper)
    r = value(q)[0]
    damping = 1e-3
    for _ in range(LM_ITERATIONS):
        cost = r @ r
        if np.abs(r).max() < LM_CLOSED:
            break
        sides = value(q + units)
        J = ((sides[:n] - sides[n:]) / (2 * h)).T
        g = J.T @ r
        A = J.T @ J
        scale = np.maximum(np.diag(A), 1e-12)
        step = -np.linalg.solve(A + damping * np.diag(scale), g)
        step *= min(1.0, MAX_STEP / max(np.abs(step).max(), 1e-300))
        step = np.clip(_snapped(q + step), lower, upper) - q  # projected: joint limits hold
        trial = value(q + step)[0]
        if trial @ trial < cost:
            q, r = q + step, trial
            damping = max(damping / 3, 1e-12)
        else:
            damping *= 4
            if damping > 1e12:
                break
    for _ in range(20):  # Newton, minimum-norm steps, on the closure residual itself
        closures = Closures(chain, q[None])
        c = closures.residual()[0]
        if np.abs(c).max() < 1e-14:
            break
        q = np.clip(q - np.linalg.lstsq(closures.jacobian()[0], c, rcond=1e-12)[0], lower, upper)
    turns = np.array([k == "revolute" for k in chain.tree.joint_kinds]) & ~np.isfinite(lower)
    q[turns] = np.remainder(q[turns] + np.pi, 2 * np.pi) - np.pi  # the same configuration
    closures = Closures(chain, q[None])
    return q, np.abs(closures.residual()[0]), closures.misalignment()[0]
