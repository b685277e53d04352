"""Conversion between a :class:`~workbench.chain.Chain` and a Pinocchio model.

Pinocchio describes each joint in its parent's frame, with inertias in the
joints' frames and motions linear part first; a Chain keeps the twists and
inertias in the base frame at q = 0 (Kwon's normal form) and motions angular
part first. :func:`from_pinocchio` and :func:`to_pinocchio` convert both ways
(joint types, names, limits, attached frames and the tool survive a round
trip; ``lie.pinocchio_vector`` / ``lie.pinocchio_matrix`` reorder motions and
inertias at this boundary only); :func:`load_urdf_model` reads a URDF with
errors that name the file.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence

import numpy as np
import pinocchio as pin

from workbench import inertia, lie
from workbench.chain import PRISMATIC, REVOLUTE, Chain, Frame, check_inertias
from workbench.errors import WorkbenchError
from workbench.lie import Array
from workbench.models.placements import neutral_placements
from workbench.models.urdf_check import check_urdf, parse_quietly

_JOINTS = {
    "JointModelRX": (REVOLUTE, (1.0, 0.0, 0.0)),
    "JointModelRY": (REVOLUTE, (0.0, 1.0, 0.0)),
    "JointModelRZ": (REVOLUTE, (0.0, 0.0, 1.0)),
    "JointModelRevoluteUnaligned": (REVOLUTE, None),
    "JointModelPX": (PRISMATIC, (1.0, 0.0, 0.0)),
    "JointModelPY": (PRISMATIC, (0.0, 1.0, 0.0)),
    "JointModelPZ": (PRISMATIC, (0.0, 0.0, 1.0)),
    "JointModelPrismaticUnaligned": (PRISMATIC, None),
    # continuous joints (revolute without limits): two coordinates (cos, sin), one velocity
    "JointModelRUBX": (REVOLUTE, (1.0, 0.0, 0.0)),
    "JointModelRUBY": (REVOLUTE, (0.0, 1.0, 0.0)),
    "JointModelRUBZ": (REVOLUTE, (0.0, 0.0, 1.0)),
    "JointModelRevoluteUnboundedUnaligned": (REVOLUTE, None),
}


def from_pinocchio(model, tool_frame: str | None = None, *, physical: bool = True) -> Chain:
    """Build a chain from a fixed-base Pinocchio model of revolute/prismatic joints.

    Continuous joints (Pinocchio's unbounded revolute joints, coordinates
    (cos q, sin q)) become revolute joints without position limits. A whole
    robot with other joints (wheels, a floating base, grippers) is cut to
    the joints to calibrate first (:func:`reduced_model`).

    ``tool_frame`` names a frame of the model; the default is the
    model's last frame. Body and operational frames other than the link
    frames are kept in :attr:`frames`. Link inertias that no rigid body has
    are refused (:func:`workbench.chain.check_inertias`) unless ``physical``
    is False (for reading back an identified model that only has to
    reproduce torques).
    """
    n = model.njoints - 1
    kinds, axes = [], []
    for jid in range(1, model.njoints):
        joint = model.joints[jid]
        kind = _JOINTS.get(joint.shortname())
        if kind is None or joint.nv != 1:
            raise WorkbenchError(
                f"joint '{model.names[jid]}' is a {_describe(joint)} joint; a chain has "
                "revolute, continuous and prismatic joints only: name the joints to "
                "calibrate ([model] joints in a log description), the others are locked"
            )
        axis = np.array(kind[1] if kind[1] is not None else joint.extract().axis, dtype=float)
        kinds.append(kind[0])
        axes.append(axis / np.linalg.norm(axis))
    oMi, oMf = neutral_placements(model)  # no pinocchio.Data: its nv^3 tensors at 1,000 joints
    M = oMi[1:].reshape(n, 4, 4)
    G_local = np.array(
        [lie.pinocchio_matrix(model.inertias[j].matrix()) for j in range(1, model.njoints)]
    ).reshape(n, 6, 6)
    Ad_inv = lie.Ad(lie.inverse(M))
    G = np.swapaxes(Ad_inv, -1, -2) @ G_local @ Ad_inv

    if model.nframes == 0:
        raise WorkbenchError("the Pinocchio model has no frames")
    tool_id = model.nframes - 1 if tool_frame is None else _frame_id(model, tool_frame)
    tool = model.frames[tool_id]
    body = pin.FrameType.BODY
    base_id = next(
        (fid for fid, f in enumerate(model.frames) if f.type == body and f.parentJoint == 0),
        None,
    )
    link_names = [f"link_{j}" for j in range(1, model.njoints)]
    named = set() if base_id is None else {base_id}
    for fid, frame in enumerate(model.frames):
        j = frame.parentJoint
        if (
            frame.type == body
            and j > 0
            and link_names[j - 1] == f"link_{j}"
            and np.allclose(frame.placement.homogeneous, np.eye(4), atol=1e-12)
        ):
            link_names[j - 1] = frame.name
            named.add(fid)
    frames = []
    for fid, frame in enumerate(model.frames):
        if fid in named or frame.type not in (body, pin.FrameType.OP_FRAME):
            continue
        parent_id = frame.parentFrame
        joint_name = None
        if model.frames[parent_id].type == pin.FrameType.FIXED_JOINT:
            joint_name = model.frames[parent_id].name
            parent_id = model.frames[parent_id].parentFrame
        parent = model.frames[parent_id]
        attached = parent.type in (body, pin.FrameType.OP_FRAME) and parent_id not in named
        placement = oMf[fid].copy()
        attached_to = parent.name if attached else None
        link = frame.parentJoint - 1
        frames.append(Frame(frame.name, link, placement, joint_name, attached_to))
    own_link_frame = Frame(tool.name, -1, np.eye(4))
    tool_entry = next((f for f in frames if f.name == tool.name), own_link_frame)
    frames = [f for f in frames if f is not tool_entry]
    base_name = "base_link" if base_id is None else model.frames[base_id].name
    chain = Chain(
        joint_names=tuple(model.names[1:]),
        link_names=tuple(link_names),
        parents=np.array([model.parents[j] - 1 for j in range(1, model.njoints)]),
        joint_kinds=tuple(kinds),
        axes=np.array(axes).reshape(n, 3),
        joint_frames=M,
        inertias=G,
        tool_name=tool.name,
        tool_joint_name=tool_entry.joint_name,
        tool_attached_to=tool_entry.attached_to,
        tool_parent=tool.parentJoint - 1,
        tool_frame=oMf[tool_id].copy(),
        gravity=np.array(model.gravity.linear),
        **_limits(model),
        frames=tuple(frames),
        base_name=base_name,
        name=model.name or "robot",
    )
    if physical:
        check_inertias(chain, f"model '{chain.name}'")
    return chain


def _limits(model) -> dict[str, Array]:
    """Position, velocity and effort limits per joint; none in position for continuous joints."""
    iq = np.array([model.idx_qs[j] for j in range(1, model.njoints)], dtype=int)
    iv = np.array([model.idx_vs[j] for j in range(1, model.njoints)], dtype=int)
    bounded = np.array([model.nqs[j] == 1 for j in range(1, model.njoints)], dtype=bool)
    lower = np.where(bounded, np.asarray(model.lowerPositionLimit)[iq], -np.inf)
    upper = np.where(bounded, np.asarray(model.upperPositionLimit)[iq], np.inf)
    return {
        "lower": lower,
        "upper": upper,
        "velocity_limit": np.asarray(model.velocityLimit)[iv],
        "effort_limit": np.asarray(model.effortLimit)[iv],
    }


def _describe(joint) -> str:
    names = {
        "JointModelFreeFlyer": "floating (free-flyer)",
        "JointModelPlanar": "planar",
        "JointModelSpherical": "spherical",
        "JointModelSphericalZYX": "spherical",
        "JointModelTranslation": "translation",
    }
    return names.get(joint.shortname(), joint.shortname())


def from_urdf(cls, path: str | os.PathLike, tool_frame: str | None = None) -> Chain:
    """Load a fixed-base URDF through Pinocchio (see :meth:`from_pinocchio`)."""
    return cls.from_pinocchio(load_urdf_model(path), tool_frame=tool_frame)


def to_pinocchio(chain: Chain):
    """An equivalent Pinocchio model (same joint types, names and frames), a new one per call."""
    model = pin.Model()
    model.name = chain.name
    model.gravity = pin.Motion(np.concatenate([chain.gravity, np.zeros(3)]))
    base_frame = model.addFrame(
        pin.Frame(chain.base_name, 0, 0, pin.SE3.Identity(), pin.FrameType.BODY)
    )
    placements = chain.relative_placements()
    local_phi = inertia.phi_from_matrix(chain.local_inertias())
    body_frames = []
    for i in range(chain.n):
        parent_frame = base_frame if chain.parents[i] < 0 else body_frames[chain.parents[i]]
        jid = model.addJoint(
            int(chain.parents[i]) + 1,
            _pinocchio_joint(chain.joint_kinds[i], chain.axes[i]),
            pin.SE3(placements[i]),
            chain.joint_names[i],
            np.array([chain.effort_limit[i]]),
            np.array([chain.velocity_limit[i]]),
            np.array([chain.lower[i]]),
            np.array([chain.upper[i]]),
        )
        body = (  # a massless link (no centre of mass) keeps its rotational inertia
            pin.Inertia.FromDynamicParameters(inertia.phi_to_pinocchio(local_phi[i]))
            if local_phi[i, 0] > 0.0
            else pin.Inertia(0.0, np.zeros(3), inertia.rotational_inertia(local_phi[i]))
        )
        model.appendBodyToJoint(jid, body, pin.SE3.Identity())
        joint_frame = model.addJointFrame(jid, parent_frame)
        body_frames.append(
            model.addBodyFrame(chain.link_names[i], jid, pin.SE3.Identity(), joint_frame)
        )
    for frame in chain.attached_frames:
        jid = frame.parent + 1
        if frame.attached_to is not None:
            parent_frame = model.getFrameId(frame.attached_to)
        else:
            parent_frame = base_frame if frame.parent < 0 else body_frames[frame.parent]
        placement = pin.SE3(chain.relative_to_link(frame))
        model.addFrame(pin.Frame(frame.name, jid, parent_frame, placement, pin.FrameType.OP_FRAME))
    return model


@functools.lru_cache(maxsize=64)
def shared_model(chain: Chain):
    """:func:`to_pinocchio` built once per chain object, for algorithms that only read it."""
    return to_pinocchio(chain)


def load_urdf_model(path: str | os.PathLike):
    """A fixed-base Pinocchio model from a URDF file, with errors that name the file.

    The file is checked first (:func:`workbench.models.urdf_check.check_urdf`: finite
    numbers, one tree, a bounded joint count) and urdfdom's console output is
    captured, not printed.
    """
    check_urdf(path)
    return parse_quietly(path, lambda: pin.buildModelFromUrdf(str(path)))


def _between_kept(model, names: Sequence[str], kept: set[str]) -> list[tuple[str, str, str]]:
    """The joints of ``names`` with a ``kept`` joint above and one below them in the tree:
    (joint, the nearest kept joint above, the nearest below)."""
    kept_ids = [model.getJointId(name) for name in kept]
    out = []
    for name in names:
        jid = model.getJointId(name)
        above = next((a for a in _ancestors(model, jid) if model.names[a] in kept), None)
        under = [k for k in kept_ids if jid in _ancestors(model, k)]
        below = min(under, key=lambda k: len(_ancestors(model, k)), default=None)
        if above is not None and below is not None:
            out.append((name, model.names[above], model.names[below]))
    return out


def _ancestors(model, jid: int) -> list[int]:
    """The joints above joint ``jid``, nearest first (the universe, 0, left out)."""
    out = []
    while model.parents[jid] > 0:
        jid = model.parents[jid]
        out.append(jid)
    return out


def _frame_id(model, name: str) -> int:
    if not model.existFrame(name):
        names = ", ".join(f.name for f in model.frames)
        raise WorkbenchError(f"unknown tool frame '{name}'; frames are {names}")
    return model.getFrameId(name)


def _pinocchio_joint(kind: str, axis: Array):
    for name, (k, ax) in _JOINTS.items():
        if k == kind and ax is not None and np.array_equal(axis, ax):
            return getattr(pin, name)()
    if kind == REVOLUTE:
        return pin.JointModelRevoluteUnaligned(np.asarray(axis, dtype=float))
    return pin.JointModelPrismaticUnaligned(np.asarray(axis, dtype=float))


def reduced_model(
    model,
    joints: Sequence[str] | None,
    locked: Mapping[str, float] | None = None,
    mimic: Mapping[str, tuple[str, float, float]] | None = None,
    source: str = "model",
    held: Mapping[str, float] | None = None,
):
    """A whole robot cut to the joints to calibrate: (reduced model, locked values).

    ``joints`` names the joints that stay (None: every joint, which must
    then all be revolute, continuous or prismatic); every other movable
    joint is locked, as :func:`pinocchio.buildReducedModel` does, at the
    value ``locked`` gives it (rad or m), else where a log ``held`` it still
    (joints the model does not have are ignored there), else at ``multiplier * value +
    offset`` of the joint it mimics when that one is locked (``mimic``:
    joint -> (mimicked joint, multiplier, offset), from the URDF), else at
    zero (the neutral configuration of floating and planar joints). Link
    inertias and frames of a locked subtree are carried by the joint before
    it. ``source`` names the model in errors.
    """
    locked = dict(locked or {})
    mimic = dict(mimic or {})
    movable = list(model.names[1:])
    if joints is None:
        unsupported = [
            model.names[j]
            for j in range(1, model.njoints)
            if model.joints[j].shortname() not in _JOINTS and model.names[j] not in locked
        ]
        if unsupported:
            raise WorkbenchError(
                f"{source}: joints {', '.join(unsupported)} are neither revolute, continuous nor "
                "prismatic: name the joints to calibrate ([model] joints = [...] in the log "
                "description, or columns for them), the other joints are locked"
            )
        joints = [n for n in movable if n not in locked]
    if not joints and movable:
        raise WorkbenchError(
            f"{source}: every movable joint is locked ([model] joints is empty or "
            "[model.locked] names them all): no joint is left to move"
        )
    unknown = [j for j in joints if j not in movable]
    if unknown:
        raise WorkbenchError(
            f"{source}: no movable joint named {', '.join(map(repr, unknown))}; its movable "
            f"joints are {', '.join(movable)}"
        )
    repeated = sorted({j for j in joints if list(joints).count(j) > 1})
    if repeated:
        raise WorkbenchError(f"{source}: joints {', '.join(repeated)} named twice")
    both = [j for j in joints if j in locked]
    if both:
        raise WorkbenchError(
            f"{source}: joints {', '.join(both)} are both calibrated and locked ([model.locked])"
        )
    chosen = set(joints or ())
    held = {j: v for j, v in (held or {}).items() if j in movable and j not in chosen}
    stray = [j for j in locked if j not in movable]
    if stray:
        raise WorkbenchError(
            f"[model.locked] names {', '.join(map(repr, stray))}, not a movable joint of {source}; "
            f"its movable joints are {', '.join(movable)}"
        )
    kept = set(joints)
    followers = [
        name
        for name in movable
        if name in mimic and mimic[name][0] in kept and name not in kept | set(locked) | set(held)
    ]
    if followers:
        name = followers[0]
        other, multiplier, offset = mimic[name]
        raise WorkbenchError(
            f"{source}: joint '{name}' mimics the calibrated joint '{other}' (multiplier "
            f"{multiplier:g}, offset {offset:g}); the calibrated chain cannot hold that relation "
            f"and would lock '{name}' at 0: calibrate without '{other}', lock '{name}' "
            f"([model.locked]) or calibrate both from their logged positions"
            + (f" (also: {', '.join(followers[1:])})" if len(followers) > 1 else "")
        )
    values, unset = {}, []
    for name in movable:
        if name in kept:
            continue
        if name in locked:
            values[name] = float(locked[name])
        elif name in held:
            values[name] = float(held[name])
        elif name in mimic and mimic[name][0] in locked:
            other, multiplier, offset = mimic[name]
            values[name] = multiplier * float(locked[other]) + offset
        else:
            values[name] = 0.0
            unset.append(name)
    for name, above, below in _between_kept(model, unset, kept):
        raise WorkbenchError(
            f"{source}: joint '{name}' lies between the joints to calibrate '{above}' and "
            f"'{below}', and nothing gives its value (no q_{name} column, not in [model] "
            f"joints): it would be locked at 0 inside the chain; log it, or lock it where it "
            f"stood ([model.locked] {name} = VALUE in a log description)"
        )
    q = pin.neutral(model)
    for name, value in values.items():
        jid = model.getJointId(name)
        joint, iq = model.joints[jid], model.idx_qs[jid]
        if joint.nq == 1:
            lower, upper = model.lowerPositionLimit[iq], model.upperPositionLimit[iq]
            if name in locked and not lower - 1e-9 <= value <= upper + 1e-9:
                raise WorkbenchError(
                    f"[model.locked] {name} = {value:g} is outside the joint's limits "
                    f"[{lower:g}, {upper:g}] in {source}"
                )
            q[iq] = value
        elif joint.shortname() in _JOINTS:  # continuous: (cos, sin)
            q[iq : iq + 2] = np.cos(value), np.sin(value)
        elif value != 0.0:
            raise WorkbenchError(
                f"[model.locked] {name} = {value:g}: a {_describe(joint)} joint is locked at its "
                "neutral configuration only (give no value)"
            )
    if not np.all(np.isfinite(q)):
        raise WorkbenchError(f"{source}: a locked joint value is not finite")
    locked_ids = [model.getJointId(name) for name in values]
    reduced = pin.buildReducedModel(model, locked_ids, q) if locked_ids else model
    return reduced, values
