"""Closed chains as MuJoCo MJCF models: the spanning tree plus equality constraints.

The spanning tree is written by :func:`workbench.models.mjcf.mjcf_element` (bodies,
joints, inertias, drive terms, a site per attached frame) with motors (gear 1)
on the actuated joints only; each closure of the closure file becomes
MuJoCo equality constraints between sites on its two frames A and B:

============  ==========================================================
closure       MuJoCo
============  ==========================================================
``point``     ``connect`` of the sites of A and B (origins coincide)
``weld``      ``weld`` of the sites of A and B (site semantics: the two
              frames coincide, no relpose needed)
``revolute``  two ``connect``: the origins, and the points ``AXIS_POINT``
              along z of A and of B (coincident origins and z axes leave
              the rotation about z free; a weld would lock it)
``planar``    ``connect`` of A with the point of B's z axis at A's height
              in the home configuration: a planar loop keeps that height,
              so the one row MuJoCo adds is redundant, not wrong
``rotation``  ``weld`` of A and B when their origins coincide in the home
              configuration (every shipped rotation closure: the
              spherical five-bar's axes all meet at its centre); MuJoCo
              has no orientation-only equality, so other rotation
              closures are refused
============  ==========================================================

MuJoCo refuses moving bodies without mass (:mod:`workbench.models.mjcf`). A cut
revolute joint is a massless link closed by a ``rotation`` or ``weld``
closure (the spherical five-bar's ``link_5``): it is folded, i.e. the
massless link and its joint are left out and the closure becomes the joint
it stands for, a hinge between frame A's link and the massless link's
parent about the joint's axis, two ``connect`` at points of that axis
placed from the home configuration. The motion is the same (the massless
link carries no inertia and its joint no torque). Massless links between
two joints are folded by :mod:`workbench.models.mjcf`; any other massless link gets
MuJoCo's ``boundmass`` there, a valid file whose tiny body makes MuJoCo's
closure at it soft (its constraint weight scales with the inverse mass).

MuJoCo's constraints are soft (a spring-damper in constraint space): the
file sets stiff ones (``SOLREF``, ``SOLIMP``) and a time step and
integrator (``TIMESTEP``, RK4) at which MuJoCo's simulation of the
five-bar's planned reach stays within 1e-5 rad of the project's
(``tests/test_mjcf.py``); MuJoCo's defaults (0.02 s time constant) give
errors near 1e-3 rad.

The home configuration (the closure file's, closed by
:func:`~workbench.closed_chains.kinematics.solve_passive`) is written as
the keyframe ``home``.
"""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from workbench import lie
from workbench.chain import REVOLUTE, Chain
from workbench.closed_chains.kinematics import solve_passive
from workbench.closed_chains.model import ClosedChain, Closure
from workbench.dynamics.kinematics import link_motion
from workbench.errors import WorkbenchError
from workbench.io import atomic_write_text
from workbench.lie import Array
from workbench.models import mjcf as tree_mjcf
from workbench.models.mjcf import Coupling, Mesh, set_pose

# MuJoCo's equality constraints are soft: stiff ones (time constant SOLREF[0] s, impedance
# SOLIMP) follow the project's rigid closures; MuJoCo needs timestep <= SOLREF[0] / 2
SOLREF = (0.001, 1.0)
SOLIMP = (0.99, 0.999, 0.001, 0.5, 2.0)
TIMESTEP = 0.0002
AXIS_POINT = 0.1  # m: distance of the second connect along a revolute closure's (or fold's) axis
# origins closer than this (m) coincide for the rotation and planar constructions
COINCIDENT = 1e-9


def _poses(tree: Chain, q: Array) -> Array:
    """Displacements T (n, 4, 4) of the links from q = 0 at the configuration q (n,)."""
    zero = np.zeros((1, tree.n))
    return link_motion(tree, q[None], zero, zero)[0][0]


def _pose(tree: Chain, T: Array, name: str) -> Array:
    """Pose in the base frame of the frame ``name`` at the configuration of the displacements T."""
    link = tree.parent_of(name)
    return (np.eye(4) if link < 0 else T[link]) @ tree.placement_of(name)


def _folds(model: ClosedChain) -> dict[int, list[int]]:
    """Massless leaf links on a revolute joint closed only by rotation/weld closures, and those."""
    tree = model.tree
    folds: dict[int, list[int]] = {}
    for link in range(tree.n):
        on_link = [
            k for k, c in enumerate(model.closures)
            if link in {tree.parent_of(f) for f in c.frames}
        ]  # fmt: skip
        if (
            tree.phi[link, 0] == 0
            and tree.joint_kinds[link] == REVOLUTE
            and not np.any(tree.parents == link)
            and on_link
            and all(model.closures[k].kind in ("rotation", "weld") for k in on_link)
            and tree.joint_names[link] not in model.actuated
        ):
            folds[link] = on_link
    return folds


def _without(tree: Chain, links: Sequence[int]) -> Chain:
    """The tree without the leaf links ``links`` (their joints and the frames on them)."""
    keep = np.setdiff1d(np.arange(tree.n), links)
    index = -np.ones(tree.n + 1, dtype=np.int64)  # old link (+1 for the base) -> new
    index[keep + 1] = np.arange(keep.size)
    frames = tuple(
        replace(f, parent=int(index[f.parent + 1])) for f in tree.frames if f.parent not in links
    )
    if tree.tool_parent in links:
        raise WorkbenchError(f"the tool '{tree.tool_name}' hangs from a massless cut link")
    return replace(
        tree,
        joint_names=tuple(tree.joint_names[i] for i in keep),
        link_names=tuple(tree.link_names[i] for i in keep),
        parents=index[tree.parents[keep] + 1],
        joint_kinds=tuple(tree.joint_kinds[i] for i in keep),
        axes=tree.axes[keep],
        joint_frames=tree.joint_frames[keep],
        inertias=tree.inertias[keep],
        tool_parent=int(index[tree.tool_parent + 1]),
        lower=tree.lower[keep],
        upper=tree.upper[keep],
        velocity_limit=tree.velocity_limit[keep],
        effort_limit=tree.effort_limit[keep],
        frames=frames,
    )


class _Sites:
    """Sites added to the bodies of an MJCF element, named after the closure they serve."""

    def __init__(self, root: ET.Element, tree: Chain):
        self.bodies = {b.get("name"): b for b in root.iter("body")}
        self.world = root.find("worldbody")
        self.existing = {s.get("name") for s in root.iter("site")}
        self.tree = tree

    def on(self, link: int, name: str, placement: Array) -> str:
        """A site on ``link`` (-1: the base) at ``placement`` (base frame at q = 0)."""
        if link < 0:
            holder, local = self.world, placement
        else:
            holder = self.bodies[self.tree.link_names[link]]
            local = lie.inverse(self.tree.joint_frames[link]) @ placement
        if name in self.existing:
            raise WorkbenchError(f"site name '{name}' is already taken in the model")
        self.existing.add(name)
        set_pose(ET.SubElement(holder, "site", name=name), local)
        return name

    def frame(self, name: str, offset: Array | None = None, label: str = "") -> str:
        """The site of frame ``name`` (its own for an attached frame), or one offset from it."""
        if offset is None and name in self.existing:
            return name
        placement = self.tree.placement_of(name)
        if offset is not None:
            placement = placement @ offset
        return self.on(self.tree.parent_of(name), f"{name}{label}", placement)


def _translation(z: float) -> Array:
    T = np.eye(4)
    T[2, 3] = z
    return T


def mjcf_element(
    model: ClosedChain,
    *,
    armature: ArrayLike | None = None,
    damping: ArrayLike | None = None,
    frictionloss: ArrayLike | None = None,
    couplings: Sequence[Coupling] = (),
    meshes: Mapping[str, Sequence[Mesh]] | None = None,
    name: str | None = None,
    timestep: float = TIMESTEP,
    integrator: str = "RK4",
) -> ET.Element:
    """The ``<mujoco>`` element of a closed chain (module docstring).

    Arguments as in :func:`workbench.models.mjcf.mjcf_element`, per tree joint
    (those of folded joints are dropped); the motors are the actuated joints.
    """
    tree = model.tree
    home = solve_passive(model, model.home[model.active], guess=model.home)
    T_home = _poses(tree, home)
    folds = _folds(model)
    folded = sorted(folds)
    keep = np.setdiff1d(np.arange(tree.n), folded)
    reduced = _without(tree, folded) if folded else tree

    def per_joint(values: ArrayLike | None, what: str = "per-joint values") -> Array | None:
        if values is None:
            return None
        values = np.asarray(values, dtype=float)
        if values.shape != (tree.n,):
            raise WorkbenchError(
                f"{what} has shape {values.shape}; expected ({tree.n},), one per tree joint"
            )
        return values[keep]

    root = tree_mjcf.mjcf_element(
        reduced,
        armature=per_joint(armature, "armature"),
        damping=per_joint(damping, "damping"),
        frictionloss=per_joint(frictionloss, "frictionloss"),
        couplings=[
            replace(c, coefficients=per_joint(c.coefficients, f"coupling '{c.name}'"))
            for c in couplings
        ],
        meshes={k: v for k, v in (meshes or {}).items() if tree.parent_of(k) not in folded},
        actuated=model.actuated,
        name=name or model.name,
        timestep=timestep,
        integrator=integrator,
    )
    sites = _Sites(root, reduced)
    equality = ET.Element("equality")
    folded_closures = {k for ks in folds.values() for k in ks}
    for k, closure in enumerate(model.closures):
        if k not in folded_closures:
            _closure(equality, sites, closure, tree, T_home)
    for link, closures in folds.items():
        for k in closures:
            _folded_hinge(equality, sites, model.closures[k], link, tree, T_home, keep)
    position = [i for i, child in enumerate(root) if child.tag in ("tendon", "actuator")]
    for constraint in equality:
        constraint.set("solref", " ".join(map(repr, SOLREF)))
        constraint.set("solimp", " ".join(map(repr, SOLIMP)))
    root.insert(position[0] if position else len(root), equality)
    keyframe = ET.SubElement(root, "keyframe")
    ET.SubElement(keyframe, "key", name="home", qpos=_qpos(root, reduced, home[keep]))
    return root


def _qpos(root: ET.Element, tree: Chain, q: Array) -> str:
    """q (tree order) in MuJoCo's qpos order: the joints in the order the file defines them."""
    order = [j.get("name") for j in root.iter("joint")]
    return " ".join(repr(float(q[tree.joint_index(j)])) for j in order)


def _closure(
    equality: ET.Element, sites: _Sites, closure: Closure, tree: Chain, T_home: Array
) -> None:
    """The equality constraints of one closure (module docstring)."""
    a, b = closure.frames
    A, B = _pose(tree, T_home, a), _pose(tree, T_home, b)
    X = lie.inverse(B) @ A  # A in B at home
    kind = closure.kind
    if kind == "rotation" and np.linalg.norm(X[:3, 3]) > COINCIDENT:
        raise WorkbenchError(
            f"closure '{closure.name}' (rotation): the origins of {a} and {b} are "
            f"{np.linalg.norm(X[:3, 3]):.3g} m apart at home; MuJoCo has no orientation-only "
            "equality and a weld would also join the origins"
        )
    if kind in ("weld", "rotation"):
        ET.SubElement(
            equality, "weld", name=closure.name, site1=sites.frame(a), site2=sites.frame(b)
        )
    elif kind == "point":
        ET.SubElement(
            equality, "connect", name=closure.name, site1=sites.frame(a), site2=sites.frame(b)
        )
    elif kind == "planar":
        lift = _translation(X[2, 3])
        ET.SubElement(
            equality, "connect", name=closure.name,
            site1=sites.frame(a), site2=sites.frame(b, lift, "_at_height"),
        )  # fmt: skip
    elif kind == "revolute":
        ET.SubElement(
            equality, "connect", name=closure.name, site1=sites.frame(a), site2=sites.frame(b)
        )
        axis = _translation(AXIS_POINT)
        ET.SubElement(
            equality, "connect", name=f"{closure.name}_axis",
            site1=sites.frame(a, axis, "_axis"), site2=sites.frame(b, axis, "_axis"),
        )  # fmt: skip


def _folded_hinge(
    equality: ET.Element, sites: _Sites, closure: Closure, link: int, tree: Chain,
    T_home: Array, keep: Array,
) -> None:  # fmt: skip
    """A rotation/weld closure on the massless cut link ``link`` as the hinge it stands for."""
    a, b = closure.frames
    if tree.parent_of(a) == link:
        a, b = b, a
    A, B = _pose(tree, T_home, a), _pose(tree, T_home, b)
    if closure.kind == "rotation" and np.linalg.norm(A[:3, 3] - B[:3, 3]) > COINCIDENT:
        raise WorkbenchError(
            f"closure '{closure.name}' (rotation) on the massless link "
            f"'{tree.link_names[link]}': its origins are apart at home; MuJoCo cannot write it"
        )
    parent = int(tree.parents[link])
    T_parent = np.eye(4) if parent < 0 else T_home[parent]
    twist = lie.Ad(T_parent) @ tree.twists[link]  # the joint's axis at home
    w, v = twist[:3], twist[3:]
    on_axis = np.cross(w, v)  # the point of the axis nearest the base origin
    foot = on_axis + np.dot(B[:3, 3] - on_axis, w) * w  # B's origin projected on the axis
    link_a = tree.parent_of(a)
    T_a = np.eye(4) if link_a < 0 else T_home[link_a]
    new = {int(old): k for k, old in enumerate(keep)}
    for k, point in enumerate((foot, foot + AXIS_POINT * w)):
        world = np.eye(4)
        world[:3, 3] = point
        names = []
        for holder, T in ((link_a, T_a), (parent, T_parent)):
            placement = lie.inverse(T) @ world  # the point at q = 0 on that link
            label = tree.base_name if holder < 0 else tree.link_names[holder]
            site = f"{closure.name}_{label}_{k}"
            names.append(sites.on(-1 if holder < 0 else new[holder], site, placement))
        ET.SubElement(
            equality, "connect", name=f"{closure.name}_{k}", site1=names[0], site2=names[1]
        )


def mjcf_string(model: ClosedChain, **options: Any) -> str:
    """The MJCF text of a closed chain (options as in :func:`mjcf_element`)."""
    return tree_mjcf.text(mjcf_element(model, **options))


def write_mjcf(model: ClosedChain, path: str | os.PathLike, **options: Any) -> Path:
    """Write a closed chain to ``path`` as MJCF, atomically."""
    return atomic_write_text(path, mjcf_string(model, **options))
