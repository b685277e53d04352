"""Calibration logs: joint trajectories with measured torques, tool poses or marker poses.

Two ways to give a log:

* a **table** (CSV with a header row, optionally ``.gz``, or NPZ) in the
  project's column convention, one row per sample:

  - ``t``: time in s, strictly increasing (read exactly to the nanosecond, e.g. epoch
    seconds with 9 decimals, and made relative to the first row:
    :mod:`workbench.recordings.stamps`);
  - per joint ``q_<joint>`` (required), ``dq_<joint>``, ``ddq_<joint>``,
    ``tau_<joint>`` with the joint names of the model (joint side, SI);
  - drive temperatures (the ``temperature`` torque-model term), per joint
    ``temperature_<joint>`` or one ``temperature`` for every joint (deg C or
    K: only differences from the log's mean enter the model);
  - tool position ``px, py, pz`` in the base frame, optionally the tool
    orientation as a unit quaternion ``qx, qy, qz, qw``.

  When only q is logged, dq and ddq come from a Savitzky-Golay
  differentiator (``scipy.signal.savgol_filter`` with ``deriv=1, 2``),
  after torques on a non-uniform clock are resampled to a uniform grid and
  split at gaps (:mod:`workbench.recordings.clock`);

* a **log description** (``.toml``, :mod:`workbench.recordings.recording`)
  that says how to read a recording as it came off a robot: files and
  columns, units, motor side and transmission, filtering, model terms;

* a **ROS bag** (ROS 1 ``.bag``, a ROS 2 bag folder, a ``.db3`` or ``.mcap``
  file) whose ``/joint_states`` carry the joints' positions (and velocities
  and efforts): read as a description naming only the bag would
  (:func:`workbench.recordings.recording.read_bag`).

Either way the result is a :class:`Log` in the model's joint order and SI
units, checked for plausibility against the model
(:mod:`workbench.recordings.plausibility`). Table errors name the file,
line and column (:mod:`workbench.recordings.tables`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from workbench.chain import Chain
from workbench.errors import WorkbenchError, excerpt
from workbench.lie import Array
from workbench.recordings import bags, plausibility, recording, signals
from workbench.recordings.clock import resample, uniform_clock
from workbench.recordings.log import Defaults, Log, Marker
from workbench.recordings.stamps import seconds_since
from workbench.recordings.tables import (
    DroppedRow,
    Table,
    column_ns,
    read_header,
    read_table,
    write_table,
)

POSITION = ("px", "py", "pz")
ORIENTATION = ("qx", "qy", "qz", "qw")
UNIT_QUATERNION = 0.01  # a quaternion's norm may differ from 1 by this (rounded logs)
_PREFIXES = ("q", "dq", "ddq", "tau", "temperature")

__all__ = [
    "ORIENTATION",
    "POSITION",
    "Defaults",
    "DroppedRow",
    "Log",
    "Marker",
    "read_log",
    "write_log",
]


def read_log(
    path: str | os.PathLike,
    chain: Chain,
    *,
    require: tuple[str, ...] = (),
    drop_bad_rows: bool = False,
    savgol_window: int = 11,
    savgol_order: int = 4,
    progress: bool = False,
) -> Log:
    """Read a table log or a log description (``.toml``) for ``chain``.

    ``require`` lists what the calibration needs: ``"tau"`` and/or
    ``"position"`` (tool or marker positions); ``progress`` shows a progress
    bar while CSV files are parsed. The input files are only read.
    """
    path = Path(path)
    description = path.suffix.lower() == ".toml" or bags.is_bag(path)
    if bags.is_bag(path):
        log = recording.read_bag(path, chain, progress=progress)
    elif description:
        log = recording.read_description(
            path, chain, drop_bad_rows=drop_bad_rows, progress=progress
        )
    else:
        table = read_table(path, drop_bad_rows=drop_bad_rows, increasing="t", progress=progress)
        log = _table_log(table, chain, require, savgol_window, savgol_order)
    _check_required(log, require)
    plausibility.check_log(log, chain, channels=not description, describable=not description)
    return log


def logged_joints(
    path: str | os.PathLike, model_joints: Sequence[str] = ()
) -> tuple[list[str] | None, dict[str, float], dict[str, float]]:
    """The joints a log calibrates, the values of joints it locks, and the values at which a
    bag holds joints still (before the model loads).

    A log description names them in ``[model] joints`` and ``[model.locked]``,
    or by its ``columns`` tables (joint = column), or by a ``columns`` list of
    joint names of the whole robot (``model_joints``:
    :func:`workbench.models.movable_joints`); a table by its ``q_<joint>``
    columns; a bag by the joints its ``/joint_states`` move (the joints it
    holds still are locked at their logged positions, as far as the model
    has them). None: the log does not say (one column per model joint, in
    the model's order). A whole robot is cut to these joints
    (:func:`workbench.models.load`).
    """
    path = Path(path)
    if path.suffix.lower() == ".toml":
        return recording.described_joints(path, model_joints)
    if bags.is_bag(path):  # the joints that move; those held still are locked where they stand
        states = bags.read_joint_states(path, recording.JOINT_STATES)
        still = recording.still_joints(states)
        return [name for name in states.names if name not in still], {}, still
    if not path.is_file():
        return None, {}, {}
    header = read_header(path)
    names = [name[2:] for name in header if name.startswith("q_")]
    unknown = [name for name in names if model_joints and name not in model_joints]
    if unknown:
        raise WorkbenchError(
            f"{path}: column(s) {', '.join(f'q_{name}' for name in unknown)} name no movable "
            f"joint of the model; its movable joints are {', '.join(model_joints)}"
        )
    return names or None, {}, {}


def _table_log(table: Table, chain: Chain, require, savgol_window, savgol_order) -> Log:
    """The Log of a table in the project's columns (module docstring)."""
    path = table.path
    columns = _check_header(table, chain, require)
    if len(table) < 2:
        raise WorkbenchError(f"{path}: needs at least 2 valid samples, found {len(table)}")

    def block(names: list[str]) -> Array | None:
        if not all(name in columns for name in names):
            return None
        return np.ascontiguousarray(table.values[:, [columns[name] for name in names]])

    joints = list(chain.joint_names)
    stamps = column_ns(table, "t")  # exact integer ns, then seconds since the first stamp
    t = seconds_since(stamps, int(stamps[0]))
    q = block([f"q_{j}" for j in joints])
    dq = block([f"dq_{j}" for j in joints])
    ddq = block([f"ddq_{j}" for j in joints])
    tau = block([f"tau_{j}" for j in joints])
    temperature = block([f"temperature_{j}" for j in joints])
    per_joint = [f"temperature_{j}" in columns for j in joints]
    if any(per_joint) and not all(per_joint):
        missing = [
            f"temperature_{j}" for j, given in zip(joints, per_joint, strict=True) if not given
        ]
        raise WorkbenchError(f"{path}: temperature columns missing: {', '.join(missing)}")
    if "temperature" in columns:
        if any(per_joint):
            raise WorkbenchError(f"{path}: give temperature or temperature_<joint>, not both")
        temperature = np.repeat(block(["temperature"]), len(joints), axis=1)
    differentiated = dq is None or ddq is None
    clock, segments = None, None
    if differentiated and tau is None:  # poses: derivatives only for the plausibility checks
        order = np.argsort(t, kind="stable")
        if np.any(np.diff(t[order]) <= 0):
            raise WorkbenchError(f"{path}: column 't' repeats a time stamp")
        gradient = np.empty_like(q)
        gradient[order] = np.gradient(q[order], t[order], axis=0)
        dq = gradient if dq is None else dq
    elif differentiated:
        clock = uniform_clock(t, where=f"{path}, column 't'")
        if clock.resampled:  # torques on a real clock: a uniform grid before differentiating
            q, tau = resample(clock, t, q), resample(clock, t, tau)
            temperature = None if temperature is None else resample(clock, t, temperature)
            dq, ddq = (None if x is None else resample(clock, t, x) for x in (dq, ddq))
            t, segments = clock.t, clock.segments if len(clock.segments) > 1 else None
        dq_sg, ddq_sg = np.empty_like(q), np.empty_like(q)
        for a, b in clock.segments:
            where = f"{path}, samples {a} to {b}" if len(clock.segments) > 1 else str(path)
            dq_sg[a:b], ddq_sg[a:b] = savgol_derivatives(
                where, clock.period, q[a:b], savgol_window, savgol_order
            )
        dq = dq_sg if dq is None else dq
        ddq = ddq_sg if ddq is None else ddq
    orientation = block(list(ORIENTATION))
    if orientation is not None:
        norm = np.linalg.norm(orientation, axis=1, keepdims=True)
        off = np.flatnonzero(~(np.abs(norm[:, 0] - 1.0) <= UNIT_QUATERNION))
        if off.size:
            raise WorkbenchError(
                f"{path}: the quaternion (qx, qy, qz, qw) of sample {off[0]} has norm "
                f"{norm[off[0], 0]:.6g}, not 1 ({off.size} sample(s) so): a corrupted row, or "
                "no quaternion in these columns?"
            )
        orientation = orientation / norm
    return Log(
        t=t,
        q=q,
        dq=dq,
        ddq=ddq,
        tau=tau,
        position=block(list(POSITION)),
        orientation=orientation,
        joint_names=chain.joint_names,
        source=str(path),
        dropped=table.dropped,
        differentiated=differentiated,
        columns={name: f"{path}, column {k + 1} ('{name}')" for name, k in columns.items()},
        segments=segments,
        temperature=temperature,
        clock=clock.summary() if clock is not None and clock.resampled else None,
    )


def savgol_derivatives(
    where: str, period: float, q: Array, window: int, order: int
) -> tuple[Array, Array]:
    """dq, ddq of ``q`` sampled every ``period`` s by Savitzky-Golay differentiation
    (deriv = 1, 2); ``where`` names the samples in errors."""
    if window % 2 == 0 or window <= order or window > q.shape[0]:
        raise WorkbenchError(
            f"{where}: Savitzky-Golay window {window} must be odd, larger than the order "
            f"{order} and at most the number of samples {q.shape[0]}"
        )
    kw = dict(window_length=window, polyorder=order, delta=period, axis=0, mode="interp")
    savgol = signals.scipy_signal().savgol_filter
    return savgol(q, deriv=1, **kw), savgol(q, deriv=2, **kw)


def write_log(path: str | os.PathLike, log: Log) -> Path:
    """Write ``log`` as a table (CSV or NPZ by the suffix of ``path``), atomically."""
    table = {"t": log.t}
    for prefix in _PREFIXES:
        block = getattr(log, prefix)
        if block is not None:
            table.update({f"{prefix}_{j}": block[:, i] for i, j in enumerate(log.joint_names)})
    for names, block in ((POSITION, log.position), (ORIENTATION, log.orientation)):
        if block is not None:
            table.update({name: block[:, i] for i, name in enumerate(names)})
    return write_table(path, table)


def _check_header(table: Table, chain: Chain, require: tuple[str, ...]) -> dict[str, int]:
    """Map column names to indices; reject unknown joints and missing columns."""
    path = table.path
    known = {"t", "temperature", *POSITION, *ORIENTATION}
    known |= {f"{p}_{j}" for p in _PREFIXES for j in chain.joint_names}
    columns: dict[str, int] = {}
    for k, name in enumerate(table.header):
        where = f"{path}: line 1, column {k + 1} ({excerpt(name)})"
        if name not in known:
            prefix, _, joint = name.partition("_")
            if prefix in _PREFIXES and joint:
                raise WorkbenchError(
                    f"{where}: unknown joint {excerpt(joint)}; the model's {chain.n} joints are "
                    f"{', '.join(chain.joint_names)}"
                )
            raise WorkbenchError(
                f"{where}: unknown column; expected t, q_/dq_/ddq_/tau_/temperature_<joint>, "
                "temperature, px, py, pz, qx, qy, qz, qw (or describe the file in a .toml log "
                "description)"
            )
        columns[name] = k
    needed = ["t", *(f"q_{j}" for j in chain.joint_names)]
    if "tau" in require:
        needed += [f"tau_{j}" for j in chain.joint_names]
    if "position" in require:
        needed += list(POSITION)
    if any(c in columns for c in ORIENTATION):
        needed += list(ORIENTATION)
    missing = [name for name in needed if name not in columns]
    if missing:
        logged = sum(f"q_{j}" in columns for j in chain.joint_names)
        raise WorkbenchError(
            f"{path}: line 1: missing column(s) {', '.join(missing)} "
            f"(the log has q for {logged} of the model's {chain.n} joints)"
        )
    return columns


def _check_required(log: Log, require: tuple[str, ...]) -> None:
    if "tau" in require and log.tau is None:
        raise WorkbenchError(f"{log.source}: this calibration needs joint torques; none are logged")
    measured = any(m.position is not None for m in log.measured_markers())
    if "position" in require and not (measured or log.fixtures):
        raise WorkbenchError(
            f"{log.source}: this calibration needs measured tool or marker positions, or "
            "fixtures; none logged"
        )
