"""Kinematic trees in product-of-exponentials form ([Kwon] §1).

A :class:`Chain` stores a fixed-base tree of 1-DoF revolute or prismatic
joints in the *zero-reference normal form* of [Kwon]: every link frame
coincides with the base frame at q = 0 (all M_i = I), so that the pose of
link i is ``T_i(q) = T_parent(q) exp([A_i] q_i)`` with the joint twist
``A_i = (omega, v)`` and the spatial inertia ``G_i`` both expressed in the
base frame at q = 0.

Besides the normal form, the chain remembers where each joint's own frame
sits at q = 0 (``joint_frames``, the M_i of the URDF/Pinocchio description)
and the joint axis in that frame, which is what
:func:`workbench.models.pinocchio_conversion.to_pinocchio` and
:func:`workbench.models.urdf.write_urdf` need to write a model back with the same
joint types. Chains come from URDF files (:func:`workbench.models.urdf.load_urdf`),
Pinocchio models (:func:`workbench.models.pinocchio_conversion.from_pinocchio`) or
names (:func:`workbench.models.load`).

Joint twists are changed with ``eta`` ([Kwon] eq. 6, docs/conventions.md
"Conventions"): ``eta`` has 6(n+1) entries, one (omega, v) block per joint
in joint order and one for the tool frame, all acting in the base frame at
q = 0: ``A_i <- Ad_{exp([eta_i])} A_i`` (the joint frame moves to
``exp([eta_i]) M_i``), inertias and other frames stay where they are at
q = 0, and ``M_tool <- exp([eta_tool]) M_tool``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import ArrayLike

from workbench import inertia, lie
from workbench.arrays import as_real_array
from workbench.errors import WorkbenchError
from workbench.lie import Array

REVOLUTE = "revolute"
PRISMATIC = "prismatic"

# check_inertias: a principal moment may fall below zero by this fraction of the largest
# one (rounding in published models) plus an absolute slack for numerically zero inertias.
INERTIA_RTOL = 1e-3
INERTIA_ATOL = 1e-9  # kg m^2


@dataclass(frozen=True)
class Frame:
    """A frame rigidly attached to a link (or to the base when ``parent == -1``).

    ``placement`` is its pose in the base frame at q = 0; ``joint_name`` is
    the name of the fixed joint that carries it in a URDF (if any) and
    ``attached_to`` the frame it hangs from there (None: the link itself).
    """

    name: str
    parent: int
    placement: Array
    joint_name: str | None = None
    attached_to: str | None = None


@dataclass(frozen=True)
class Reduction:
    """Where a chain cut from a whole robot comes from: its URDF and the locked joints.

    ``locked`` holds (joint, value) pairs, the value in the joint's own unit
    (rad or m); every movable joint of the URDF that is not a joint of the
    chain is locked, as Pinocchio's reduced models do
    (:func:`workbench.models.pinocchio_conversion.reduced_model`).
    """

    urdf: str
    locked: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, eq=False)
class Chain:
    """A fixed-base tree of revolute/prismatic joints in normal form (see module docstring).

    Arrays are indexed by joint; joint i moves link i, whose parent link is
    ``parents[i]`` (-1 for the base) with ``parents[i] < i``.
    """

    joint_names: tuple[str, ...]
    link_names: tuple[str, ...]
    parents: np.ndarray
    joint_kinds: tuple[str, ...]
    axes: Array  # (n, 3) unit joint axis in the joint's own frame
    joint_frames: Array  # (n, 4, 4) joint frames in the base frame at q = 0 (M_i)
    inertias: Array  # (n, 6, 6) G_i in the base frame at q = 0, (omega, v) order
    tool_name: str
    tool_parent: int
    tool_frame: Array  # (4, 4) tool frame in the base frame at q = 0
    gravity: Array = field(default_factory=lambda: np.array([0.0, 0.0, -9.81]))
    lower: Array | None = None
    upper: Array | None = None
    velocity_limit: Array | None = None
    effort_limit: Array | None = None
    frames: tuple[Frame, ...] = ()
    tool_joint_name: str | None = None
    tool_attached_to: str | None = None
    base_name: str = "base_link"
    name: str = "robot"
    reduction: Reduction | None = None  # set for a chain cut from a whole robot

    def __post_init__(self) -> None:
        n = len(self.joint_names)
        parents = np.asarray(self.parents, dtype=np.int64)
        object.__setattr__(self, "parents", parents)
        for attr in ("axes", "joint_frames", "inertias", "tool_frame", "gravity"):
            object.__setattr__(self, attr, np.array(getattr(self, attr), dtype=float))
        shapes = {
            "parents": (parents.shape, (n,)),
            "axes": (self.axes.shape, (n, 3)),
            "joint_frames": (self.joint_frames.shape, (n, 4, 4)),
            "inertias": (self.inertias.shape, (n, 6, 6)),
            "tool_frame": (self.tool_frame.shape, (4, 4)),
            "gravity": (self.gravity.shape, (3,)),
        }
        for what, (got, want) in shapes.items():
            if got != want:
                raise WorkbenchError(f"Chain.{what} has shape {got}; expected {want}")
        if len(self.link_names) != n or len(self.joint_kinds) != n:
            raise WorkbenchError("Chain needs one link name and one joint kind per joint")
        if np.any(parents >= np.arange(n)) or np.any(parents < -1):
            raise WorkbenchError("Chain.parents must satisfy -1 <= parents[i] < i")
        if not -1 <= self.tool_parent < n:
            raise WorkbenchError(f"Chain.tool_parent {self.tool_parent} is not a link index")
        unknown = set(self.joint_kinds) - {REVOLUTE, PRISMATIC}
        if unknown:
            raise WorkbenchError(f"unsupported joint kinds {sorted(unknown)}")
        norms = np.linalg.norm(self.axes, axis=1)
        if np.any(np.abs(norms - 1.0) > 1e-9):
            bad = self.joint_names[int(np.argmax(np.abs(norms - 1.0)))]
            raise WorkbenchError(f"joint '{bad}' has an axis that is not a unit vector")
        for attr, default in (
            ("lower", -np.inf),
            ("upper", np.inf),
            ("velocity_limit", np.inf),
            ("effort_limit", np.inf),
        ):
            value = getattr(self, attr)
            value = np.full(n, default) if value is None else np.array(value, dtype=float)
            if value.shape != (n,):
                raise WorkbenchError(f"Chain.{attr} has shape {value.shape}; expected ({n},)")
            object.__setattr__(self, attr, value)

    # ------------------------------------------------------------------ basics
    @property
    def n(self) -> int:
        """Number of joints."""
        return len(self.joint_names)

    @functools.cached_property
    def twists(self) -> Array:
        """Joint twists A_i (n, 6) in the base frame at q = 0, (omega, v) order."""
        local = np.zeros((self.n, 6))
        revolute = np.array([k == REVOLUTE for k in self.joint_kinds])
        local[revolute, :3] = self.axes[revolute]
        local[~revolute, 3:] = self.axes[~revolute]
        return np.einsum("nij,nj->ni", lie.Ad(self.joint_frames), local)

    @functools.cached_property
    def phi(self) -> Array:
        """Inertial parameters (n, 10) of the links in the base frame at q = 0."""
        return inertia.phi_from_matrix(self.inertias)

    @functools.cached_property
    def ancestors(self) -> np.ndarray:
        """Boolean (n, n): ``ancestors[j, i]`` when joint j is on the path to link i (or j == i)."""
        A = np.zeros((self.n, self.n), dtype=bool)
        for i in range(self.n):
            j = i
            while j >= 0:
                A[j, i] = True
                j = self.parents[j]
        return A

    def joint_index(self, name: str) -> int:
        """Index of the joint called ``name``."""
        try:
            return self.joint_names.index(name)
        except ValueError:
            raise WorkbenchError(
                f"unknown joint '{name}'; joints are {', '.join(self.joint_names)}"
            ) from None

    # ------------------------------------------------------------- eta update
    def with_eta(self, eta: ArrayLike) -> Chain:
        """The chain with twists ``Ad_{exp([eta_i])} A_i`` and tool ``exp([eta_tool]) M_tool``.

        [Kwon] eq. 6. ``eta`` has 6(n+1) entries (see module docstring);
        inertias and attached frames stay where they are at q = 0.
        """
        eta = as_real_array(eta, "eta")
        if eta.shape != (6 * (self.n + 1),):
            raise WorkbenchError(
                f"eta has shape {eta.shape}; expected ({6 * (self.n + 1)},) "
                f"= 6 (n + 1) for n = {self.n} joints"
            )
        if not np.all(np.isfinite(eta)):
            raise WorkbenchError("eta contains NaN or inf")
        with np.errstate(over="ignore", invalid="ignore"):
            X = lie.exp_se3(eta.reshape(self.n + 1, 6))
            moved = replace(
                self,
                joint_frames=X[:-1] @ self.joint_frames,
                tool_frame=X[-1] @ self.tool_frame,
            )
            finite = np.append(
                np.isfinite(moved.joint_frames).all(axis=(1, 2))
                & np.isfinite(moved.twists).all(axis=1),
                np.isfinite(moved.tool_frame).all(),
            )
        if not finite.all():
            k = int(np.argmin(finite))
            name = "the tool frame" if k == self.n else f"joint '{self.joint_names[k]}'"
            raise WorkbenchError(
                f"eta[{6 * k}:{6 * k + 6}] = {eta[6 * k : 6 * k + 6]} moves {name} to "
                "non-finite values; eta is a small change of the twists"
            )
        return moved

    def with_frames_near(self, reference: Chain) -> Chain:
        """The same twists, each joint frame the reference's moved least onto its joint's axis.

        A joint frame is fixed by its twist only up to motions that keep the
        twist (rotation about and, for revolute joints, sliding along the
        axis line). This picks the frame reached from ``reference``'s by the
        smallest rotation taking the reference axis to this one (about their
        common normal) and, for revolute joints, the translation to the point
        of the new axis line nearest the rotated origin; kinematics and
        dynamics do not change, and ``eta`` between the two chains holds only
        twist-changing components. ``reference`` has the same joints.
        """
        local = np.zeros((self.n, 6))
        revolute = np.array([k == REVOLUTE for k in self.joint_kinds])
        local[revolute, :3] = self.axes[revolute]
        local[~revolute, 3:] = self.axes[~revolute]
        reference_axis = np.einsum("nij,nj->ni", reference.joint_frames[:, :3, :3], self.axes)
        A = self.twists
        axis = np.where(revolute[:, None], A[:, :3], A[:, 3:])
        cross = np.cross(reference_axis, axis)
        angle = np.arctan2(np.linalg.norm(cross, axis=1), np.sum(reference_axis * axis, axis=1))
        norm = np.linalg.norm(cross, axis=1, keepdims=True)
        unit = np.divide(cross, norm, out=np.zeros_like(cross), where=norm > 0)
        frames = reference.joint_frames.copy()
        frames[:, :3, :3] = lie.exp_so3(unit * angle[:, None]) @ frames[:, :3, :3]
        origin = frames[:, :3, 3]
        point = np.cross(A[:, :3], A[:, 3:])  # on the axis line: w x v for |w| = 1
        along = np.sum((origin - point) * A[:, :3], axis=1, keepdims=True) * A[:, :3]
        frames[revolute, :3, 3] = (point + along)[revolute]
        return replace(self, joint_frames=frames)

    def local_inertias(self) -> Array:
        """Link inertias (n, 6, 6) in each joint's own frame, (omega, v) order."""
        Ad = lie.Ad(self.joint_frames)
        return np.swapaxes(Ad, -1, -2) @ self.inertias @ Ad

    def relative_placements(self) -> Array:
        """Joint placements (n, 4, 4) relative to the parent joint's frame (URDF joint origins)."""
        parent_frames = np.array(
            [np.eye(4) if p < 0 else self.joint_frames[p] for p in self.parents]
        ).reshape(self.n, 4, 4)
        return lie.inverse(parent_frames) @ self.joint_frames

    def relative_to_link(self, frame: Frame) -> Array:
        """Pose of an attached frame relative to its link's joint frame."""
        if frame.parent < 0:
            return frame.placement
        return lie.inverse(self.joint_frames[frame.parent]) @ frame.placement

    @property
    def attached_frames(self) -> tuple[Frame, ...]:
        """The attached frames and the tool frame, each after the frame it hangs from."""
        tool = Frame(
            self.tool_name, self.tool_parent, self.tool_frame,
            self.tool_joint_name, self.tool_attached_to,
        )  # fmt: skip
        own_link = self.tool_name in self.link_names  # the tool is a link's own frame
        pending, ordered, placed = [*self.frames, *(() if own_link else (tool,))], [], set()
        while pending:
            ready = [f for f in pending if f.attached_to is None or f.attached_to in placed]
            if not ready:
                names = ", ".join(f.name for f in pending)
                raise WorkbenchError(f"frames {names} hang from frames that do not exist")
            ordered += ready
            placed.update(f.name for f in ready)
            done = {id(f) for f in ready}  # by identity: equality compares arrays, slowly
            pending = [f for f in pending if id(f) not in done]
        return tuple(ordered)

    def placement_of(self, name: str) -> Array:
        """Pose at q = 0 (base frame) of a link or attached frame by name."""
        return self._frame(name)[1]

    def parent_of(self, name: str) -> int:
        """Index of the link that carries the frame ``name`` (-1: the base)."""
        return self._frame(name)[0]

    def _frame(self, name: str) -> tuple[int, Array]:
        if name in self.link_names:
            index = self.link_names.index(name)
            return index, self.joint_frames[index]
        for frame in self.attached_frames:
            if frame.name == name:
                return frame.parent, frame.placement
        if name == self.base_name:
            return -1, np.eye(4)
        names = [self.base_name, *self.link_names, *(f.name for f in self.attached_frames)]
        raise WorkbenchError(f"unknown frame '{name}'; the model's frames are {', '.join(names)}")


def check_inertias(chain: Chain, source: str | None = None) -> None:
    """Refuse link inertias that no body has, naming the link (``source``: the model).

    Physically impossible, an error: a mass that is negative, NaN or inf; a
    massless link with a first moment or rotational inertia; a rotational
    inertia about the centre of mass that is not positive semi-definite (a
    principal moment below zero by more than ``INERTIA_RTOL`` of the largest
    plus ``INERTIA_ATOL``), for which accelerations and simulations are
    meaningless.

    Accepted: a link with no mass and no inertia (a URDF without
    ``<inertial>``, a kinematic model, a virtual link between two joints), a
    point mass (zero inertia about its centre of mass), and principal moments
    that violate the triangle inequality (the largest above the sum of the
    other two: no rigid body has them, but the spatial inertia stays positive
    definite, Pinocchio's ``Inertia.Random()`` draws such inertias, published
    models round into them and identified ones often have them; ``workbench
    calibrate --physical`` fits fully consistent ones). Fixed frames carry no
    inertia of their own: Pinocchio adds a fixed body's inertia to its link.
    """
    problems = impossible_inertias(chain)
    if problems:
        prefix = f"{source}: " if source else ""
        raise WorkbenchError(prefix + "; ".join(problems))


def impossible_inertias(chain: Chain) -> list[str]:
    """Every link whose inertia no body has (:func:`check_inertias`), each named with why."""
    phi = chain.phi
    problems = []
    for i, name in enumerate(chain.link_names):
        problem = inertia_problem(phi[i])
        if problem:
            problems.append(
                f"link '{name}' (moved by joint '{chain.joint_names[i]}') has a "
                f"physically impossible inertia: {problem}"
            )
    return problems


def inertia_problem(phi: Array) -> str | None:
    """Why phi (10,) is no body's inertia (see :func:`check_inertias`), or None."""
    mass = float(phi[0])
    if not np.all(np.isfinite(phi)):
        return "NaN or inf"
    if mass < 0:
        return f"mass {mass:.6g} kg is negative"
    if mass == 0:
        if np.any(np.abs(phi[1:]) > INERTIA_ATOL):
            return "no mass but a first moment or rotational inertia"
        return None
    _, _, I_c = inertia.com_from_phi(phi)
    moments = np.linalg.eigvalsh(I_c)  # ascending
    if moments[0] < -(INERTIA_RTOL * abs(moments[-1]) + INERTIA_ATOL):
        listing = ", ".join(f"{m:.4g}" for m in moments)
        return (
            f"principal moments of inertia about the centre of mass ({listing}) kg m^2 "
            "include a negative one"
        )
    return None


def check_chain(chain: object, what: str = "chain") -> None:
    """Raise unless ``chain`` is a :class:`~workbench.chain.Chain` (naming the argument)."""
    if not isinstance(chain, Chain):
        hint = " (load one with wb.load)" if isinstance(chain, str) else ""
        raise WorkbenchError(
            f"{what} must be a workbench Chain; got {type(chain).__name__} {chain!r:.60}{hint}"
        )
