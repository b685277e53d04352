"""Plausibility of a log against its model: units, joint order, dead or clipped channels.

A log in the wrong unit parses perfectly and calibrates to nonsense (a joint
origin 332 m above the base). Before any fit, :func:`check_log` compares
what was logged with what the model allows and raises a
:class:`~workbench.errors.WorkbenchError` (or warns, where the data may
still be usable) naming the column and the likely cause:

* joint positions outside the joint range by more than 10 % of the range
  (at least 0.1 rad or 10 mm): an error, with "looks like degrees" (or
  millimetres) when the values divided by 180/pi (or 1000) fit the range;
  a warning when a revolute joint's values all stay within +-pi (no angle in
  degrees of a joint that moves; the model's limits are likely narrower than
  the robot's, as in the Kinova Gen3 lite URDF of the MUKCa data);
* joint speeds whose 99th percentile exceeds twice the velocity limit: an
  error (degrees, or a time column in ms);
* a log whose moving joints all stay below 1 % of their velocity limits (99th
  percentile): a warning naming the time unit or sample period (a time column
  in ms read as s makes every speed 1000 times too small, a sample_period 10
  times too long 10 times; least squares then finds too few samples above the
  joints' ``min_speed`` and would only ask for more);
* measured marker positions spread over more than 20 times the robot's
  reach: an error ("looks like millimetres");
* measured marker positions that spread (RMS distance from their mean, which
  no measurement frame changes) more than 10 times as far as the model moves
  the marker's frame along the logged q, or less than a tenth as far: an
  error naming millimetres (ratio near 1000), or joint positions in degrees
  or the wrong marker frame (ratio below 0.1). Frames that the logged motion
  moves less than 5 mm (RMS) are not compared;
* a known distance between two point fixtures (``[[distances]]``) more than
  ``_DISTANCE_RATIO`` times, or less than a ``_DISTANCE_RATIO``-th of, the
  distance between the centroids of the two fixtures' marker origins that the
  nominal model predicts from the logged q: an error naming millimetres read
  as metres or the reverse (ratio near 1000 or 1/1000) or another cause
  (a unit slip calibrates to links moved by metres; the nominal Panda of the
  MUKCa sockets puts them 49 mm apart for the 50 mm of the tool);
* measured marker orientations in the base frame more than 0.25 rad (median)
  from the nominal model's that a likely mistake (quaternion columns in the
  other order, qw and qx swapped) brings within 0.25 rad: an error naming it;
* a torque channel that never changes: an error (disconnected or not
  logged); a joint that never moves: a warning (its parameters cannot be
  identified);
* a torque sample larger than 1000 times its channel's typical size (the
  99th percentile of its magnitude, or the joint's effort limit if larger):
  an error naming the column, sample and time (a corrupted value, whose
  square would swamp every other sample of the fit);
* a channel that sits exactly at its extreme value for at least 1 % of the
  samples: a warning (a saturated sensor or clipped values);
* two joints read from the same column of the same file (positions or
  torques, :func:`check_duplicate_columns`): an error;
* a known payload whose inertia no rigid body has (a negative principal
  moment, or one above the sum of the other two: the triangle inequality,
  :func:`check_payload_inertia`): an error.

Limits that the model does not set (infinite, or zero) are not checked.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from workbench import inertia, lie
from workbench.chain import INERTIA_ATOL, INERTIA_RTOL, PRISMATIC, Chain
from workbench.dynamics.kinematics import forward_kinematics
from workbench.errors import WorkbenchError, WorkbenchWarning
from workbench.lie import Array
from workbench.recordings.log import Log

_RANGE_MARGIN = 0.1  # of the joint range
_SPEED_FACTOR = 2.0  # times the velocity limit, at the 99th percentile
_SLOW_FACTOR = 0.01  # every moving joint below this fraction of its limit: a time unit?
_SATURATED = 0.01  # fraction of samples at the extreme value
_REACH_FACTOR = 20.0
_SPREAD_RATIO = 10.0  # measured against modelled marker spread, either way
_MIN_SPREAD = 0.005  # m: frames that move less are not compared
_SPREAD_SAMPLES = 2000  # at most this many samples enter the comparison
_DISTANCE_RATIO = 10.0  # a known fixture distance against the nominal model's, either way
_TURN_MISMATCH = 0.25  # rad: median gap between measured and nominal orientations
# reinterpretations of a measured quaternion (x, y, z, w as read): the likely mistakes
_QUATERNION_MISTAKES = (
    ("the quaternion columns look like w, x, y, z under qx, qy, qz, qw", [1, 2, 3, 0]),
    ("qw and qx look swapped", [3, 1, 2, 0]),
    ("the quaternion columns look like x, y, z, w under rotation_type quaternion_wxyz",
     [3, 0, 1, 2]),
)  # fmt: skip
_SPIKE_FACTOR = 1e3  # times the channel's typical torque: a corrupted sample


def check_log(log: Log, chain: Chain, channels: bool = True, describable: bool = False) -> None:
    """Raise or warn for implausible content of ``log`` (module docstring).

    ``channels=False`` skips the dead and clipped channel tests, for readers
    that ran them on the raw columns already (log descriptions). ``describable``: the log is a
    table a log description can read, so that the refusal of a constant torque channel gives the
    description's ``[torques] exclude`` line that leaves it out.
    """
    check_duplicate_columns(log.columns)
    if log.payload is not None:
        mass, _, inertia_com = inertia.com_from_phi(log.payload[1])
        link = chain.link_names[log.payload[0]]
        check_payload_inertia(
            mass, inertia_com, f"{log.source}: [model.payload] inertia (on link '{link}')"
        )
    where = {name: log.columns.get(name, f"{log.source}: {name}") for name in _names(chain)}
    for j, joint in enumerate(chain.joint_names):
        _check_range(log, chain, j, where[f"q_{joint}"])
        if log.dq is not None and len(log) > 2:
            _check_speed(log, chain, j, where[f"q_{joint}"])
    if log.dq is not None and len(log) > 2:
        _check_slow(log, chain)
        if not log.differentiated:
            _check_velocity_columns(log, chain, where)
    if log.tau is not None:
        _check_torque_spikes(log, chain, [where[f"tau_{j}"] for j in chain.joint_names])
    if channels and log.tau is not None:
        remedies = [
            "If its joint's torque cannot be trusted, read the table through a log description "
            "(.toml, docs/file_formats.md) whose [torques] block leaves it out of the torque fit "
            f'(its motion stays in the model): exclude = ["{j}"]'
            for j in chain.joint_names
        ]
        where_tau = [where[f"tau_{j}"] for j in chain.joint_names]
        check_channels(log.tau, where_tau, "error", remedies=remedies if describable else None)
    if channels:
        check_channels(
            log.q, [where[f"q_{j}"] for j in chain.joint_names], constant="warn", saturation=False
        )
    _check_marker_spread(log, chain)
    _check_marker_scale(log, chain)
    _check_distances(log, chain)
    _check_marker_rotation(log, chain)


def check_channels(
    values: Array,
    where: Sequence[str],
    constant: str = "error",
    saturation: bool = True,
    remedies: Sequence[str] | None = None,
) -> None:
    """Constant channels (an error or a warning) and saturated ones (a warning), by column.

    Positions pass ``saturation=False``: a robot may rest at the end of its range.
    ``remedies``: per column, what to do about a constant one (appended to its message).
    """
    if values.shape[0] < 3:
        return
    lo, hi = values.min(axis=0), values.max(axis=0)
    for k, name in enumerate(where):
        if lo[k] == hi[k]:
            message = (
                f"{name} is constant ({lo[k]:.6g}) over all {values.shape[0]} samples: "
                "a disconnected or unlogged channel?"
            )
            if remedies is not None:
                message += f" {remedies[k]}"
            if constant == "error":
                raise WorkbenchError(message)
            warnings.warn(
                f"{message} Nothing that depends on it can be identified.",
                WorkbenchWarning,
                stacklevel=3,
            )
            continue
        if not saturation:
            continue
        for extreme, label in ((hi[k], "maximum"), (lo[k], "minimum")):
            count = int(np.count_nonzero(values[:, k] == extreme))
            if count >= max(10, _SATURATED * values.shape[0]):
                warnings.warn(
                    f"{name} sits at its {label} {extreme:.6g} for {count} of "
                    f"{values.shape[0]} samples: a saturated sensor or clipped values?",
                    WorkbenchWarning,
                    stacklevel=3,
                )


def check_duplicate_columns(columns: dict[str, str]) -> None:
    """Refuse two joints read from one column: ``columns`` maps ``q_<joint>`` and
    ``tau_<joint>`` to where each came from (file and column, as in :attr:`Log.columns`)."""
    for prefix, what in (("q_", "positions"), ("tau_", "torques")):
        seen: dict[str, str] = {}
        for name, where in columns.items():
            if not name.startswith(prefix):
                continue
            joint = name[len(prefix) :]
            if where in seen:
                raise WorkbenchError(
                    f"{where}: the {what} of joints '{seen[where]}' and '{joint}' are the same "
                    "column; every joint needs its own (a duplicated entry in columns?)"
                )
            seen[where] = joint


def check_payload_inertia(mass: float, inertia_com: Array, where: str) -> None:
    """Refuse a payload inertia about its centre of mass (3, 3) that no rigid body has: a
    negative principal moment, or one above the sum of the other two (tolerances of
    :func:`workbench.chain.check_inertias`); ``where`` names the file and key."""
    moments = np.linalg.eigvalsh(np.asarray(inertia_com, dtype=float))  # ascending
    tolerance = INERTIA_RTOL * abs(moments[-1]) + INERTIA_ATOL
    listing = ", ".join(f"{m:.4g}" for m in moments)
    if moments[0] < -tolerance:
        raise WorkbenchError(
            f"{where}: the payload's principal moments of inertia ({listing}) kg m^2 about its "
            "centre of mass include a negative one"
        )
    if moments[2] > moments[0] + moments[1] + tolerance:
        raise WorkbenchError(
            f"{where}: the payload's principal moments of inertia ({listing}) kg m^2 about its "
            f"centre of mass break the triangle inequality ({moments[2]:.4g} > {moments[0]:.4g} + "
            f"{moments[1]:.4g}): no rigid body of mass {mass:.4g} kg has them"
        )


def _check_torque_spikes(log: Log, chain: Chain, where: Sequence[str]) -> None:
    """Refuse a torque far above its channel's typical size (module docstring)."""
    if len(log) < 3:
        return
    size = np.abs(log.tau)
    limit = np.where(np.isfinite(chain.effort_limit), chain.effort_limit, 0.0)
    typical = np.maximum(np.percentile(size, 99, axis=0), limit)
    spikes = (size > _SPIKE_FACTOR * typical) & (typical > 0)
    if not spikes.any():
        return
    row, j = (int(k) for k in np.argwhere(spikes)[0])
    unit = "N" if chain.joint_kinds[j] == PRISMATIC else "N m"
    raise WorkbenchError(
        f"{where[j]}: {log.tau[row, j]:.6g} {unit} at sample {row} (t = {log.t[row]:.6g} s) is "
        f"more than {_SPIKE_FACTOR:.0f} times the channel's typical {typical[j]:.4g} {unit} "
        f"({int(spikes[:, j].sum())} such samples): a corrupted value?"
    )


def _names(chain: Chain) -> list[str]:
    return [f"{p}_{j}" for p in ("q", "tau") for j in chain.joint_names]


def _unit_hint(values: Array, lower: float, upper: float, prismatic: bool) -> str:
    """The unit in which all ``values`` lie within [lower, upper], the smallest factor first
    (a lift's range [0, 0.35] m holds centimetres and millimetres alike)."""
    units = ((100.0, "centimetres"), (1000.0, "millimetres")) if prismatic else (
        (180.0 / np.pi, "degrees"),
    )  # fmt: skip
    for factor, unit in units:
        if np.all((lower <= values / factor) & (values / factor <= upper)):
            return f"; the values look like {unit}"
    return "; a wrong unit, joint order or zero offset?"


def _check_range(log: Log, chain: Chain, j: int, where: str) -> None:
    lower, upper = chain.lower[j], chain.upper[j]
    if not (np.isfinite(lower) and np.isfinite(upper)) or upper <= lower:
        return
    prismatic = chain.joint_kinds[j] == PRISMATIC
    margin = max(_RANGE_MARGIN * (upper - lower), 0.01 if prismatic else 0.1)
    q = log.q[:, j]
    outside = (q < lower - margin) | (q > upper + margin)
    if not outside.any():
        return
    row = int(np.argmax(outside))
    value = float(q[row])
    unit = "m" if prismatic else "rad"
    message = (
        f"{where}: joint '{chain.joint_names[j]}' reaches {value:.6g} {unit} at sample {row} "
        f"(t = {log.t[row]:.6g} s), outside its range [{lower:.4g}, {upper:.4g}] {unit}"
    )
    if not prismatic and np.abs(q).max() <= np.pi:
        warnings.warn(
            f"{message}; every value is an angle within +-pi, so the model's limits are likely "
            "narrower than the robot's (the values are used as they are)",
            WorkbenchWarning, stacklevel=4,
        )  # fmt: skip
        return
    raise WorkbenchError(message + _unit_hint(q, lower, upper, prismatic))


def _check_speed(log: Log, chain: Chain, j: int, where: str) -> None:
    limit = chain.velocity_limit[j]
    if not np.isfinite(limit) or limit <= 0:
        return
    speed = float(np.percentile(np.abs(log.dq[:, j]), 99))
    if speed <= _SPEED_FACTOR * limit:
        return
    unit = "m/s" if chain.joint_kinds[j] == PRISMATIC else "rad/s"
    raise WorkbenchError(
        f"{where}: joint '{chain.joint_names[j]}' moves at {speed:.4g} {unit} (99th percentile), "
        f"{speed / limit:.0f} times its velocity limit {limit:.4g} {unit}; are the positions in "
        "degrees or millimetres, or the time in ms instead of s?"
    )


SWAPPED = 0.2  # relative misfit of dq/dt against another joint's logged dq: the columns swapped


def _check_velocity_columns(log: Log, chain: Chain, where: dict[str, str]) -> None:
    """Refuse a log whose joint positions differentiate (``numpy.gradient`` over ``t``) to
    another joint's logged velocities rather than their own (misfit over 0.5, against under
    :data:`SWAPPED` relative RMS): two q or dq columns swapped, which a torque fit takes
    for a weakly identified link."""
    rate = np.gradient(log.q, log.t, axis=0)

    def misfit(a: Array, b: Array) -> float:
        return float(np.sqrt(np.nanmean((a - b) ** 2) / max(np.nanmean(b**2), 1e-300)))

    for j, joint in enumerate(chain.joint_names):
        if misfit(rate[:, j], log.dq[:, j]) <= 0.5:
            continue
        others = [(misfit(rate[:, j], log.dq[:, k]), k) for k in range(chain.n) if k != j]
        best, k = min(others, default=(np.inf, -1))
        if best < SWAPPED:
            raise WorkbenchError(
                f"{where[f'q_{joint}']}: joint '{joint}' moves as the logged velocities of "
                f"'{chain.joint_names[k]}' (relative misfit {best:.2g}), not as its own (they "
                "disagree): q or dq columns swapped?"
            )


def _check_slow(log: Log, chain: Chain) -> None:
    """Warn when every joint that moves stays below ``_SLOW_FACTOR`` of its velocity limit."""
    limit = chain.velocity_limit
    moving = np.ptp(log.q, axis=0) > 0
    judged = moving & np.isfinite(limit) & (limit > 0)
    if not judged.any():
        return
    speed = np.percentile(np.abs(log.dq[:, judged]), 99, axis=0)
    fastest = float(np.max(speed / limit[judged]))
    if fastest >= _SLOW_FACTOR:
        return
    factor = 10.0 ** np.floor(-np.log10(max(fastest, 1e-300) / _SPEED_FACTOR))
    said = f"{factor:.0f} times" if factor <= 1e9 else f"{factor:.0e} times"
    units = {1e3: "ms", 1e6: "us", 1e9: "ns"}
    hint = ""
    if factor in units:
        hint = f' (a time column in {units[factor]} read as s: [time] unit = "{units[factor]}")'
    warnings.warn(
        f"{log.source}: every joint moves at most {100 * fastest:.2g} % of its velocity limit "
        f"(99th percentile of the speeds over {len(log)} samples): the time stamps look about "
        f"{said} too long{hint}, or the [time] sample_period {said} too long; speeds that "
        "small leave few samples above the joints' min_speed for torque fits",
        WorkbenchWarning,
        stacklevel=3,
    )


def _reach(chain: Chain) -> float:
    """An upper bound of the distance between two points of the robot (m)."""
    points = [chain.joint_frames[:, :3, 3], chain.tool_frame[None, :3, 3]]
    points += [f.placement[None, :3, 3] for f in chain.frames]
    spread = np.linalg.norm(np.concatenate(points), axis=1)
    return float(2.0 * spread.max() + 0.1)


def _check_marker_spread(log: Log, chain: Chain) -> None:
    reach = _reach(chain)
    for marker in log.measured_markers():
        if marker.position is None or len(marker.position) < 2:
            continue
        spread = float(np.ptp(marker.position, axis=0).max())
        if spread > _REACH_FACTOR * reach:
            source = log.columns.get(f"marker:{marker.name}", log.source)
            distance = np.abs(marker.position - np.median(marker.position, axis=0)).max(axis=1)
            far = np.flatnonzero(distance > _REACH_FACTOR * reach)
            if far.size < len(distance) / 2:  # a few samples: not the unit of the column
                k = int(far[np.argmax(distance[far])])
                raise WorkbenchError(
                    f"{source}: the position of marker '{marker.name}' at sample {k} (t = "
                    f"{log.t[k]:.6g} s) is {distance[k]:.4g} m from the samples' median, more "
                    f"than {_REACH_FACTOR:.0f} times the robot's reach ({reach:.3g} m; "
                    f"{far.size} such sample(s)): a corrupted value?"
                )
            raise WorkbenchError(
                f"{source}: positions of marker '{marker.name}' spread over {spread:.4g} m, "
                f"more than {_REACH_FACTOR:.0f} times the robot's reach ({reach:.3g} m); "
                "the values look like millimetres"
            )


def _frame_poses(chain: Chain, frame: str, q: Array) -> Array:
    """Poses (N, 4, 4) of the model frame ``frame`` in the base frame at joint positions q."""
    carrier = replace(
        chain, tool_parent=chain.parent_of(frame), tool_frame=chain.placement_of(frame)
    )
    return forward_kinematics(carrier, q)


def _spread(points: Array) -> float:
    """RMS distance of points (N, 3) from their mean: the same in any measurement frame."""
    return float(np.sqrt(np.mean(np.sum((points - points.mean(axis=0)) ** 2, axis=1))))


def _check_marker_scale(log: Log, chain: Chain) -> None:
    """Compare each marker's measured spread with its frame's spread along the logged q."""
    rows = np.unique(np.linspace(0, len(log) - 1, min(len(log), _SPREAD_SAMPLES)).astype(int))
    for marker in log.measured_markers():
        if marker.position is None or len(marker.position) < 3:
            continue
        frame = marker.frame or chain.tool_name
        modelled = _spread(_frame_poses(chain, frame, log.q[rows])[:, :3, 3])
        measured = _spread(marker.position[rows])
        if modelled < _MIN_SPREAD or measured == 0:
            continue
        ratio = measured / modelled
        if 1 / _SPREAD_RATIO <= ratio <= _SPREAD_RATIO:
            continue
        if ratio > _SPREAD_RATIO:
            cause = "the values look like millimetres" if 300 <= ratio <= 3000 else "a wrong unit?"
        else:
            cause = "are the joint positions in degrees, or is the marker on another frame?"
        source = log.columns.get(f"marker:{marker.name}", log.source)
        raise WorkbenchError(
            f"{source}: positions of marker '{marker.name}' spread over {measured:.4g} m (RMS "
            f"about their mean) while the model moves frame '{frame}' over {modelled:.4g} m "
            f"along the logged joint positions, {ratio:.3g} times as far; {cause}"
        )


def _check_distances(log: Log, chain: Chain) -> None:
    """Compare each known fixture distance with the nominal model's (module docstring)."""
    fixtures = {f.name: f for f in log.fixtures}
    frames = {m.name: m.frame or chain.tool_name for m in log.markers}
    for k, distance in enumerate(log.distances):
        centroids = []
        for name in distance.between:
            fixture = fixtures[name]
            frame = frames[fixture.marker]
            q = log.q[fixture.rows]
            q = q[np.all(np.isfinite(q), axis=1)]
            if len(q) == 0:
                break
            centroids.append(_frame_poses(chain, frame, q)[:, :3, 3].mean(axis=0))
        if len(centroids) < 2:
            continue
        modelled = float(np.linalg.norm(centroids[0] - centroids[1]))
        if modelled < _MIN_SPREAD:
            continue  # the model cannot tell the two points apart
        ratio = distance.value / modelled
        if 1 / _DISTANCE_RATIO <= ratio <= _DISTANCE_RATIO:
            continue
        if 300 <= ratio <= 3000:
            cause = "millimetres given as metres?"
        elif 1 / 3000 <= ratio <= 1 / 300:
            cause = "metres given as millimetres?"
        else:
            cause = "a wrong unit, or a fixture column that does not say which fixture?"
        a, b = distance.between
        raise WorkbenchError(
            f"{log.source}: distances[{k}] between '{a}' and '{b}' is {distance.value:.4g} m while "
            f"the nominal model puts their marker origins {modelled:.4g} m apart (centroids "
            f"over the logged joint positions), {ratio:.3g} times as far; {cause}"
        )


def _angles(modelled: Array, measured: Array) -> Array:
    """Angles (rad) between modelled and measured orientations (N, 3, 3), sample by sample."""
    cosine = (np.einsum("nij,nij->n", modelled, measured) - 1.0) / 2.0
    return np.arccos(np.clip(cosine, -1.0, 1.0))


def _check_marker_rotation(log: Log, chain: Chain) -> None:
    """Name a wrong quaternion convention of measured orientations in the robot's base frame:
    when the nominal model's orientation of the marker's frame is more than 0.25 rad (median)
    from the measured one but a likely mistake (:data:`_QUATERNION_MISTAKES`) brings it within
    0.25 rad. Turns between samples cannot tell (a reordered quaternion turns the same to first
    order), nor can a log whose measurement frame is estimated."""
    if not log.frame_known:
        return
    rows = np.unique(np.linspace(0, len(log) - 1, min(len(log), _SPREAD_SAMPLES)).astype(int))
    for marker in log.measured_markers():
        if marker.rotation is None:
            continue
        measured = marker.rotation[rows]
        seen = np.isfinite(measured).all(axis=(1, 2))
        if not seen.any():
            continue
        frame = marker.frame or chain.tool_name
        modelled = _frame_poses(chain, frame, log.q[rows[seen]])[:, :3, :3]
        measured = measured[seen]
        gap = float(np.median(_angles(modelled, measured)))
        if gap <= _TURN_MISMATCH:
            continue
        quaternion = lie.matrix_to_quaternion(measured)
        for cause, order in _QUATERNION_MISTAKES:
            corrected = lie.quaternion_to_matrix(quaternion[:, order])
            fixed = float(np.median(_angles(modelled, corrected)))
            if fixed <= _TURN_MISMATCH:
                source = log.columns.get(f"marker:{marker.name}", log.source)
                raise WorkbenchError(
                    f"{source}: the orientations of marker '{marker.name}' are {gap:.3g} rad "
                    f"(median) from the nominal model's of frame '{frame}', {fixed:.3g} rad "
                    f"once read otherwise: {cause}"
                )
