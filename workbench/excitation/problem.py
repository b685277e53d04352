"""The excitation problem file (TOML): trajectory, model, limits, design and postures settings.

Every key is optional; the defaults are those of ``problems/excite_dynamic.toml``.
Sections and keys (SI units, angles in rad):

``[trajectory]`` (dynamic, twist)
    ``period`` (s, 10), ``harmonics`` (5), ``collocation`` points per period
    (100), ``sample_rate`` of the written trajectory (Hz, 100), ``periods``
    written (1), ``start``: "free" (default) or the posture at t = 0 (one
    value per joint). Rest (dq = ddq = 0) at the start and end always holds.
``[model]``
    ``joints``: the joints the experiment moves, for a whole robot (wheels, a
    head, hands): every other movable joint is locked at its value in
    ``[model.locked]`` (joint = rad or m), else at zero, as in a log
    description (:func:`model_joints`; default: every joint of the model);
    ``terms``: drive terms of the torque model (["friction"]; see
    ``workbench.identification.drives``); ``friction_speed`` (rad/s, 0.05):
    Coulomb friction is ``tanh(3 dq / friction_speed)`` during the design
    (``sign`` has no derivative); ``noise``: torque noise standard deviation
    (N m, one number or one per joint; default 1 % of each joint's effort
    limit, 1 N m without one); ``inertial`` (twist: also fit inertial
    parameters, false).
``[limits]``
    ``position_margin`` (rad, 0.05) inside the URDF range (ranges wider than
    2 pi are clipped to [-pi, pi]); ``velocity_scale`` and ``torque_scale``
    (1.0): fractions of the URDF velocity and effort limits;
    ``acceleration`` (rad/s^2, 10; one number or one per joint); explicit
    per-joint arrays ``lower``, ``upper``, ``velocity``, ``torque`` override.
``[design]``
    ``criterion``: "logdet" (default) or "condition"; ``max_iterations``
    (300); ``tolerance`` (1e-6, relative change of the criterion at which
    IPOPT may stop); ``starts`` (1) random initial trajectories; ``seed`` (0).
``[postures]`` (kinematic)
    ``count`` (30) postures to select; ``candidates``: a number of random
    postures within the limits (2000) or a CSV file of postures (header
    ``q_<joint>``; relative to the problem file), refused when their information
    would not fit in memory (:func:`workbench.excitation.postures.check_candidates`);
    ``measure``: "position"
    (default) or "pose"; ``device_known`` (true: measurements in the robot
    base frame; false: an unknown camera/tracker frame is calibrated too);
    ``sigma_position`` (m, 1e-4), ``sigma_rotation`` (rad, 1e-3); ``tool``
    frame (default: the model's).
``[output]``
    ``animation`` (true): write the meshcat animation.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workbench.chain import Chain
from workbench.config import Section, check_memory, read_toml
from workbench.errors import WorkbenchError
from workbench.excitation.design import DesignOptions, Limits
from workbench.excitation.postures import check_candidates
from workbench.excitation.trajectory import margin_factor
from workbench.identification.term_names import TERMS
from workbench.lie import Array

KINDS = ("dynamic", "twist", "kinematic")


@dataclass(frozen=True)
class TrajectorySettings:
    period: float = 10.0
    harmonics: int = 5
    collocation: int = 100
    sample_rate: float = 100.0
    periods: int = 1
    start: Array | None = None


@dataclass(frozen=True)
class ModelSettings:
    terms: tuple[str, ...] = ("friction",)
    friction_speed: float = 0.05
    noise: Array | None = None  # (n,) N m; None: 1 % of the effort limits
    inertial: bool = False


@dataclass(frozen=True)
class LimitSettings:
    position_margin: float = 0.05
    velocity_scale: float = 1.0
    torque_scale: float = 1.0
    acceleration: Array | float = 10.0
    lower: Array | None = None
    upper: Array | None = None
    velocity: Array | None = None
    torque: Array | None = None

    def limits(self, chain: Chain, where: str = "[limits]") -> Limits:
        """The joint limits of ``chain`` under these settings (validated, naming ``where``)."""
        n = chain.n
        lower = np.maximum(chain.lower, -np.pi) + self.position_margin
        upper = np.minimum(chain.upper, np.pi) - self.position_margin
        lower = lower if self.lower is None else self.lower
        upper = upper if self.upper is None else self.upper
        velocity = self.velocity_scale * chain.velocity_limit
        velocity = velocity if self.velocity is None else self.velocity
        torque = self.torque_scale * chain.effort_limit
        torque = torque if self.torque is None else self.torque
        acceleration = np.broadcast_to(np.asarray(self.acceleration, dtype=float), (n,)).copy()
        limits = Limits(lower, upper, velocity, acceleration, torque)
        limits.validate(chain.joint_names, where)
        return limits


@dataclass(frozen=True)
class PostureSettings:
    count: int = 30
    candidates: int | Path = 2000
    measure: str = "position"
    device_known: bool = True
    sigma_position: float = 1e-4
    sigma_rotation: float = 1e-3
    tool: str | None = None


@dataclass(frozen=True)
class ExcitationProblem:
    """Everything a problem file sets (module docstring); defaults when there is no file."""

    source: str = "<defaults>"
    trajectory: TrajectorySettings = field(default_factory=TrajectorySettings)
    model: ModelSettings = field(default_factory=ModelSettings)
    limits: LimitSettings = field(default_factory=LimitSettings)
    design: DesignOptions = field(default_factory=DesignOptions)
    postures: PostureSettings = field(default_factory=PostureSettings)
    animation: bool = True

    def noise(self, chain: Chain) -> Array:
        """Torque noise sigma (n,) N m: the file's, else 1 % of each effort limit (else 1 N m)."""
        if self.model.noise is not None:
            return np.broadcast_to(self.model.noise, (chain.n,)).astype(float)
        effort = np.where(np.isfinite(chain.effort_limit), chain.effort_limit, 100.0)
        return 0.01 * effort


# sections that only one kind of experiment reads: a file with them is of that kind
KIND_SECTIONS = {"kinematic": ("postures",), "dynamic or twist": ("trajectory", "model")}


def model_joints(path: str | os.PathLike | None) -> tuple[list[str] | None, dict[str, float]]:
    """A problem file's ``[model] joints`` (None: every joint) and ``[model.locked]`` values,
    for loading the model the rest of the file is read against."""
    if path is None:
        return None, {}
    top = Section(read_toml(Path(path), "problem file"), str(path))
    model = top.section("model")
    table = model.section("locked")
    locked = {name: table.number(name) for name in table.table}
    return (model.strings("joints") if "joints" in model else None), locked


def read_problem(
    path: str | os.PathLike | None, chain: Chain, kind: str | None = None
) -> ExcitationProblem:
    """Read and check a problem file for ``chain`` (None: the defaults).

    With ``kind`` ("dynamic", "twist" or "kinematic"), a file written for the
    other kind of experiment (one with sections only that kind reads,
    :data:`KIND_SECTIONS`) is refused, naming its kind.
    """
    if path is None:
        return ExcitationProblem()
    path = Path(path)
    top = Section(read_toml(path, "problem file"), str(path))
    if kind is not None:
        _check_kind(top, kind)
    n = chain.n

    def per_joint(section: Section, key: str, default, positive: bool = False):
        if key not in section:
            section.number(key, None)  # registers the key
            return default
        value = section.raw(key)
        if isinstance(value, list):
            return section.array(key, shape=(n,), positive=positive)
        return section.number(key, positive=positive)

    s = top.section("trajectory")
    start = None
    if "start" in s:
        raw = s.raw("start")
        if isinstance(raw, str):
            if raw != "free":
                raise WorkbenchError(f'{s.where("start")} = {raw!r} must be "free" or {n} numbers')
        else:
            start = s.array("start", shape=(n,))
    trajectory = TrajectorySettings(
        period=s.number("period", 10.0, positive=True),
        harmonics=s.integer("harmonics", 5, minimum=3),
        collocation=s.integer("collocation", 100, minimum=8),
        sample_rate=s.number("sample_rate", 100.0, positive=True),
        periods=s.integer("periods", 1, minimum=1),
        start=start,
    )
    _check_sizes(s, trajectory, n)
    try:
        margin_factor(trajectory.harmonics, trajectory.collocation)
    except WorkbenchError as exc:
        raise WorkbenchError(f"{s.where('collocation')}: {exc}") from None
    s.done()

    s = top.section("model")
    s.raw("joints", None)  # read by model_joints, before the model was loaded
    s.section("locked")
    noise = per_joint(s, "noise", None, positive=True)
    model = ModelSettings(
        terms=tuple(s.strings("terms", ["friction"], choices=TERMS)),
        friction_speed=s.number("friction_speed", 0.05, positive=True),
        noise=None if noise is None else np.broadcast_to(noise, (n,)).astype(float),
        inertial=s.boolean("inertial", False),
    )
    s.done()

    s = top.section("limits")
    limits = LimitSettings(
        position_margin=s.number("position_margin", 0.05, minimum=0.0),
        velocity_scale=s.number("velocity_scale", 1.0, positive=True),
        torque_scale=s.number("torque_scale", 1.0, positive=True),
        acceleration=per_joint(s, "acceleration", 10.0, positive=True),
        lower=s.array("lower", None, shape=(n,)),
        upper=s.array("upper", None, shape=(n,)),
        velocity=s.array("velocity", None, shape=(n,), positive=True),
        torque=s.array("torque", None, shape=(n,), positive=True),
    )
    s.done()
    limits.limits(chain, f"{path}: [limits]")  # infeasible ranges name the file

    s = top.section("design")
    design = DesignOptions(
        criterion=s.string("criterion", "logdet", choices=("logdet", "condition")),
        collocation=trajectory.collocation,
        max_iterations=s.integer("max_iterations", 300, minimum=1),
        tolerance=s.number("tolerance", 1e-6, positive=True),
        starts=s.integer("starts", 1, minimum=1),
        seed=s.integer("seed", 0, minimum=0),
    )
    s.done()

    s = top.section("postures")
    raw = s.raw("candidates", 2000)
    if isinstance(raw, str):
        candidates: int | Path = (path.parent / raw) if not Path(raw).is_absolute() else Path(raw)
    else:
        candidates = s.integer("candidates", 2000, minimum=1)
    postures = PostureSettings(
        count=s.integer("count", 30, minimum=1),
        candidates=candidates,
        measure=s.string("measure", "position", choices=("position", "pose")),
        device_known=s.boolean("device_known", True),
        sigma_position=s.number("sigma_position", 1e-4, positive=True),
        sigma_rotation=s.number("sigma_rotation", 1e-3, positive=True),
        tool=s.string("tool", None),
    )
    if not isinstance(candidates, Path):
        where = f"{s.where('candidates')} = {candidates}"
        check_candidates(where, candidates, n, postures.measure, postures.device_known)
    s.done()

    s = top.section("output")
    animation = s.boolean("animation", True)
    s.done()
    top.done()
    return ExcitationProblem(str(path), trajectory, model, limits, design, postures, animation)


# memory per collocation point and n^3, and per written sample and joint, measured on the
# iiwa (about 310 KB per point, 6.2 KB per sample), rounded up
POINT_BYTES = 1000
SAMPLE_BYTES = 1024


def _check_sizes(s: Section, trajectory: TrajectorySettings, n: int) -> None:
    """Refuse collocation points and written samples that would not fit in memory."""
    per_point = POINT_BYTES * n**3
    check_memory(
        f"{s.where('collocation')} = {trajectory.collocation}",
        trajectory.collocation * per_point,
        f"{per_point / 2**10:.0f} KiB per point for {n} joints",
    )
    samples = trajectory.period * trajectory.periods * trajectory.sample_rate
    check_memory(
        f"{s.source}: [trajectory] period * periods * sample_rate = {trajectory.period:g} s * "
        f"{trajectory.periods} * {trajectory.sample_rate:g} Hz",
        samples * SAMPLE_BYTES * n,
        f"{samples:.3g} written samples, {SAMPLE_BYTES * n / 2**10:.0f} KiB each",
    )


def _joints_only(top: Section, name: str) -> bool:
    """Whether section ``name`` is a [model] that only names joints (which every kind reads)."""
    table = top.table.get(name)
    return name == "model" and isinstance(table, dict) and set(table) <= {"joints", "locked"}


def _check_kind(top: Section, kind: str) -> None:
    """Refuse a problem file whose sections belong to another kind of experiment."""
    for file_kind, sections in KIND_SECTIONS.items():
        found = [f"[{name}]" for name in sections if name in top and not _joints_only(top, name)]
        if found and kind not in file_kind.split(" or "):
            reads = (
                "[postures], [limits], [design] seed"
                if kind == "kinematic"
                else ("[trajectory], [model], [limits], [design]")
            )
            raise WorkbenchError(
                f"{top.source} is a {file_kind} problem file (it has {', '.join(found)}); "
                f"--kind {kind} reads {reads}"
            )
