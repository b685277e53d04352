"""Closed-chain mechanisms: a spanning tree, its loop closures and its motors.

A :class:`ClosedChain` is a :class:`~workbench.chain.Chain` (the spanning
tree, read from a URDF in which every loop is cut) plus the closures that
join pairs of its frames again (:mod:`workbench.closed_chains.closures`) and
the names of the actuated joints. Every other tree joint is passive and
follows from the closures. A cut revolute joint is kept in the tree as a
joint to a massless link whose frame is then closed by a ``rotation``,
``point`` or ``revolute`` closure; a cut ball joint is a ``point`` closure
between the two links themselves.

The description is a small TOML file beside the URDF
(:func:`workbench.closed_chains.read`)::

    urdf = "planar_fivebar.urdf"
    actuated = ["joint_1", "joint_4"]
    tool = "tool"                     # frame the reaching task moves
    task = "position"                 # or "pointing" (the tool's z axis)

    [home]                            # a closed configuration (default 0)
    joint_2 = 1.2

    [[closure]]
    name = "elbow"
    type = "revolute"                 # point, rotation, weld, revolute, planar
    frames = ["link_2_tip", "link_3_tip"]

Joint values, eta blocks and inertias keep the tree's joint order; ``eta``
has the tree's layout (6 (n + 1): one block per joint, then the tool) and
moves joint twists, link frames and the tool as ``Chain.with_eta`` does.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from workbench.chain import Chain
from workbench.closed_chains.closures import ROWS
from workbench.closed_chains.loops import Factor, Loop, loop_factors
from workbench.errors import WorkbenchError
from workbench.lie import Array

TASKS = ("pointing", "position")


@dataclass(frozen=True)
class Closure:
    """A loop closure of type ``kind`` between the frames named ``frames`` (A, B)."""

    name: str
    kind: str
    frames: tuple[str, str]

    @property
    def rows(self) -> int:
        return ROWS[self.kind]


@dataclass(frozen=True)
class FrameRef:
    """Where a closure or tool frame sits: its link, its pose at q = 0, its eta block."""

    link: int
    placement: Array
    block: int | None


@dataclass(frozen=True, eq=False)
class ClosedChain:
    """A spanning tree with loop closures and actuated joints (see the module docstring)."""

    tree: Chain
    closures: tuple[Closure, ...]
    actuated: tuple[str, ...]
    home: Array
    task: str = "position"
    name: str = "closed_chain"
    urdf_path: Path | None = None
    source: Path | None = field(default=None, compare=False)
    idle: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for joint in self.actuated + self.idle:
            self.tree.joint_index(joint)  # raises for an unknown joint
        if len(set(self.actuated)) != len(self.actuated) or not self.actuated:
            raise WorkbenchError(f"{self.where}: actuated joints must be distinct and non-empty")
        if set(self.idle) & set(self.actuated) or len(set(self.idle)) != len(self.idle):
            raise WorkbenchError(f"{self.where}: idle joints must be distinct passive joints")
        for closure in self.closures:
            if closure.kind not in ROWS:
                raise WorkbenchError(
                    f"{self.where}: closure '{closure.name}' has type '{closure.kind}'; "
                    f"types are {', '.join(ROWS)}"
                )
            for frame in closure.frames:
                self.tree.parent_of(frame)  # raises naming the model's frames
        if self.task not in TASKS:
            raise WorkbenchError(f"{self.where}: task must be one of {', '.join(TASKS)}")
        if np.shape(self.home) != (self.n,):
            raise WorkbenchError(f"{self.where}: home has shape {np.shape(self.home)}")

    # ------------------------------------------------------------ structure
    @property
    def where(self) -> str:
        return str(self.source) if self.source is not None else self.name

    @property
    def n(self) -> int:
        """Number of tree joints."""
        return self.tree.n

    @functools.cached_property
    def active(self) -> np.ndarray:
        """Indices of the independent coordinates: the actuated joints, then the idle ones.

        Idle joints (``idle``) are the coordinates of the idle motions, the
        motions the closures leave free with the motors still (a rod that
        spins between two ball joints): they are driven by zero force, and
        with the motors they fix every other (passive) joint. Without idle
        motions these are the actuated joints alone.
        """
        return np.array([self.tree.joint_index(j) for j in self.actuated + self.idle])

    @property
    def motor_indices(self) -> np.ndarray:
        """Indices of the actuated joints in the tree's joint order (``active`` without idle)."""
        return self.active[: len(self.actuated)]

    @property
    def idle_indices(self) -> np.ndarray:
        """Indices of the idle joints in the tree's joint order."""
        return self.active[len(self.actuated) :]

    @property
    def coordinate_effort(self) -> Array:
        """Force limits of the independent coordinates: the motors' efforts, 0 for idle joints."""
        return np.concatenate(
            [self.tree.effort_limit[self.motor_indices], np.zeros(len(self.idle))]
        )

    @functools.cached_property
    def passive(self) -> np.ndarray:
        """Indices of the passive joints (every other tree joint), in tree order."""
        return np.setdiff1d(np.arange(self.n), self.active)

    @property
    def n_residuals(self) -> int:
        """Rows of the stacked closure residual (redundant rows included)."""
        return sum(c.rows for c in self.closures)

    @functools.cached_property
    def closure_frames(self) -> tuple[tuple[FrameRef, FrameRef], ...]:
        """The (A, B) frames of every closure, resolved on the tree."""
        return tuple((self.frame(a), self.frame(b)) for a, b in (c.frames for c in self.closures))

    @functools.cached_property
    def loops(self) -> tuple[tuple[tuple[Factor, ...], Array, Array], ...]:
        """Per closure the loop's factors and the placements of frames A and B at q = 0."""
        return tuple(
            (loop_factors(self.tree, A.link, A.block, B.link, B.block), A.placement, B.placement)
            for A, B in self.closure_frames
        )

    @functools.cached_property
    def loop_layouts(self) -> dict[bool, tuple[Loop, ...]]:
        """Per closure its :class:`Loop`, without (False) and with (True) its eta factors."""
        return {
            with_eta: tuple(
                Loop.of(f if with_eta else tuple(x for x in f if x.joint >= 0), A, B, self.n)
                for f, A, B in self.loops
            )
            for with_eta in (False, True)
        }

    @functools.cached_property
    def tool(self) -> FrameRef:
        """The tool frame (the tree's tool, moved by the last eta block)."""
        return FrameRef(self.tree.tool_parent, self.tree.tool_frame, self.n)

    def frame(self, name: str) -> FrameRef:
        """A frame by name: links move with their joint's eta block, attached frames do not."""
        link = self.tree.parent_of(name)
        own = name in self.tree.link_names
        return FrameRef(link, self.tree.placement_of(name), link if own else None)

    @property
    def joint_names(self) -> tuple[str, ...]:
        """The tree's joint names (joint values are in this order)."""
        return self.tree.joint_names

    @property
    def tool_name(self) -> str:
        return self.tree.tool_name

    @functools.cached_property
    def motors(self) -> Chain:
        """The actuated joints alone, each on the base at its home frame (no closures).

        What a motor log has columns for: names, kinds, limits, in the order
        of ``actuated``. For reading and checking logs, not for dynamics.
        """
        i = self.motor_indices
        tree = self.tree
        return replace(
            tree,
            joint_names=self.actuated,
            link_names=tuple(tree.link_names[k] for k in i),
            parents=np.full(len(i), -1),
            joint_kinds=tuple(tree.joint_kinds[k] for k in i),
            axes=tree.axes[i],
            joint_frames=tree.joint_frames[i],
            inertias=tree.inertias[i],
            tool_parent=-1,
            lower=None if tree.lower is None else tree.lower[i],
            upper=None if tree.upper is None else tree.upper[i],
            velocity_limit=None if tree.velocity_limit is None else tree.velocity_limit[i],
            effort_limit=None if tree.effort_limit is None else tree.effort_limit[i],
            frames=(),
        )

    # --------------------------------------------------------------- copies
    def with_tree(self, tree: Chain) -> ClosedChain:
        """The same closures and motors on another tree (same joints and frames)."""
        if tree.joint_names != self.tree.joint_names:
            raise WorkbenchError(f"{self.where}: the new tree has other joints")
        return replace(self, tree=tree)

    def with_eta(self, eta: ArrayLike) -> ClosedChain:
        """Joint twists, link frames and tool moved by ``eta`` (6 (n + 1),), see Chain.with_eta.

        The home configuration is kept; it is a guess, not a promise of
        closure, for the moved mechanism.
        """
        return self.with_tree(self.tree.with_eta(eta))

    def with_inertias(self, inertias: ArrayLike) -> ClosedChain:
        """The same mechanism with other link inertias (n, 6, 6), base frame at q = 0."""
        return self.with_tree(replace(self.tree, inertias=np.asarray(inertias, dtype=float)))

    # ---------------------------------------------------------------- files
    def closure_file_text(self, urdf: str) -> str:
        """This model's closure file (module docstring) for the tree URDF at ``urdf``."""
        lines = [
            f"# {self.name}: closures, motors and task (read by workbench.closed_chains)",
            f'urdf = "{urdf}"',
            "actuated = [" + ", ".join(f'"{j}"' for j in self.actuated) + "]",
            f'tool = "{self.tool_name}"',
            f'task = "{self.task}"',
            "",
            "[home]",
            *(f"{j} = {float(v)!r}" for j, v in zip(self.joint_names, self.home, strict=True)),
        ]
        for c in self.closures:
            lines += ["", "[[closure]]", f'name = "{c.name}"', f'type = "{c.kind}"',
                      f'frames = ["{c.frames[0]}", "{c.frames[1]}"]']  # fmt: skip
        return "\n".join(lines) + "\n"
