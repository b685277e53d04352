"""Plausibility of a log against its model: units, joint order, dead or clipped channels.

A log in the wrong unit parses perfectly and calibrates to nonsense (a joint
origin 332 m above the base). Before any fit, :func:`check_log` compares
what was logged with what the model allows and raises a
:class:`~workbench.errors.WorkbenchError` (or warns, where the data may
still be usable) naming the column and the likely cause:

* joint positions outside the joint range by more than 10 % of the range
  (at least 0.1 rad or 10 mm): an error, with "looks like degrees" (or
  millimetres) when the values divided by 180/pi (or 1000) fit the range;
* joint speeds whose 99th percentile exceeds twice the velocity limit: an
  error (degrees, or a time column in ms);
* measured marker positions spread over more than 20 times the robot's
  reach: an error ("looks like millimetres");
* measured marker positions that spread (RMS distance from their mean, which
  no measurement frame changes) more than 10 times as far as the model moves
  the marker's frame along the logged q, or less than a tenth as far: an
  error naming millimetres (ratio near 1000), or joint positions in degrees
  or the wrong marker frame (ratio below 0.1). Frames that the logged motion
  moves less than 5 mm (RMS) are not compared;
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

from workbench import inertia
from workbench.chain import INERTIA_ATOL, INERTIA_RTOL, PRISMATIC, Chain
from workbench.dynamics.kinematics import forward_kinematics
from workbench.errors import WorkbenchError, WorkbenchWarning
from workbench.lie import Array
from workbench.recordings.log import Log

_RANGE_MARGIN = 0.1  # of the joint range
_SPEED_FACTOR = 2.0  # times the velocity limit, at the 99th percentile
_SATURATED = 0.01  # fraction of samples at the extreme value
_REACH_FACTOR = 20.0
_SPREAD_RATIO = 10.0  # measured against modelled marker spread, either way
_MIN_SPREAD = 0.005  # m: frames that move less are not compared
_SPREAD_SAMPLES = 2000  # at most this many samples enter the comparison
_SPIKE_FACTOR = 1e3  # times the channel's typical torque: a corrupted sample


def check_log(log: Log, chain: Chain, channels: bool = True) -> None:
    """Raise or warn for implausible content of ``log`` (module docstring).

    ``channels=False`` skips the dead and clipped channel tests, for readers
    that ran them on the raw columns already (log descriptions).
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
    if log.tau is not None:
        _check_torque_spikes(log, chain, [where[f"tau_{j}"] for j in chain.joint_names])
    if channels and log.tau is not None:
        check_channels(log.tau, [where[f"tau_{j}"] for j in chain.joint_names], constant="error")
    if channels:
        check_channels(
            log.q, [where[f"q_{j}"] for j in chain.joint_names], constant="warn", saturation=False
        )
    _check_marker_spread(log, chain)
    _check_marker_scale(log, chain)


def check_channels(
    values: Array, where: Sequence[str], constant: str = "error", saturation: bool = True
) -> None:
    """Constant channels (an error or a warning) and saturated ones (a warning), by column.

    Positions pass ``saturation=False``: a robot may rest at the end of its range.
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


def _unit_hint(value: float, lower: float, upper: float, prismatic: bool) -> str:
    factor, unit = (1000.0, "millimetres") if prismatic else (180.0 / np.pi, "degrees")
    if lower <= value / factor <= upper:
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
    raise WorkbenchError(
        f"{where}: joint '{chain.joint_names[j]}' reaches {value:.6g} {unit} at sample {row} "
        f"(t = {log.t[row]:.6g} s), outside its range [{lower:.4g}, {upper:.4g}] {unit}"
        + _unit_hint(value, lower, upper, prismatic)
    )


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
            raise WorkbenchError(
                f"{source}: positions of marker '{marker.name}' spread over {spread:.4g} m, "
                f"more than {_REACH_FACTOR:.0f} times the robot's reach ({reach:.3g} m); "
                "the values look like millimetres"
            )


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
        carrier = replace(
            chain, tool_parent=chain.parent_of(frame), tool_frame=chain.placement_of(frame)
        )
        modelled = _spread(forward_kinematics(carrier, log.q[rows])[:, :3, 3])
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
