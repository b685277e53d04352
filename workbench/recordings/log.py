"""A calibration log in memory: joint trajectories, torques, measured marker poses.

A :class:`Log` is what every calibration reads, whatever file it came from
(:mod:`workbench.recordings.log_files`): joint side, SI units, the model's joint
order, time on axis 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import numpy as np

from workbench import lie
from workbench.arrays import as_real_array
from workbench.errors import WorkbenchError
from workbench.lie import Array
from workbench.recordings import signals
from workbench.recordings.tables import DroppedRow


@dataclass(frozen=True)
class Marker:
    """Measured poses of one frame on the robot, in the measurement frame.

    ``frame`` names the model frame the marker is attached to, which gives
    the nominal placement that calibration refines (None: the tool frame).
    ``position`` is (N, 3) in m, ``rotation`` (N, 3, 3); either may be None.
    """

    name: str
    frame: str | None
    position: Array | None = None
    rotation: Array | None = None

    def subset(self, rows: np.ndarray) -> Marker:
        take = {k: None if v is None else v[rows] for k, v in self._arrays().items()}
        return replace(self, **take)

    def _arrays(self) -> dict[str, Array | None]:
        return {"position": self.position, "rotation": self.rotation}


@dataclass(frozen=True)
class Fixture:
    """Samples whose marker is not measured but rests on something fixed in the world.

    ``kind`` "point": in every sample of ``rows`` (N,) bool the origin of
    marker ``marker`` is at one unknown world point; "plane": it lies on
    one unknown world plane. The point or plane is estimated with the
    joints (:mod:`workbench.calibration.fitting.fixtures`).
    """

    name: str
    kind: str
    marker: str
    rows: Array

    def subset(self, rows: np.ndarray) -> Fixture:
        return replace(self, rows=self.rows[rows])


@dataclass(frozen=True)
class Distance:
    """A known distance (m) between two point fixtures (e.g. two sockets of one tool)."""

    between: tuple[str, str]
    value: float


@dataclass(frozen=True)
class Defaults:
    """Calibration settings a log description asks for (command-line options override them).

    ``terms``: torque-model terms (see ``workbench.identification.drives``);
    ``folds``: blocked cross-validation folds (0: none; -1: leave one out);
    ``validation``: held-out fraction at the end when there are no folds;
    ``shuffle``, ``seed``: folds of random samples (:class:`~workbench.calibration.
    validation.Folds`).
    """

    terms: tuple[str, ...] | None = None
    folds: int = 0
    validation: float | None = None
    shuffle: bool = False
    seed: int = 0


@dataclass(frozen=True)
class Log:
    """Samples of a calibration log, joint side, SI units, in the model's joint order.

    Besides the samples: ``decimation`` and ``min_speed`` say how torque
    fits use them (parallel decimation factor; per-joint speed below which a
    joint's torque row stays out of fits and its Coulomb friction fades, since
    it is undefined at rest); ``border`` the decimated samples
    dropped at each end, where filters see their padding;
    ``frame_known`` whether measured poses are in the robot base frame (else
    the measurement device's frame is estimated); ``columns`` where each
    quantity came from (for messages); ``defaults`` what a log description
    asked for; ``transmission`` the motor-from-joint matrix R (``q_motor = R
    q``) when the log description gives one (coupled-motor terms need it);
    ``payload`` a known body the robot carried while logging: the link it
    was attached to and its phi in that link's joint frame (project order);
    ``segments`` the ``(start, stop)`` sample ranges of a recording split at
    gaps in its clock (None: one), each filtered and decimated on its own;
    ``clock`` what :mod:`workbench.recordings.clock` found in its time stamps;
    ``temperature`` (N, n) each joint's drive temperature (any unit of
    degrees, e.g. deg C: the temperature friction term uses differences from
    the log's mean only), None when not logged; ``fixtures`` the samples whose
    unmeasured marker rests on a fixed point or plane, ``distances`` known
    distances between point fixtures; ``excluded`` the joints whose torque channels are left
    out of torque fits and their figures (``[torques] exclude``: dead or untrusted channels;
    their motion stays in the model); ``effort_unit`` the unit of ``tau`` when it is not N m
    (revolute) and N (prismatic), as a description declares it (``[torques] unit``, e.g. "A"
    for currents read without torque constants), None for SI; ``scale_from_nominal`` the
    joints whose torque scale was taken from the nominal model (``[torques]
    scale_from_nominal``): their agreement with it is no evidence of their unit.
    """

    t: Array  # (N,)
    q: Array  # (N, n)
    dq: Array | None = None
    ddq: Array | None = None
    tau: Array | None = None
    position: Array | None = None  # (N, 3) tool position in the base frame
    orientation: Array | None = None  # (N, 4) tool quaternion (qx, qy, qz, qw)
    joint_names: tuple[str, ...] = ()
    source: str = "<memory>"
    dropped: tuple[DroppedRow, ...] = ()
    differentiated: bool = field(default=False)  # dq/ddq estimated from q
    markers: tuple[Marker, ...] = ()
    frame_known: bool = True
    decimation: int = 1
    border: int = 0
    min_speed: Array | None = None  # (n,)
    transmission: Array | None = None  # (n, n) motor-from-joint matrix of the drives
    payload: tuple[int, Array] | None = None  # (link, phi in its joint frame) carried while logged
    columns: dict[str, str] = field(default_factory=dict)
    defaults: Defaults = field(default_factory=Defaults)
    segments: tuple[tuple[int, int], ...] | None = None
    clock: dict | None = None
    temperature: Array | None = None  # (N, n) drive temperatures
    fixtures: tuple[Fixture, ...] = ()
    distances: tuple[Distance, ...] = ()
    excluded: tuple[str, ...] = ()
    effort_unit: str | None = None
    scale_from_nominal: tuple[str, ...] = ()

    def __len__(self) -> int:
        return self.t.shape[0]

    def subset(self, rows: np.ndarray) -> Log:
        """The log restricted to ``rows`` (index array or boolean mask), as one segment."""
        take = {
            f.name: getattr(self, f.name)[rows]
            for f in fields(self)
            if f.name in _SAMPLED and getattr(self, f.name) is not None
        }
        markers = tuple(m.subset(rows) for m in self.markers)
        fixtures = tuple(f.subset(rows) for f in self.fixtures)
        return replace(self, **take, markers=markers, fixtures=fixtures, segments=None)

    def torque_channels(self) -> np.ndarray:
        """Which joints' torque equations enter fits and figures (n,) bool: all but
        :attr:`excluded`."""
        if not self.excluded:  # also a log whose joints are not named
            return np.ones(self.q.shape[1], dtype=bool)
        return np.array([j not in self.excluded for j in self.joint_names], dtype=bool)

    def spans(self) -> tuple[tuple[int, int], ...]:
        """The ``(start, stop)`` sample ranges filtered and decimated on their own."""
        return self.segments if self.segments is not None else ((0, len(self)),)

    def equation_samples(self) -> np.ndarray:
        """The samples that decimated equations sit at (:func:`signals.decimate_segments`)."""
        return signals.kept_samples(self.spans(), self.decimation, self.border)

    def measured_markers(self) -> tuple[Marker, ...]:
        """The markers, or the tool (``px..qw`` columns) as the one marker of a table log."""
        if self.markers:
            return self.markers
        if self.position is None:
            return ()
        rotation = None if self.orientation is None else lie.quaternion_to_matrix(self.orientation)
        return (Marker("tool", None, self.position, rotation),)


_SAMPLED = ("t", "q", "dq", "ddq", "tau", "position", "orientation", "temperature")


_JOINT_SAMPLED = ("q", "dq", "ddq", "tau")  # (N, n), finite


def check_log_arrays(log: Log, n: int | None = None) -> None:
    """Raise a WorkbenchError naming the log and the field when ``log`` is not a :class:`Log`
    whose time stamps and joint samples are real and finite, one row per time stamp and, with
    ``n``, one column per joint of the model (a log of another robot, 3 torque columns for 7
    joints). Measured poses may hold NaN (a marker not seen)."""
    if not isinstance(log, Log):
        raise WorkbenchError(f"the log is {type(log).__name__}, not a calibration Log")
    t = as_real_array(log.t, f"{log.source}: t")
    if t.ndim != 1 or t.size == 0 or not np.isfinite(t).all():
        raise WorkbenchError(f"{log.source}: t must be a non-empty vector of finite time stamps")
    width = {"position": 3, "orientation": 4}
    for name in (*_JOINT_SAMPLED, *width):
        value = getattr(log, name)
        if value is None:
            if name == "q":
                raise WorkbenchError(f"{log.source}: the log has no joint positions q")
            continue
        x = as_real_array(value, f"{log.source}: {name}")
        columns = width.get(name, n)
        if x.ndim != 2 or x.shape[0] != t.size or columns not in (None, x.shape[1]):
            expected = f"({t.size}, {columns if columns is not None else 'joints'})"
            model = "" if name in width else f" for a model of {n} joints"
            raise WorkbenchError(
                f"{log.source}: {name} has shape {x.shape}; expected {expected}{model}"
            )
        if name in _JOINT_SAMPLED and not np.isfinite(x).all():
            sample, column = np.argwhere(~np.isfinite(x))[0]
            raise WorkbenchError(
                f"{log.source}: {name} holds {x[sample, column]} at sample {sample}, "
                f"column {column}"
            )
