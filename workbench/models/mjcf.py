"""MuJoCo MJCF files of a Chain: bodies, joints, inertias, drive terms, frames and meshes.

:func:`mjcf_string` writes a :class:`~workbench.chain.Chain` as an MJCF
model that MuJoCo's inverse dynamics reproduces to rounding
(``tests/test_mjcf.py``): one body per link, nested as the tree, at the
link's joint frame (the URDF link frame); the joint at the body's origin
(``hinge`` or ``slide``, its axis in that frame, ``range`` and
``limited="true"`` when both limits are finite); the link's mass, centre of
mass and ``fullinertia`` about the centre of mass in the body frame; one
``site`` per attached frame and for the tool; a ``motor`` (gear 1, effort
limits as ``ctrlrange`` when finite) per actuated joint; the chain's gravity.
Numbers are written at full double precision (``repr``), angles in radians.

Drive terms, joint side and SI units (what ``workbench calibrate`` identifies,
:mod:`workbench.identification.drives`), in MuJoCo's terms:

* ``armature`` (kg m^2 or kg): rotor inertia reflected to the joint, added
  to the diagonal of the joint-space mass matrix;
* ``damping`` (N m s/rad or N s/m): viscous friction, the passive force
  ``-damping * qvel``;
* ``frictionloss`` (N m or N): Coulomb friction, a constraint force within
  ``+-frictionloss`` that opposes motion (``fs sign(dq)`` once sliding);
* ``stiffness`` (N m/rad or N/m): a joint's calibrated compliance under
  gravity (:mod:`workbench.calibration.fitting.compliance`), a spring between the
  motor and the link: MuJoCo's passive force ``-stiffness (q - q_spring)``
  is that spring when ``qpos_spring`` (``springref``, default 0) holds the
  motor position, which a simulation sets (``model.qpos_spring``) to where
  the motor is commanded;
* :class:`Coupling`: a motor that turns with several joints (``q_m = c . q``
  up to its gear), written as a fixed tendon with coefficients ``c`` whose
  ``armature``, ``damping`` and ``frictionloss`` add ``a c c^T ddq``,
  ``d c c^T dq`` and ``f c sign(c . dq)`` to the joint torques.

MuJoCo refuses moving bodies without mass or with a principal moment of
inertia at zero (``mjMINVAL``), which the project accepts (virtual links,
point masses, thin rods). A massless link with one child link and no frames
is folded: its joint moves into the child's body (MuJoCo applies the joints
of a body in order, each about its axis in the body frame at q = 0, which
is the product of exponentials of the normal form), up to six joints in a
body (MuJoCo's limit: a hand's chain of massless virtual links folds into
groups of six). Any other massless link
and any zero principal moment get MuJoCo's compiler bounds ``boundmass`` /
``boundinertia`` at ``BOUND_RELATIVE`` times the model's largest mass /
principal moment (written only when needed, and named in a comment): the
torques change by that fraction at most, far below the 1e-8 of the tests.
Inertias outside the triangle inequality (``A + B >= C``, which MuJoCo
checks and the project's :func:`~workbench.chain.check_inertias` accepts)
are moved onto it (:func:`realizable`) with a warning naming the link.
"""

from __future__ import annotations

import os
import warnings
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pinocchio as pin
from numpy.typing import ArrayLike

from workbench import inertia, lie
from workbench.chain import REVOLUTE, Chain, check_chain
from workbench.errors import WorkbenchError, WorkbenchWarning
from workbench.io import atomic_write_text
from workbench.lie import Array

# MuJoCo's compiler bounds, relative to the model's largest mass and principal moment
BOUND_RELATIVE = 1e-12
# MuJoCo refuses moving bodies whose mass or principal moments are below mjMINVAL = 1e-15
_MINVAL = 1e-15
# the triangle inequality A + B >= C may fail by this fraction of C (rounding in published models)
TRIANGLE_RTOL = 1e-9
# moments are moved this fraction of C inside A + B >= C (MuJoCo's check after rounding)
TRIANGLE_MARGIN = 1e-10
MAX_BODY_JOINTS = 6  # MuJoCo refuses a body with more degrees of freedom
# MuJoCo reads these mesh formats
MESH_FORMATS = (".stl", ".obj", ".msh")


@dataclass(frozen=True)
class Coupling:
    """A motor that turns with several joints, as a MuJoCo fixed tendon.

    ``coefficients`` (n,) per joint of the chain: the tendon length is
    ``coefficients . q``. ``armature``, ``damping`` and ``frictionloss`` act
    along it (module docstring).
    """

    name: str
    coefficients: ArrayLike
    armature: float = 0.0
    damping: float = 0.0
    frictionloss: float = 0.0


@dataclass(frozen=True)
class Mesh:
    """A mesh file on a frame: ``origin`` (4x4) its pose in the frame, ``scale`` per axis."""

    file: str
    origin: Array = field(default_factory=lambda: np.eye(4))
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)


def _num(x: float) -> str:
    return repr(float(x))


def _vec(x: ArrayLike) -> str:
    return " ".join(_num(v) for v in np.ravel(x))


def set_pose(element: ET.Element, T: Array) -> None:
    """Set pos and quat (w x y z) of ``element`` from the 4x4 pose T."""
    x, y, z, w = pin.Quaternion(np.asarray(T[:3, :3])).coeffs()
    element.set("pos", _vec(T[:3, 3]))
    element.set("quat", _vec([w, x, y, z]))


def _per_joint(chain: Chain, values: ArrayLike | None, what: str) -> Array:
    if values is None:
        return np.zeros(chain.n)
    out = np.asarray(values, dtype=float)
    if out.shape != (chain.n,):
        raise WorkbenchError(f"{what} has shape {out.shape}; expected ({chain.n},), one per joint")
    bad = np.flatnonzero(~np.isfinite(out) | (out < 0))
    if bad.size:
        j = int(bad[0])
        raise WorkbenchError(
            f"{what} of joint '{chain.joint_names[j]}' is {float(out[j])!r}; MuJoCo needs a "
            "finite value >= 0"
        )
    return out


def _folded(chain: Chain, holders: set[str]) -> Array:
    """Per link the link whose body carries its joint (itself, or its child when folded; a
    body carries at most :data:`MAX_BODY_JOINTS`, further massless links keep their own body).

    ``holders``: frames that carry sites or meshes (their links are not folded).
    """
    mass = chain.phi[:, 0]
    children = [np.flatnonzero(chain.parents == i) for i in range(chain.n)]
    framed = {f.parent for f in chain.attached_frames} | {chain.parent_of(f) for f in holders}
    body = np.arange(chain.n)
    joints = np.ones(chain.n, dtype=np.int64)  # joints each body carries
    for i in range(chain.n - 1, -1, -1):  # children first: a fold continues down a folded child
        if mass[i] == 0 and len(children[i]) == 1 and i not in framed:
            holder = body[children[i][0]]
            if joints[holder] < MAX_BODY_JOINTS:
                body[i] = holder
                joints[holder] += 1
    return body


def realizable(chain: Chain) -> tuple[Chain, list[str]]:
    """The chain with inertias MuJoCo accepts, and a note per link that changed.

    MuJoCo refuses principal moments of inertia about the centre of mass
    outside the triangle inequality ``A + B >= C`` (no rigid body has them,
    but identified models do: the iiwa's links 4 and 7), nor on it once the
    numbers are rounded. Such a link's moments become ``(A + d/3, B + d/3,
    C - d/3)`` with ``d = C - A - B + TRIANGLE_MARGIN C``, the nearest moments
    (Euclidean) strictly inside the inequality by that margin, about the same
    principal axes; mass and centre of mass stay. Violations within
    ``TRIANGLE_RTOL`` of the largest moment of the model are rounding: moved
    as well, without a note.
    """
    phi = chain.phi
    m, c, I_c = inertia.com_from_phi(phi)
    moments, axes = np.linalg.eigh(I_c)
    deficit = moments[:, 2] - moments[:, 0] - moments[:, 1] + TRIANGLE_MARGIN * moments[:, 2]
    bad = np.flatnonzero((m > 0) & (deficit > 0))
    if not bad.size:
        return chain, []
    notes = []
    rounding = TRIANGLE_RTOL * max(np.abs(moments).max(), _MINVAL)
    for i in bad:
        A, B, C = moments[i]
        moments[i] += deficit[i] / 3 * np.array([1.0, 1.0, -1.0])
        if C - A - B <= rounding:
            continue
        notes.append(
            f"link '{chain.link_names[i]}': principal moments of inertia {A:.6g}, {B:.6g}, "
            f"{C:.6g} kg m^2 violate A + B >= C, which MuJoCo requires; written as "
            + ", ".join(f"{v:.6g}" for v in moments[i])
            + f" (each moved by {deficit[i] / 3:.3g} kg m^2)"
        )
    I_c[bad] = axes[bad] @ (moments[bad, :, None] * np.swapaxes(axes[bad], -1, -2))
    fixed = phi.copy()
    fixed[bad] = inertia.phi_from_com(m[bad], c[bad], I_c[bad])
    return replace(chain, inertias=inertia.matrix_from_phi(fixed)), notes


def _bounds(phi: Array, carried: Array) -> tuple[float | None, float | None]:
    """MuJoCo's boundmass / boundinertia when a body in ``carried`` needs them."""
    m, _, I_c = inertia.com_from_phi(phi[carried])
    moments = np.linalg.eigvalsh(I_c)
    mass_bound = inertia_bound = None
    if np.any(m < _MINVAL):
        mass_bound = max(BOUND_RELATIVE * float(m.max(initial=0.0)), 10 * _MINVAL)
    if np.any(moments[:, 0] < _MINVAL):
        inertia_bound = max(BOUND_RELATIVE * float(moments.max(initial=0.0)), 10 * _MINVAL)
    return mass_bound, inertia_bound


def mjcf_element(
    chain: Chain,
    *,
    armature: ArrayLike | None = None,
    damping: ArrayLike | None = None,
    frictionloss: ArrayLike | None = None,
    couplings: Sequence[Coupling] = (),
    meshes: Mapping[str, Sequence[Mesh]] | None = None,
    actuated: Sequence[str] | None = None,
    name: str | None = None,
    timestep: float = 0.002,
    integrator: str = "implicitfast",
    stiffness: ArrayLike | None = None,
    keyframe: Mapping[str, float] | None = None,
    keyframe_name: str = "calibration",
) -> ET.Element:
    """The ``<mujoco>`` element of ``chain`` (module docstring).

    ``armature``, ``damping``, ``frictionloss``, ``stiffness`` (n,) per joint
    in the chain's order (default 0); ``couplings`` motors that turn with several
    joints (:class:`Coupling`); ``meshes`` a frame name (a link, an attached
    frame or the base) to :class:`Mesh` files written as visual geoms
    without contacts (file names as given, resolved by MuJoCo relative to
    the MJCF file); ``actuated`` the joints that get a motor (default all);
    ``name`` the model's name (default the chain's); ``timestep`` (s) and
    ``integrator`` MuJoCo's options; ``keyframe`` joint values (rad or m; the
    others 0) written as the ``<key name=keyframe_name>`` of a ``<keyframe>``
    (a whole robot's calibration: the values it locked each joint at).
    """
    check_chain(chain)
    stiffness = _per_joint(chain, stiffness, "stiffness")
    armature = _per_joint(chain, armature, "armature")
    damping = _per_joint(chain, damping, "damping")
    frictionloss = _per_joint(chain, frictionloss, "frictionloss")
    meshes = dict(meshes or {})
    actuated = chain.joint_names if actuated is None else tuple(actuated)
    for joint in actuated:
        chain.joint_index(joint)

    chain, notes = realizable(chain)
    for note in notes:
        warnings.warn(note, WorkbenchWarning, stacklevel=3)
    phi = inertia.phi_from_matrix(chain.local_inertias())
    body_of = _folded(chain, set(meshes))
    mass_bound, inertia_bound = _bounds(phi, np.unique(body_of))

    root = ET.Element("mujoco", model=name or chain.name)
    compiler = ET.SubElement(
        root, "compiler", angle="radian", autolimits="true", inertiafromgeom="false"
    )
    for note in notes:
        root.insert(0, ET.Comment(f" {note} "))
    if mass_bound is not None or inertia_bound is not None:
        root.insert(0, ET.Comment(
            " MuJoCo refuses moving bodies without mass or with a zero principal moment of "
            "inertia (point masses, thin rods, virtual links); the compiler raises them to "
            "these bounds "
        ))  # fmt: skip
        if mass_bound is not None:
            compiler.set("boundmass", _num(mass_bound))
        if inertia_bound is not None:
            compiler.set("boundinertia", _num(inertia_bound))
    ET.SubElement(
        root, "option", gravity=_vec(chain.gravity), timestep=_num(timestep), integrator=integrator
    )
    assets = ET.SubElement(root, "asset")
    world = ET.SubElement(root, "worldbody")

    bodies: dict[int, ET.Element] = {-1: world}
    for i in range(chain.n):
        if body_of[i] != i:
            continue
        group = [k for k in range(chain.n) if body_of[k] == i]  # root-side joint first
        first_parent = int(chain.parents[group[0]])
        parent_body = -1 if first_parent < 0 else int(body_of[first_parent])
        parent_frame = np.eye(4) if parent_body < 0 else chain.joint_frames[parent_body]
        body = ET.SubElement(bodies[parent_body], "body", name=chain.link_names[i])
        set_pose(body, lie.inverse(parent_frame) @ chain.joint_frames[i])
        bodies[i] = body
        for k in group:
            _joint(body, chain, k, i, armature[k], damping[k], frictionloss[k], stiffness[k])
        m, c, I_c = inertia.com_from_phi(phi[i])
        ET.SubElement(
            body, "inertial", pos=_vec(c), mass=_num(m),
            fullinertia=_vec([I_c[0, 0], I_c[1, 1], I_c[2, 2], I_c[0, 1], I_c[0, 2], I_c[1, 2]]),
        )  # fmt: skip

    def holder(frame_name: str) -> tuple[ET.Element, Array]:
        """The body that carries a frame and the frame's pose in that body."""
        link = chain.parent_of(frame_name)
        placement = chain.placement_of(frame_name)
        if link < 0:
            return world, placement
        return bodies[link], lie.inverse(chain.joint_frames[link]) @ placement

    for frame in chain.attached_frames:
        element, pose = holder(frame.name)
        site = ET.SubElement(element, "site", name=frame.name)
        set_pose(site, pose)
    for frame_name, files in meshes.items():
        element, pose = holder(frame_name)
        for k, mesh in enumerate(files):
            asset = f"{frame_name}_mesh_{k}"
            ET.SubElement(assets, "mesh", name=asset, file=str(mesh.file), scale=_vec(mesh.scale))
            geom = ET.SubElement(
                element, "geom", name=asset, type="mesh", mesh=asset,
                contype="0", conaffinity="0", group="1",
            )  # fmt: skip
            set_pose(geom, pose @ mesh.origin)
    if not len(assets):
        root.remove(assets)

    if couplings:
        tendons = ET.SubElement(root, "tendon")
        for coupling in couplings:
            coefficients = np.asarray(coupling.coefficients, dtype=float)
            if coefficients.shape != (chain.n,):
                raise WorkbenchError(
                    f"coupling '{coupling.name}' has {coefficients.shape} coefficients; "
                    f"expected ({chain.n},)"
                )
            for what in ("armature", "damping", "frictionloss"):
                value = float(getattr(coupling, what))
                if not (np.isfinite(value) and value >= 0):
                    raise WorkbenchError(
                        f"{what} of coupling '{coupling.name}' is {value!r}; MuJoCo needs a "
                        "finite value >= 0"
                    )
            tendon = ET.SubElement(
                tendons, "fixed", name=coupling.name,
                armature=_num(coupling.armature), damping=_num(coupling.damping),
                frictionloss=_num(coupling.frictionloss),
            )  # fmt: skip
            for j in np.flatnonzero(coefficients):
                ET.SubElement(
                    tendon, "joint", joint=chain.joint_names[j], coef=_num(coefficients[j])
                )
    if actuated:
        actuators = ET.SubElement(root, "actuator")
        for joint in actuated:
            j = chain.joint_index(joint)
            motor = ET.SubElement(actuators, "motor", name=joint, joint=joint, gear="1")
            effort = chain.effort_limit[j]
            if np.isfinite(effort) and 0 < effort < np.finfo(float).max:
                motor.set("ctrllimited", "true")
                motor.set("ctrlrange", _vec([-effort, effort]))
            else:
                motor.set("ctrllimited", "false")
    if keyframe:
        unknown = sorted(set(keyframe) - set(chain.joint_names))
        if unknown:
            raise WorkbenchError(f"keyframe: {', '.join(unknown)} are not joints of the model")
        order = [joint.get("name") for joint in world.iter("joint")]  # MuJoCo's qpos order
        qpos = [float(keyframe.get(name, 0.0)) for name in order]
        keys = ET.SubElement(root, "keyframe")
        ET.SubElement(keys, "key", name=keyframe_name, qpos=_vec(qpos))
    return root


def _joint(
    body: ET.Element, chain: Chain, k: int, i: int,
    armature: float, damping: float, frictionloss: float, stiffness: float,
) -> None:  # fmt: skip
    """Joint k in the body of link i: its own axis, or a folded joint's twist in that frame."""
    revolute = chain.joint_kinds[k] == REVOLUTE
    joint = ET.SubElement(body, "joint", name=chain.joint_names[k])
    joint.set("type", "hinge" if revolute else "slide")
    if k == i:
        pos, axis = np.zeros(3), chain.axes[k]
    else:
        twist = lie.Ad(lie.inverse(chain.joint_frames[i])) @ chain.twists[k]
        w, v = twist[:3], twist[3:]
        pos, axis = (np.cross(w, v), w) if revolute else (np.zeros(3), v)
    joint.set("pos", _vec(pos))
    joint.set("axis", _vec(axis))
    lower, upper = chain.lower[k], chain.upper[k]
    limited = bool(
        np.isfinite(lower) and np.isfinite(upper) and lower < upper
        and max(abs(lower), abs(upper)) < np.finfo(float).max
    )  # fmt: skip
    joint.set("limited", "true" if limited else "false")
    if limited:
        joint.set("range", _vec([lower, upper]))
    joint.set("armature", _num(armature))
    joint.set("damping", _num(damping))
    joint.set("frictionloss", _num(frictionloss))
    if stiffness > 0:  # a calibrated joint spring (module docstring); 0: rigid, none written
        joint.set("stiffness", _num(stiffness))


def mjcf_string(chain: Chain, **options: Any) -> str:
    """The MJCF text of ``chain`` (options as in :func:`mjcf_element`)."""
    return text(mjcf_element(chain, **options))


def text(root: ET.Element) -> str:
    """An MJCF element as indented XML text."""
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


def write_mjcf(chain: Chain, path: str | os.PathLike, **options: Any) -> Path:
    """Write ``chain`` to ``path`` as MJCF, atomically (options as in :func:`mjcf_element`)."""
    return atomic_write_text(path, mjcf_string(chain, **options))
