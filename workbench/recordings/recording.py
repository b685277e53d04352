"""Log descriptions: a TOML file that says how to read a recording as it came off a robot.

A real recording is rarely in the project's column convention: motor-side
encoder counts at kHz rates, currents instead of torques, gear ratios and a
coupled wrist, columns named by the controller, poses from a camera whose
frame nobody measured. A log description states all of that once, beside the
data files (paths are relative to the description), and ``workbench
calibrate --log DESCRIPTION.toml`` reads it like any log. Example, the
Staubli TX40 recording shipped in ``models/staubli_tx40/``::

    [time]
    sample_period = 0.0002              # s (or: file, column = "t", unit = "s")

    [positions]
    file = "data/pos_read_data.csv.gz"  # CSV (header row; .gz allowed) or NPZ
    columns = ["Joint_1", "Joint_2", "Joint_3", "Joint_4", "Joint_5", "Joint_6"]
    unit = "rad"                         # "rad" or "deg" (prismatic joints: linear_unit)
    side = "motor"                       # "joint" or "motor"
    offsets = [0, -1.5707963267948966, 1.5707963267948966, 0, 0, 0]

    [torques]
    file = "data/curr_data.csv.gz"
    columns = ["Joint_1", "Joint_2", "Joint_3", "Joint_4", "Joint_5", "Joint_6"]
    side = "motor"
    scale = 1.0                          # N m per logged unit (e.g. torque constants)

    [transmission]
    ratios = [32, 32, 45, -48, 45, 32]   # motor turns per joint turn
    couplings = [[6, 5, 32]]             # [motor, joint, ratio]: motor 6 turns with joint 5

    [processing]
    lowpass_hz = 100.0
    decimate_to_hz = 100.0

    [model]
    terms = ["friction", "rotor_inertia", "offset", "coupled_motors"]

    [validation]
    folds = 5

Sections and keys (every key is checked; unknown keys are errors):

``[time]``
    ``sample_period`` (s), or ``file`` + ``column`` + ``unit`` (s, ms, us,
    ns) of a time column. Without ``[time]`` the rows are a set of static
    poses (no filtering, no derivatives).
``[positions]`` (required), ``[velocities]``, ``[torques]``
    ``file``, ``columns`` (one per model joint in the model's joint order,
    or a table ``joint = "column"``), ``side`` ("joint" or "motor"),
    ``unit`` ("rad"/"deg" for revolute joints; ``linear_unit`` "m"/"mm" for
    prismatic ones), ``offsets`` (positions only: joint-side zeros added
    after the transmission, in the column unit), ``scale`` (torques only: a
    number or one per column, e.g. torque constants for currents),
    ``exclude`` (torques only: joints whose torque channel is dead or not to
    be trusted; their torque equations stay out of torque fits and figures
    while their motion stays in the model). For torques, ``unit`` is the
    efforts' unit after ``scale``: "SI" (default: N m, N for prismatic
    joints) or a name such as "A" for currents without torque constants,
    which the calibration's figures then carry; ``scale_from_nominal``
    (joints whose ``scale`` was taken from the nominal model, as the effort
    check suggests it: their agreement with the nominal model is then no
    evidence of their unit).
``[transmission]``
    The motor-from-joint matrix R of ``q_motor = R q``: ``ratios``
    (diagonal) and ``couplings`` ([motor, joint, ratio] entries, numbered
    from 1), or ``matrix``. Motor torques reach the joints through
    ``torque_matrix`` (joint-from-motor), by default ``R^T`` (virtual
    power). Needed when a side is "motor".
``[temperature]``
    Drive temperatures for the ``temperature`` term: ``file``, ``columns``
    (one per joint, as above) or ``column`` (one temperature for every
    joint), ``unit`` ("degC" or "K"; only differences from the log's mean
    temperature enter the model). Read, resampled and cut like the torques.
``[[markers]]``
    Measured poses of frames on the robot: ``name``, ``frame`` (the model
    frame the marker hangs from, its nominal placement; default the tool
    frame), ``file`` (default the positions' file), ``position`` (three
    columns) with ``unit`` ("m" or "mm"), ``rotation`` (three or four
    columns) with ``rotation_type`` ("rotation_vector", "quaternion_xyzw",
    "quaternion_wxyz" or "rpy" = URDF roll-pitch-yaw) and ``rotation_unit``
    ("rad" or "deg", for rotation vectors and rpy).
    A marker with neither rests in fixtures.
``[[fixtures]]``, ``[[distances]]``
    Samples whose unmeasured marker rests at an unknown world point or on an
    unknown plane, chosen by a column of the positions' file, and known
    distances between point fixtures (static poses only; see
    :mod:`workbench.recordings.fixture_sections`).
``[postures]``
    Poses from a bag topic (``[[markers]] file = BAG``, ``topic``,
    ``child_frame`` for ``/tf``) are matched to the joint positions by time:
    ``match = "standstill"`` (default; ``speed``, ``min_duration``,
    ``window``) averages both over every posture where the joints stand
    still, ``"interpolate"`` interpolates the joints at each pose's stamp.
``[measurement_frame]``
    ``known = true`` (default): measurements are in the robot's base frame;
    ``false``: in a device frame (camera, motion capture) estimated jointly.
``[processing]`` (time series only)
    ``lowpass_hz`` (default min(100, fs / 5)) and ``lowpass_order`` (4):
    zero-phase Butterworth filter of the positions; ``decimate_to_hz``
    (default 100 when fs > 200 Hz, else no decimation): parallel decimation
    of the torque equations; ``min_speed_fraction`` (default 0.01 of each
    joint's velocity limit, or of its largest logged speed when the model
    has none) or ``min_speed`` (rad/s, one per joint or one for all): joint
    rows slower than this are left out of torque fits (Coulomb friction is
    undefined at rest). See :mod:`workbench.recordings.signals`.
``[model]``
    ``joints``: the joints this log calibrates, for a whole robot (wheels,
    head, grippers, a mobile base): every other movable joint of the URDF is
    locked, at its value in ``[model.locked]`` (joint = rad or m), else where
    a bag's joint states hold it still, else at zero,
    and the calibrated model is written back as the whole robot
    (:func:`workbench.models.urdf.load_robot`). Without ``joints``, the joints of a
    ``columns`` table (joint = "column") are the calibrated ones; a
    ``columns`` list follows the order of ``joints`` (else the model's).
    ``terms``: torque-model terms (:mod:`workbench.identification.drives`):
    ``friction``, ``rotor_inertia``, ``offset``, ``coupled_motors``, and the
    further terms ``stribeck`` (Stribeck friction, speeds fitted),
    ``load_friction`` (Coulomb friction proportional to the nominal
    rigid-body torque), ``temperature`` (friction linear in the drive
    temperature, needs ``[temperature]``) and ``sensor_delay`` (one delay of
    the torques behind the positions, fitted); with ``--parameters auto``
    the further terms are each tried on the held-out folds and kept only
    when they predict better (:mod:`workbench.calibration.selection.term_screening`);
    ``[model.payload]``: a known body carried while logging (``link``,
    default the last; ``mass`` in kg, ``com`` in m and ``inertia`` =
    [ixx, iyy, izz, ixy, ixz, iyz] about the centre of mass in kg m^2, both in
    the link's joint frame); its torques are taken off the measured ones, so
    the identified parameters are the robot's own.
``[validation]``
    ``folds`` (contiguous blocks in time; "leave-one-out" for one sample
    per fold) or ``fraction`` (held out at the end); ``shuffle = true``
    (with ``seed``) makes the folds (these or ``--folds``) random samples.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from workbench import inertia, lie
from workbench.chain import PRISMATIC, Chain
from workbench.config import Section, read_toml
from workbench.errors import WorkbenchError, WorkbenchWarning
from workbench.identification.drives import TERMS
from workbench.lie import Array
from workbench.recordings import bags, signals, standstill
from workbench.recordings import clock as clock_module
from workbench.recordings.fixture_sections import read_fixtures
from workbench.recordings.log import Defaults, Log, Marker
from workbench.recordings.plausibility import check_channels
from workbench.recordings.stamps import UNIT_DIGITS, seconds_since
from workbench.recordings.tables import Table, column_ns, read_table

JOINT_STATES = "/joint_states"  # the topic a bag's joint states are read from by default
_ANGLE = {"rad": 1.0, "deg": np.pi / 180.0}
_LENGTH = {"m": 1.0, "mm": 1e-3}
VELOCITY_COVERAGE = 0.99  # share of a bag's messages with velocities for them to be read
QUATERNION_NORM_TOLERANCE = 0.01  # a bag's quaternion further from unit norm is no rotation
_ROTATIONS = ("rotation_vector", "quaternion_xyzw", "quaternion_wxyz", "rpy")


@dataclass(frozen=True)
class Transmission:
    """Motor-from-joint matrix R (``q_m = R q``) and joint-from-motor torque matrix."""

    position: Array  # (n, n)
    torque: Array  # (n, n)


def read_description(
    path: str | Path, chain: Chain, *, drop_bad_rows: bool = False, progress: bool = False
) -> Log:
    """Read the recording a log description describes (module docstring) as a :class:`Log`.

    ``progress`` shows a progress bar while each CSV file is parsed.
    """
    path = Path(path)
    top = Section(read_toml(path, "log description"), str(path))
    return _read(top, path, path.parent, chain, drop_bad_rows, progress)


def read_bag(path: str | Path, chain: Chain, *, progress: bool = False) -> Log:
    """A ROS bag's ``/joint_states`` (positions, and velocities and efforts where logged) as a
    :class:`Log`, as the description ``[positions] file = BAG`` with default keys reads it.
    Velocities are read when at least :data:`VELOCITY_COVERAGE` of the messages carry all of
    them, else differentiated from the positions (with a warning when some were logged)."""
    path = Path(path)
    states = bags.read_joint_states(path, JOINT_STATES, chain.joint_names)
    file = path.name  # relative to the bag's folder, which the sections are read from
    description = {"positions": {"file": file}}
    logged = np.isfinite(states.velocity).all(axis=1)
    if logged.mean() >= VELOCITY_COVERAGE:
        description["velocities"] = {"file": file}
    elif logged.any():
        warnings.warn(
            f"{path}: topic {JOINT_STATES}: only {int(logged.sum())} of {logged.size} messages "
            "carry every joint's velocity; the velocities are differentiated from the "
            "positions instead of interpolated between those messages",
            WorkbenchWarning,
            stacklevel=2,
        )
    if np.isfinite(states.effort).any():
        description["torques"] = {"file": file}
    return _read(Section(description, str(path)), path, path.parent, chain, False, progress)


def _read(
    top: Section, path: Path, base: Path, chain: Chain, drop_bad_rows: bool, progress: bool
) -> Log:
    """The Log of a description's sections (``path`` names it, files are relative to ``base``)."""
    top.string("description", "")
    reader = _Reader(base, drop_bad_rows, progress)
    time = top.section("time")
    if "sample_period" in time:
        reader.drop_bad_rows = False  # filtering needs every sample: bad cells are errors

    model = top.section("model")
    order = _model_joints(model, chain)
    transmission = _transmission(top.section("transmission"), chain, order)
    positions = top.section("positions", required=True)
    q, q_where, q_table = _joint_block(reader, positions, chain, transmission, "positions", order)
    blocks = {"q": (q, q_table)}
    columns = {f"q_{j}": w for j, w in zip(chain.joint_names, q_where, strict=True)}
    if "velocities" in top:
        section = top.section("velocities")
        dq, _, table = _joint_block(reader, section, chain, transmission, "", order)
        blocks["dq"] = (dq, table)
    excluded: tuple[str, ...] = ()
    from_nominal: tuple[str, ...] = ()
    effort_unit = None
    if "torques" in top:
        section = top.section("torques")
        excluded = _joints_of(section, "exclude", chain)
        from_nominal = _joints_of(section, "scale_from_nominal", chain)
        effort_unit = _effort_unit(section)
        tau, tau_where, table = _joint_block(
            reader, section, chain, transmission, "torques", order, excluded
        )
        blocks["tau"] = (tau, table)
        columns |= {f"tau_{j}": w for j, w in zip(chain.joint_names, tau_where, strict=True)}
    if "temperature" in top:
        temperature, where, table = _temperature(reader, top.section("temperature"), chain, order)
        blocks["temperature"] = (temperature, table)
        columns |= {f"temperature_{j}": w for j, w in zip(chain.joint_names, where, strict=True)}
    markers = []
    for section in top.sections("markers"):
        marker, table, where = _marker(reader, section, positions, chain)
        markers.append((marker, table))
        columns[f"marker:{marker.name}"] = where
    frame = top.section("measurement_frame")
    frame_known = frame.boolean("known", True)
    frame.done()
    fixtures, distances = read_fixtures(top, reader.table(positions), [m for m, _ in markers])
    if fixtures and (time.table or any(_is_bag_table(t) for _, t in markers)):
        raise WorkbenchError(
            f"{path}: [[fixtures]] need a set of static poses: no [time] and no poses from bags"
        )
    posed = [(m, table) for m, table in markers if _is_bag_table(table)]
    markers = [(m, table) for m, table in markers if not _is_bag_table(table)]
    csv_tables = [table for _, table in [*blocks.values(), *markers] if not _is_bag_table(table)]
    rows = _common_rows(csv_tables) if csv_tables else {}
    raw_ns = {
        k: table.time_ns if _is_bag_table(table) else None for k, (_, table) in blocks.items()
    }
    q, dq, tau, temperature = (
        _rows_of(blocks[k], rows) if k in blocks else None
        for k in ("q", "dq", "tau", "temperature")
    )
    markers = [m.subset(rows[id(table)]) for m, table in markers]
    fixtures = tuple(f.subset(rows[id(q_table)]) for f in fixtures) if rows else fixtures
    ddq = None
    tables = csv_tables

    t, clock, origin = _time(reader, time, q.shape[0], rows.get(id(q_table)), q_table, raw_ns["q"])
    raw_t = {k: None if v is None else seconds_since(v, origin) for k, v in raw_ns.items()}
    postures = top.section("postures")
    if posed:
        if clock is None:
            raise WorkbenchError(
                f"{path}: poses from a bag topic are matched to the joint positions by time; "
                "the positions need time stamps (a bag, or [time])"
            )
        q, markers, t, found = _match_poses(postures, q, t, posed, chain, origin)
        clock, dq, tau, temperature = None, None, None, None
    elif postures.table:
        raise WorkbenchError(f"{path}: [postures] matches poses from a bag topic; there are none")
    if clock is not None and (clock.resampled or any(v is not None for v in raw_t.values())):
        stamps = {k: t if v is None else v for k, v in raw_t.items()}
        q, dq, tau, temperature = (
            None if x is None else clock_module.resample(clock, stamps[k], x)
            for k, x in (("q", q), ("dq", dq), ("tau", tau), ("temperature", temperature))
        )
        markers = [_resampled_marker(m, clock, t) for m in markers]
        t = clock.t
        _check_resampled(q, dq, tau, chain, clock, str(path))
    processing = top.section("processing")
    payload = _payload(model.section("payload"), chain)
    terms = model.strings("terms", None, choices=TERMS)
    model.done()
    defaults = _defaults(top.section("validation"), terms)
    dropped = tuple(sorted({d for table in tables for d in table.dropped}, key=lambda d: d.line))
    differentiated = dq is None
    decimation, min_speed, border, segments = 1, None, 0, None
    dt = clock.period if clock is not None else None
    if dt is None and processing.table:
        raise WorkbenchError(
            f"{path}: [processing] filters a time series; this description has no [time] "
            "(a set of static poses): add [time] or remove [processing]"
        )
    if clock is not None:
        q, dq, ddq, tau, t, segments, decimation, min_speed, border, temperature = _process(
            processing, chain, q, dq, tau, t, clock, str(path), temperature
        )
    elif dq is None:
        differentiated = False
    processing.done()
    top.done()
    return Log(
        t=t,
        q=q,
        dq=dq,
        ddq=ddq,
        tau=tau,
        joint_names=chain.joint_names,
        source=str(path),
        dropped=dropped,
        differentiated=differentiated,
        markers=tuple(markers),
        frame_known=frame_known,
        decimation=decimation,
        border=border,
        min_speed=min_speed,
        columns=columns,
        defaults=defaults,
        transmission=transmission.position if transmission is not None else None,
        payload=payload,
        segments=segments,
        temperature=temperature,
        fixtures=fixtures,
        distances=distances,
        excluded=excluded,
        effort_unit=effort_unit,
        scale_from_nominal=from_nominal,
        clock=found
        if posed
        else clock.summary()
        if clock is not None and clock.resampled
        else None,
    )


def _match_poses(
    section: Section, q: Array, t: Array, posed: list, chain: Chain, origin: int
) -> tuple[Array, list[Marker], Array, dict]:
    """Poses from bag topics matched to the joint positions by time (``[postures]``; ``t``
    and the poses' stamps in seconds since ``origin``, ns).

    ``match = "standstill"`` (default): the postures where every joint stood
    still (speed below ``speed``, rad/s or m/s, default 0.01, for at least
    ``min_duration`` s, default 0.5, judged over ``window`` s, default 0.1),
    joint positions and poses averaged over each
    (:mod:`workbench.recordings.standstill`); postures without poses are left
    out. ``match = "interpolate"``: the joint positions interpolated at every
    pose's stamp (synchronised clocks, continuous motion). Returns q, the
    markers, the times and what was found (for the report).
    """
    match = section.string("match", "standstill", choices=("standstill", "interpolate"))
    order = np.argsort(t, kind="stable")
    t, q = t[order], _filled(q[order], t[order], chain, section.source)
    if match == "interpolate":
        if len(posed) > 1:
            raise WorkbenchError(
                f"{section.where('match')} = 'interpolate' takes one pose topic; "
                f"{len(posed)} markers come from bags (use standstill postures)"
            )
        marker, table = posed[0]
        pose_t = seconds_since(table.time_ns, origin)
        inside = (pose_t >= t[0]) & (pose_t <= t[-1])
        pose_t = pose_t[inside]
        q = np.column_stack([np.interp(pose_t, t, q[:, j]) for j in range(q.shape[1])])
        section.done()
        found = {"postures": {"match": "interpolate", "poses": int(inside.sum())}}
        return q, [marker.subset(np.flatnonzero(inside))], pose_t, found
    speed = section.number("speed", 0.01, positive=True)
    duration = section.number("min_duration", 0.5, positive=True)
    window = section.number("window", 0.1, minimum=0.0)
    section.done()
    segments = standstill.standstill_segments(
        t, q, speed=speed, min_duration=duration, window=window
    )
    if not segments:
        raise WorkbenchError(
            f"{section.source}: no posture where every joint stands still (below {speed:g} per "
            f"s for {duration:g} s): set [postures] speed or min_duration"
        )
    averaged = []
    for marker, table in posed:
        rotation = lie.matrix_to_quaternion(marker.rotation)
        averaged.append(
            standstill.average_postures(
                t, q, segments, pose_t=seconds_since(table.time_ns, origin),
                position=marker.position,
                quaternion_xyzw=rotation,
            )
        )  # fmt: skip
    seen = np.all([p.pose_count > 0 for p in averaged], axis=0)
    if not np.any(seen):
        raise WorkbenchError(
            f"{section.source}: {len(segments)} standstill postures, none with poses from the "
            "bag's pose topics in it (are the clocks synchronised?)"
        )
    first = averaged[0]
    markers = [
        Marker(m.name, m.frame, p.position[seen], lie.quaternion_to_matrix(p.quaternion_xyzw[seen]))
        for (m, _), p in zip(posed, averaged, strict=True)
    ]
    found = {
        "postures": {
            "match": "standstill", "found": len(segments), "with_poses": int(seen.sum()),
            "speed": speed, "min_duration_s": duration,
            "start_s": first.start[seen].tolist(), "end_s": first.end[seen].tolist(),
        }
    }  # fmt: skip
    return first.q[seen], markers, 0.5 * (first.start + first.end)[seen], found


def _filled(q: Array, t: Array, chain: Chain, source: str) -> Array:
    """Joint positions with the samples a message left out interpolated from the others."""
    missing = ~np.isfinite(q)
    if not missing.any():
        return q
    q = q.copy()
    for j in np.flatnonzero(missing.any(axis=0)):  # a loop over joints, each one np.interp
        ok = ~missing[:, j]
        if not ok.any():
            raise WorkbenchError(f"{source}: no positions of joint {chain.joint_names[j]}")
        q[~ok, j] = np.interp(t[~ok], t[ok], q[ok, j])
    return q


def _is_bag_table(table: Table) -> bool:
    return bags.is_bag(table.path)


def _rows_of(block: tuple[Array, Table], rows: dict[int, np.ndarray]) -> Array:
    values, table = block
    return values if _is_bag_table(table) else values[rows[id(table)]]


def _resampled_marker(marker: Marker, clock: clock_module.Clock, t: Array) -> Marker:
    """A marker logged with the positions, on the clock's grid (rotations re-orthonormalised)."""
    position = None if marker.position is None else clock_module.resample(clock, t, marker.position)
    rotation = marker.rotation
    if rotation is not None:  # the nearest rotation matrix to the interpolated one
        U, _, Vt = np.linalg.svd(clock_module.resample(clock, t, rotation))
        flip = np.ones((U.shape[0], 3))
        flip[:, 2] = np.sign(np.linalg.det(U @ Vt))
        rotation = (U * flip[:, None, :]) @ Vt
    return Marker(marker.name, marker.frame, position, rotation)


def _check_resampled(q, dq, tau, chain: Chain, clock, source: str) -> None:
    """Every joint has samples in every segment after resampling (else name it)."""
    for what, x in (("positions", q), ("velocities", dq), ("torques", tau)):
        if x is None:
            continue
        missing = ~np.isfinite(x).all(axis=0)
        if np.any(missing):
            names = [j for j, m in zip(chain.joint_names, missing, strict=True) if m]
            raise WorkbenchError(
                f"{source}: no {what} of joint(s) {', '.join(names)} in part of the recording "
                f"({len(clock.segments)} segment(s) between gaps)"
            )


class _Reader:
    """Tables by path, read once, relative to the description's directory."""

    def __init__(self, base: Path, drop_bad_rows: bool, progress: bool = False) -> None:
        self.base = base
        self.drop_bad_rows = drop_bad_rows
        self.progress = progress
        self.cache: dict = {}  # tables by path, joint states by (bag, topic, joints)

    def path(self, section: Section, key: str = "file", default: str | None = None) -> Path:
        name = section.string(key, default) if default is not None else section.string(key)
        return (self.base / name).resolve()

    def table(
        self,
        section: Section,
        key: str = "file",
        default: str | None = None,
        field: str = "position",
        joints: list[str] | None = None,
    ) -> Table:
        """A CSV/NPZ table, or a bag's topic as a table (``t`` and one column per joint)."""
        path = self.path(section, key, default)
        if bags.is_bag(path):
            topic = section.string("topic", JOINT_STATES)
            cached = (path, topic, tuple(joints or ()))
            if cached not in self.cache:
                self.cache[cached] = bags.read_joint_states(path, topic, joints)
            return bags.states_table(self.cache[cached], field)
        if "topic" in section:
            raise WorkbenchError(f"{section.where('topic')}: {path} is not a ROS bag")
        if path not in self.cache:
            self.cache[path] = read_table(
                path, drop_bad_rows=self.drop_bad_rows, progress=self.progress
            )
        return self.cache[path]


def described_joints(
    path: str | Path, model_joints: Sequence[str] = ()
) -> tuple[list[str] | None, dict[str, float], dict[str, float]]:
    """The joints a description calibrates, the locked values it gives, and where its bag
    holds joints still (module docstring): ``[model] joints``, else the joints of a
    ``columns`` table, else a ``columns`` list whose entries are all joints of the model
    (``model_joints``, the whole robot's) but not all of them."""
    path = Path(path)
    top = Section(read_toml(path, "log description"), str(path))
    model = top.section("model")
    table = model.section("locked")
    locked = {name: table.number(name) for name in table.table}
    held = {}
    positions = top.section("positions")
    bag = (path.parent / str(positions.table.get("file", ""))).resolve()
    if "file" in positions.table and bags.is_bag(bag):
        held = still_joints(bags.read_joint_states(bag, positions.table.get("topic", JOINT_STATES)))
    if "joints" in model:
        return model.strings("joints"), locked, held
    for key in ("positions", "torques", "velocities"):
        raw = top.section(key).table.get("columns")
        if isinstance(raw, dict):
            return list(raw), locked, held
        if _names_joints(raw, model_joints) and set(raw) != set(model_joints):
            return list(raw), locked, held
    return None, locked, held


def _names_joints(columns: object, joints: Sequence[str]) -> bool:
    """Whether a ``columns`` list names only (distinct) joints of ``joints``."""
    if not isinstance(columns, list) or not columns or len(set(map(str, columns))) < len(columns):
        return False
    return all(isinstance(c, str) and c in joints for c in columns)


def still_joints(states: bags.JointStates, tolerance: float = 1e-3) -> dict[str, float]:
    """Joints whose logged position stays within ``tolerance`` (rad or m), or within two of its
    own encoder counts (the smallest step between its distinct values: a servo dithering by a
    count holds still), of its median, with that median: what a whole robot's other joints
    are locked at when a bag logs them."""
    position = states.position
    logged = np.isfinite(position).any(axis=0)
    median = np.full(position.shape[1], np.nan)
    median[logged] = np.nanmedian(position[:, logged], axis=0)
    spread = np.nanmax(np.abs(position - median), axis=0, initial=0.0, where=np.isfinite(position))
    count = np.array([_count(position[:, j]) for j in range(position.shape[1])])
    return {
        name: float(m)
        for name, m, s, c, ok in zip(states.names, median, spread, count, logged, strict=True)
        if ok and s <= max(tolerance, 2.0 * c)
    }


def _count(values: Array) -> float:
    """The smallest step between distinct finite values (an encoder count; 0 for fewer than
    two distinct values)."""
    distinct = np.unique(values[np.isfinite(values)])
    return float(np.diff(distinct).min()) if distinct.size > 1 else 0.0


def _model_joints(model: Section, chain: Chain) -> tuple[str, ...]:
    """The order of ``columns`` lists: ``[model] joints`` (the chain's joints) or the chain's."""
    model.section("locked")  # read by described_joints, before the model was loaded
    if "joints" not in model:
        return chain.joint_names
    joints = model.strings("joints")
    if sorted(joints) != sorted(chain.joint_names):
        raise WorkbenchError(
            f"{model.where('joints')} = {joints} are not the model's joints "
            f"{', '.join(chain.joint_names)}"
        )
    return tuple(joints)


def _column_names(section: Section, chain: Chain, order: tuple[str, ...]) -> list[str]:
    """The column of each chain joint, in the chain's order."""
    raw = section.raw("columns")
    if isinstance(raw, dict):
        unknown = [j for j in raw if j not in chain.joint_names]
        missing = [j for j in chain.joint_names if j not in raw]
        if unknown or missing:
            raise WorkbenchError(
                f"{section.where('columns')}: unknown joints {unknown}, missing joints {missing}; "
                f"the model's joints are {', '.join(chain.joint_names)}"
            )
        names = [raw[j] for j in chain.joint_names]
        if not all(isinstance(c, str) for c in names):
            raise WorkbenchError(f"{section.where('columns')}: column names must be strings")
        return names
    names = section.strings("columns")
    if _names_joints(names, chain.joint_names) and len(names) == chain.n:
        return list(chain.joint_names)  # each column named by its joint
    if len(names) != chain.n:
        raise WorkbenchError(
            f"{section.where('columns')} has {len(names)} entries; expected {chain.n}, one per "
            f'joint in the order {", ".join(order)} (or a table joint = "column", or name the '
            "calibrated joints in [model] joints: the others are locked)"
        )
    by_joint = dict(zip(order, names, strict=True))
    return [by_joint[j] for j in chain.joint_names]


def _joints_of(section: Section, key: str, chain: Chain) -> tuple[str, ...]:
    """A list of joint names (``[torques] exclude``: the joints whose torque channels stay out
    of torque fits; ``scale_from_nominal``: those whose scale came from the nominal model), in
    the chain's order; a name that is not one of the model's joints is an error naming it (a
    joint the description locks as such: its torque never enters a fit)."""
    names = section.strings(key, [])
    locked = {j for j, _ in chain.reduction.locked} if chain.reduction is not None else set()
    unknown = [name for name in names if name not in chain.joint_names]
    if unknown:
        what = [f"{n!r} (locked, so its torque never enters a fit)" for n in unknown if n in locked]
        what += [f"unknown joint {n!r}" for n in unknown if n not in locked]
        raise WorkbenchError(
            f"{section.where(key)}: {', '.join(what)}: not a calibrated joint; the calibrated "
            f"joints are {', '.join(chain.joint_names)}"
        )
    if key == "exclude" and len(set(names)) == chain.n:
        raise WorkbenchError(
            f"{section.where(key)} leaves out every joint's torque: nothing is left to fit"
        )
    return tuple(j for j in chain.joint_names if j in names)


def _effort_unit(section: Section) -> str | None:
    """``[torques] unit``: the unit of the efforts after ``scale``; None (not given, or "SI")
    for N m on revolute and N on prismatic joints."""
    unit = section.string("unit", "SI").strip()
    if not unit or unit in (*_ANGLE, *_LENGTH):
        raise WorkbenchError(
            f'{section.where("unit")} = {unit!r}: the unit of the efforts after scale, "SI" '
            '(N m, N) or a name such as "A" for currents; not empty nor a position unit'
        )
    return None if unit == "SI" else unit


def _joint_block(
    reader: _Reader,
    section: Section,
    chain: Chain,
    transmission,
    kind: str,
    order,
    excluded: tuple[str, ...] = (),
) -> tuple[Array, list[str], Table]:
    """One value per joint (N, n), joint side, SI units; where each came from; the table.

    From a bag, the columns are joint names in its JointState messages
    (default: the model's joint names). Torque columns are checked for constant values
    except those that reach only ``excluded`` joints.
    """
    if bags.is_bag(reader.path(section)):
        field = {"positions": "position", "torques": "effort"}.get(kind, "velocity")
        names = _column_names(section, chain, order) if "columns" in section else None
        names = names or list(chain.joint_names)
        table = reader.table(section, field=field, joints=names)
    else:
        table = reader.table(section)
        names = _column_names(section, chain, order)
    raw = table.values[:, [table.index(c) for c in names]]
    where = [f"{table.path}, column {table.index(c) + 1} ('{c}')" for c in names]
    side = section.string("side", "joint", choices=("joint", "motor"))
    if kind == "torques":
        scale = section.raw("scale", 1.0)
        scale = (
            _in_chain_order(section.array("scale", shape=(chain.n,)), order, chain)
            if isinstance(scale, list)
            else (section.number("scale", 1.0))
        )
        reach = np.eye(chain.n) if side == "joint" else _need(transmission, section).torque
        _check_torque_channels(raw, where, reach, chain, excluded)
        _check_zero_scale(
            np.broadcast_to(scale, (chain.n,)), where, reach, chain, excluded, section
        )
        values = raw * scale
        if side == "motor":
            values = values @ reach.T
    else:
        prismatic = np.array([k == PRISMATIC for k in chain.joint_kinds])
        angle = _ANGLE[section.string("unit", "rad", choices=tuple(_ANGLE))]
        length = _LENGTH[section.string("linear_unit", "m", choices=tuple(_LENGTH))]
        factor = np.where(prismatic, length, angle)
        check_channels(raw, where, constant="warn", saturation=False)
        values = raw * factor
        if side == "motor":
            values = np.linalg.solve(_need(transmission, section).position, values.T).T
        if kind == "positions":
            offsets = section.array("offsets", np.zeros(chain.n), shape=(chain.n,))
            values = values + _in_chain_order(offsets, order, chain) * factor
    section.done()
    return np.ascontiguousarray(values), where, table


def _temperature(
    reader: _Reader, section: Section, chain: Chain, order
) -> tuple[Array, list[str], Table]:
    """Drive temperatures (N, n) of ``[temperature]``: ``file``, and ``columns`` (one per
    joint, as the joint blocks) or ``column`` (one for every joint); ``unit`` "degC" (default)
    or "K" (the temperature term uses differences from the log's mean only)."""
    if bags.is_bag(reader.path(section)):
        raise WorkbenchError(f"{section.where('file')}: temperatures are read from tables only")
    table = reader.table(section)
    section.string("unit", "degC", choices=("degC", "K"))
    if ("columns" in section) == ("column" in section):
        raise WorkbenchError(
            f"{section.source}: [temperature] needs columns (one per joint) or column (one for "
            "every joint)"
        )
    if "column" in section:
        names = [section.string("column")] * chain.n
    else:
        names = _column_names(section, chain, order)
    values = table.values[:, [table.index(c) for c in names]]
    where = [f"{table.path}, column {table.index(c) + 1} ('{c}')" for c in names]
    section.done()
    return np.ascontiguousarray(values), where, table


def _check_torque_channels(
    raw: Array, where: list[str], reach: Array, chain: Chain, excluded: tuple[str, ...]
) -> None:
    """Refuse a constant torque column (:func:`check_channels`) unless every joint it reaches
    (``reach`` (n, n): joint-from-column torque matrix) is excluded; the refusal says how to
    exclude them."""
    joints = [[chain.joint_names[i] for i in np.flatnonzero(reach[:, k])] for k in range(chain.n)]
    checked = [k for k in range(chain.n) if not set(joints[k]) <= set(excluded)]
    remedies = [
        "If its joint's torque cannot be trusted, leave it out of the torque fit (its motion "
        "stays in the model): [torques] exclude = [" + ", ".join(f'"{j}"' for j in joints[k]) + "]"
        for k in checked
    ]
    check_channels(raw[:, checked], [where[k] for k in checked], "error", remedies=remedies)


def _check_zero_scale(
    scale: Array, where: list[str], reach: Array, chain: Chain, excluded: tuple[str, ...], section
) -> None:
    """Refuse a zero ``[torques] scale`` (it would log a zero torque) for a column that reaches a
    joint not excluded (``reach`` as in :func:`_check_torque_channels`)."""
    for k in np.flatnonzero(scale == 0.0):
        joints = [chain.joint_names[i] for i in np.flatnonzero(reach[:, k])]
        if not set(joints) <= set(excluded):
            raise WorkbenchError(
                f"{section.where('scale')} is 0 for {where[k]}: its torques would all be zero; "
                "a channel that cannot be trusted is left out of the torque fit (its motion "
                "stays in the model) with [torques] exclude = ["
                + ", ".join(f'"{j}"' for j in joints)
                + "]"
            )


def _in_chain_order(values: Array, order: tuple[str, ...], chain: Chain) -> Array:
    """Per-joint values (or a joint-by-joint matrix) given in ``order``, in the chain's order."""
    perm = [order.index(j) for j in chain.joint_names]
    return values[perm] if values.ndim == 1 else values[np.ix_(perm, perm)]


def _need(transmission: Transmission | None, section: Section) -> Transmission:
    if transmission is None:
        raise WorkbenchError(
            f"{section.where('side')} = 'motor' needs a [transmission] section (gear ratios)"
        )
    return transmission


def _transmission(section: Section, chain: Chain, order: tuple[str, ...]) -> Transmission | None:
    """R and the torque matrix, given with joints and motors in ``order``, in the chain's."""
    if not section.table:
        return None
    n = chain.n
    if "matrix" in section:
        R = section.array("matrix", shape=(None, None))
        if R.shape != (n, n):
            raise WorkbenchError(
                f"{section.where('matrix')} is {R.shape[0]} x {R.shape[1]}; the model has {n} "
                f"joints, so it must be {n} x {n}"
            )
    else:
        ratios = section.array("ratios", shape=(None,))
        if ratios.shape != (n,):
            raise WorkbenchError(
                f"{section.where('ratios')} has {ratios.size} entries; the model has {n} joints"
            )
        R = np.diag(ratios)
        for entry in section.array("couplings", np.zeros((0, 3)), shape=(None, 3)):
            motor, joint = int(entry[0]), int(entry[1])
            if entry[0] != motor or entry[1] != joint or not (1 <= motor <= n and 1 <= joint <= n):
                raise WorkbenchError(
                    f"{section.where('couplings')}: [{entry[0]:g}, {entry[1]:g}, ...] must name "
                    f"a motor and a joint by number, 1 to {n}"
                )
            R[motor - 1, joint - 1] = entry[2]
    _check_invertible(R, section.where("matrix" if "matrix" in section else "ratios"))
    torque = R.T
    if "torque_matrix" in section:
        torque = section.array("torque_matrix", shape=(n, n))
        _check_invertible(torque, section.where("torque_matrix"))
    section.done()
    return Transmission(_in_chain_order(R, order, chain), _in_chain_order(torque, order, chain))


def _check_invertible(R: Array, where: str) -> None:
    s = np.linalg.svd(R, compute_uv=False)
    if s[-1] <= 1e-12 * s[0]:
        raise WorkbenchError(
            f"{where}: the transmission matrix is singular (condition number "
            f"{s[0] / max(s[-1], 1e-300):.3g}): some joint cannot be recovered from the motors"
        )


def _marker(reader: _Reader, section: Section, positions: Section, chain: Chain):
    name = section.string("name", f"marker_{section.name.rsplit('[', 1)[-1].rstrip(']')}")
    frame = section.string("frame", chain.tool_name)
    try:
        chain.placement_of(frame)
    except WorkbenchError as exc:
        raise WorkbenchError(f"{section.where('frame')}: {exc}") from None
    path = reader.path(section, default=positions.table.get("file", ""))
    if bags.is_bag(path):  # a pose topic: positions (m) and orientations of the marker
        topic = section.string("topic")
        poses = _tracked(bags.read_poses(path, topic, section.string("child_frame", None)))
        section.done()
        table = Table(path, ("t",), poses.t[:, None], poses.message, time_ns=poses.stamp_ns)
        rotation = lie.quaternion_to_matrix(poses.quaternion_xyzw)
        return Marker(name, frame, poses.position, rotation), table, f"{path}: topic {topic}"
    table = reader.table(section, default=positions.table.get("file", ""))
    position = rotation = None
    where = str(table.path)
    if "position" in section:
        cols = section.strings("position", length=3)
        scale = _LENGTH[section.string("unit", "m", choices=tuple(_LENGTH))]
        position = table.values[:, [table.index(c) for c in cols]] * scale
        check_channels(
            position, [f"{table.path}, column '{c}'" for c in cols], "warn", saturation=False
        )
        where = f"{table.path}, columns {', '.join(cols)}"
    if "rotation" in section:
        kind = section.string("rotation_type", choices=_ROTATIONS)
        width = 4 if kind.startswith("quaternion") else 3
        cols = section.strings("rotation", length=width)
        values = table.values[:, [table.index(c) for c in cols]]
        rotation = _rotation(values, kind, section)
    section.done()  # a marker without position or rotation must rest in a fixture
    return Marker(name, frame, position, rotation), table, where


def _tracked(poses: bags.Poses) -> bags.Poses:
    """The poses with finite numbers and a quaternion of norm within
    :data:`QUATERNION_NORM_TOLERANCE` of 1, normalised: a motion-capture system that loses a
    marker publishes NaN or a zero quaternion until it finds it again; those poses are left
    out, with a warning that counts them."""
    quaternion = poses.quaternion_xyzw
    with np.errstate(invalid="ignore", over="ignore"):
        norm = np.linalg.norm(quaternion, axis=1)
    finite = np.isfinite(poses.position).all(axis=1) & np.isfinite(quaternion).all(1)
    tracked = finite & (np.abs(norm - 1.0) <= QUATERNION_NORM_TOLERANCE)
    where = f"{poses.path}: topic {poses.topic}"
    if not tracked.any():
        raise WorkbenchError(
            f"{where}: none of its {tracked.size} poses is finite with a unit quaternion "
            "(never tracked)"
        )
    if not tracked.all():
        first = int(poses.message[~tracked][0])
        warnings.warn(
            f"{where}: {int((~tracked).sum())} of {tracked.size} poses are not finite or their "
            f"quaternion is far from unit norm (marker lost, first in message {first}); "
            "left out",
            WorkbenchWarning,
            stacklevel=2,
        )
    return replace(
        poses, t=poses.t[tracked], position=poses.position[tracked],
        quaternion_xyzw=quaternion[tracked] / norm[tracked, None], message=poses.message[tracked],
        stamp_ns=poses.stamp_ns[tracked],
    )  # fmt: skip


def _rotation(values: Array, kind: str, section: Section) -> Array:
    if kind.startswith("quaternion"):
        if "rotation_unit" in section:
            raise WorkbenchError(
                f"{section.where('rotation_unit')}: quaternions have no angle unit; "
                "rotation_unit applies to rotation_vector and rpy"
            )
    else:
        unit = _ANGLE[section.string("rotation_unit", "rad", choices=tuple(_ANGLE))]
        _check_radians(values, kind, unit, section)
    if kind == "rotation_vector":
        return lie.exp_so3(values * unit)
    if kind == "rpy":
        return lie.rpy_to_matrix(values * unit)
    quat = values if kind == "quaternion_xyzw" else values[:, [1, 2, 3, 0]]
    norm = np.linalg.norm(quat, axis=1)
    if np.any(np.abs(norm - 1.0) > 1e-3):
        row = int(np.argmax(np.abs(norm - 1.0)))
        raise WorkbenchError(
            f"{section.where('rotation')}: the quaternion of sample {row} has norm "
            f"{norm[row]:.6g}, not 1 (wrong columns or rotation_type?)"
        )
    return lie.quaternion_to_matrix(quat / norm[:, None])


def _check_radians(values: Array, kind: str, unit: float, section: Section) -> None:
    """Refuse angles read as radians that reach beyond 2 pi (a rotation vector's norm, an rpy
    angle): no convention gives them, degrees do (read as radians they are lost modulo 2 pi,
    so the measured orientations are no longer comparable with the model's)."""
    if unit != 1.0:
        return
    size = np.linalg.norm(values, axis=1) if kind == "rotation_vector" else np.abs(values)
    largest = float(np.nanmax(size, initial=0.0))
    if largest > 2.0 * np.pi:
        what = "rotation vector norms" if kind == "rotation_vector" else "rpy angles"
        raise WorkbenchError(
            f"{section.where('rotation')}: {what} reach {largest:.4g}, read as radians "
            '(rotation_unit = "rad"): beyond 2 pi, they look like degrees (rotation_unit = '
            '"deg")'
        )


def _common_rows(tables: list[Table]) -> dict[int, np.ndarray]:
    """For each table (by id), the positions of the data rows present in every table."""
    common = tables[0].rows
    for table in tables[1:]:
        if table.dropped == () and tables[0].dropped == () and len(table) != len(tables[0]):
            raise WorkbenchError(
                f"{table.path} has {len(table)} data rows but {tables[0].path} has "
                f"{len(tables[0])}: the files of one recording must have one row per sample"
            )
        common = np.intersect1d(common, table.rows)
    return {id(t): np.searchsorted(t.rows, common) for t in tables}


def _time(
    reader: _Reader,
    section: Section,
    n: int,
    rows: np.ndarray | None,
    positions: Table,
    bag_ns: np.ndarray | None,
) -> tuple[Array, clock_module.Clock | None, int]:
    """Raw sample times (s) of the positions, their clock (None for static poses) and the
    origin of the times (int ns; 0 without time stamps).

    ``[time]`` gives ``sample_period`` (a uniform clock), or a ``file`` and
    ``column`` (``unit`` s, ms, us, ns); a bag's positions bring their own
    stamps. Time stamps are read as integer nanoseconds and made seconds since the first
    (earliest) one (:mod:`workbench.recordings.stamps`), so that a bag and the same
    recording as CSV give the same times to the last bit. A stated ``rate_hz`` (or
    ``sample_period`` with a time column) is the resampling grid's; ``gap_periods`` splits
    the recording at longer steps (:mod:`workbench.recordings.clock`).
    """
    if not section.table and bag_ns is None:
        section.done()
        return np.arange(n, dtype=float), None, 0
    period = None
    if "rate_hz" in section:
        period = 1.0 / section.number("rate_hz", positive=True)
    gap_periods = section.number("gap_periods", clock_module.GAP_PERIODS, minimum=1.5)
    if "sample_period" in section:
        period = section.number("sample_period", positive=True)
        if "file" not in section and "column" not in section:
            section.done()
            if bag_ns is None:
                t = period * np.arange(n)
                return t, clock_module.uniform_clock(t, period=period), 0
    if "file" in section or "column" in section:
        table = reader.table(section)
        column = section.string("column")
        digits = UNIT_DIGITS[section.string("unit", "s", choices=tuple(UNIT_DIGITS))]
        if table is not positions and len(table) != len(positions):
            raise WorkbenchError(
                f"{table.path} has {len(table)} rows but {positions.path} has {len(positions)}"
            )
        ns = column_ns(table, column, digits)
        ns = ns if rows is None else ns[rows]
        where = f"{table.path}, column '{column}'"
    else:
        ns, where = bag_ns, f"{positions.path}: time stamps"
    section.done()
    origin = int(ns.min())
    t = seconds_since(ns, origin)
    clock = clock_module.uniform_clock(t, period=period, gap_periods=gap_periods, where=where)
    if bag_ns is not None:  # read sorted by time: stamps stepping back in recorded order
        recorded = t[np.argsort(positions.lines, kind="stable")]
        clock = replace(clock, out_of_order=int(np.count_nonzero(np.diff(recorded) < 0)))
    return t, clock, origin


def _process(
    section: Section,
    chain: Chain,
    q: Array,
    dq: Array | None,
    tau: Array | None,
    t: Array,
    clock: clock_module.Clock,
    source: str,
    temperature: Array | None = None,
):
    """Filter and differentiate a time series segment by segment; decimation and the fit mask.

    Segments too short for the filters are left out with a warning. Returns
    q, dq, ddq, tau, t (the kept samples), the segments, the decimation
    factor, the per-joint speed threshold, the border and the temperatures
    of the kept samples.
    """
    dt = clock.period
    rate = 1.0 / dt
    order = section.integer("lowpass_order", 4, minimum=1)
    cutoff = section.number("lowpass_hz", min(100.0, rate / 5.0), positive=True)
    target = section.number("decimate_to_hz", 100.0 if rate > 200.0 else rate, positive=True)
    if target > rate * (1.0 + 1e-3):  # a measured period carries the clock's jitter
        raise WorkbenchError(
            f"{section.where('decimate_to_hz')} = {target:g} Hz is above the sample rate "
            f"{rate:g} Hz"
        )
    decimation = max(1, round(rate / target))
    if abs(rate / decimation - target) > 1e-3 * target:  # as above
        warnings.warn(
            f"{section.where('decimate_to_hz')} = {target:g} Hz: the sample rate {rate:g} Hz "
            f"allows whole factors only; decimating by {decimation} to {rate / decimation:g} Hz",
            WorkbenchWarning,
            stacklevel=2,
        )
    needed = signals.minimum_samples(decimation, order)
    spans = [(a, b) for a, b in clock.segments if b - a >= needed]
    if not spans:
        longest = max(b - a for a, b in clock.segments)
        raise WorkbenchError(
            f"{source}: the recording is too short: {longest} samples"
            + (f" in its longest stretch between gaps ({len(clock.segments)} stretches)"
               if len(clock.segments) > 1 else "")
            + f"; the order-{order} low-pass filter and decimation by {decimation} need at "
            f"least {needed}"
        )  # fmt: skip
    if len(spans) < len(clock.segments):
        short = len(clock.segments) - len(spans)
        warnings.warn(
            f"{source}: {short} stretch(es) of the recording between gaps are shorter than the "
            f"{needed} samples the filters need and are left out",
            WorkbenchWarning,
            stacklevel=2,
        )
    keep = np.concatenate([np.arange(a, b) for a, b in spans])
    segments, start = [], 0
    for a, b in spans:
        segments.append((start, start + b - a))
        start += b - a
    q, t = q[keep], t[keep]
    dq = None if dq is None else dq[keep]
    tau = None if tau is None else tau[keep]
    temperature = None if temperature is None else temperature[keep]
    q_f, dq_f, ddq_f = np.empty_like(q), np.empty_like(q), np.empty_like(q)
    for a, b in segments:
        what = f"{source}: positions"
        q_f[a:b] = signals.lowpass(q[a:b], rate, cutoff, order, what=what)
        if dq is None:
            dq_f[a:b], ddq_f[a:b] = signals.derivatives(q_f[a:b], dt)
        else:
            dq_f[a:b] = signals.lowpass(dq[a:b], rate, cutoff, order, what=f"{source}: velocities")
            ddq_f[a:b] = np.gradient(dq_f[a:b], dt, axis=0)
    if "min_speed" in section:
        raw = section.raw("min_speed")
        threshold = (
            section.array("min_speed", shape=(chain.n,))
            if isinstance(raw, list)
            else np.full(chain.n, section.number("min_speed", minimum=0.0))
        )
    else:
        fraction = section.number("min_speed_fraction", 0.01, minimum=0.0, maximum=1.0)
        limit = np.where(
            np.isfinite(chain.velocity_limit) & (chain.velocity_limit > 0),
            chain.velocity_limit,
            np.abs(dq_f).max(axis=0),
        )
        threshold = fraction * limit
    segments = tuple(segments) if len(segments) > 1 else None
    border = signals.border(decimation, order)
    return q_f, dq_f, ddq_f, tau, t, segments, decimation, threshold, border, temperature


def _payload(section: Section, chain: Chain) -> tuple[int, Array] | None:
    """(link, phi in its joint frame) of a known payload, or None."""
    if not section.table:
        return None
    link_name = section.string("link", chain.link_names[-1])
    if link_name not in chain.link_names:
        raise WorkbenchError(
            f"{section.where('link')} = {link_name!r} is not a moving link; the links are "
            f"{', '.join(chain.link_names)}"
        )
    mass = section.number("mass", positive=True)
    com = section.array("com", np.zeros(3), shape=(3,))
    ixx, iyy, izz, ixy, ixz, iyz = section.array("inertia", np.zeros(6), shape=(6,))
    inertia_com = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    section.done()
    return chain.link_names.index(link_name), inertia.phi_from_com(mass, com, inertia_com)


def _defaults(section: Section, terms: list[str] | None) -> Defaults:
    folds = 0
    raw = section.raw("folds", None)  # read (registered) even when absent: named as known
    if raw is not None:
        if raw == "leave-one-out":
            folds = -1
        elif isinstance(raw, str):
            raise WorkbenchError(
                f"{section.where('folds')} = {raw!r} must be a number or 'leave-one-out'"
            )
        else:
            folds = section.integer("folds", minimum=2)
    fraction = section.number("fraction", None)
    if fraction is not None:
        if not 0.0 < fraction < 1.0:
            raise WorkbenchError(
                f"{section.where('fraction')} = {fraction:g} must lie strictly between 0 and 1 "
                "(the share of the log held out)"
            )
        if folds:
            raise WorkbenchError(f"{section.where('fraction')}: give folds or fraction, not both")
    shuffle = section.boolean("shuffle", False)
    seed = section.integer("seed", 0, minimum=0)
    if shuffle and (fraction is not None or folds == -1):
        raise WorkbenchError(
            f"{section.where('shuffle')}: random folds need a number of folds (folds = K or "
            "--folds K), not a fraction or leave-one-out"
        )
    if "seed" in section.table and not shuffle:
        raise WorkbenchError(f"{section.where('seed')}: a seed draws random folds: shuffle = true")
    section.done()
    terms = tuple(terms) if terms is not None else None
    return Defaults(terms, folds, fraction, shuffle, seed)
