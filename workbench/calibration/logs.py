"""Calibration logs: read and write CSV / NPZ tables of joint and tool measurements.

A log is a table with one row per sample and named columns (CSV: a header
row; NPZ: one 1-D array per name):

* ``t``: time in s, strictly increasing;
* per joint ``q_<joint>`` (required), ``dq_<joint>``, ``ddq_<joint>``,
  ``tau_<joint>`` with the joint names of the model;
* tool position ``px, py, pz`` in the base frame, optionally the tool
  orientation as a unit quaternion ``qx, qy, qz, qw``.

When only q is logged, dq and ddq come from a Savitzky-Golay differentiator
(``scipy.signal.savgol_filter`` with ``deriv=1, 2``) over a uniform time grid.

Every problem raises :class:`~workbench.errors.WorkbenchError` naming the
file, the line (CSV lines count from 1, the header is line 1; NPZ rows are
called line ``row + 2`` so both read the same) and the column. With
``drop_bad_rows=True`` rows with non-numeric, NaN or inf cells or a time
that does not increase are dropped instead and listed in :attr:`Log.dropped`.
"""

from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.signal import savgol_filter

from workbench.chain import Chain
from workbench.errors import WorkbenchError
from workbench.io import atomic_write
from workbench.lie import Array

POSITION = ("px", "py", "pz")
ORIENTATION = ("qx", "qy", "qz", "qw")
_PREFIXES = ("q", "dq", "ddq", "tau")


@dataclass(frozen=True)
class DroppedRow:
    """A row left out with ``drop_bad_rows``: its line, first bad column and why."""

    line: int
    column: str
    reason: str


@dataclass(frozen=True)
class Log:
    """Samples of a calibration log, in the model's joint order."""

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
    differentiated: bool = field(default=False)  # dq/ddq from Savitzky-Golay

    def __len__(self) -> int:
        return self.t.shape[0]

    def subset(self, rows: np.ndarray) -> Log:
        """The log restricted to ``rows`` (index array or boolean mask)."""
        take = {
            name: None if getattr(self, name) is None else getattr(self, name)[rows]
            for name in ("t", "q", "dq", "ddq", "tau", "position", "orientation")
        }
        return Log(
            **take,
            joint_names=self.joint_names,
            source=self.source,
            dropped=self.dropped,
            differentiated=self.differentiated,
        )


def read_log(
    path: str | os.PathLike,
    chain: Chain,
    *,
    require: tuple[str, ...] = (),
    drop_bad_rows: bool = False,
    savgol_window: int = 11,
    savgol_order: int = 4,
) -> Log:
    """Read a CSV or NPZ log for ``chain`` (see the module docstring).

    ``require`` lists what the calibration needs: ``"tau"`` and/or
    ``"position"``. The input file is only read.
    """
    path = Path(path)
    if not path.is_file():
        raise WorkbenchError(f"log file not found: {path}")
    if path.suffix.lower() == ".npz":
        header, cells = _read_npz(path)
    else:
        header, cells = _read_csv(path)
    columns = _check_header(path, header, chain, require)
    values, dropped = _parse_cells(path, header, cells, drop_bad_rows)
    if values.shape[0] < 2:
        raise WorkbenchError(f"{path}: needs at least 2 valid samples, found {values.shape[0]}")

    def block(names: list[str]) -> Array | None:
        if not all(name in columns for name in names):
            return None
        return np.ascontiguousarray(values[:, [columns[name] for name in names]])

    joints = list(chain.joint_names)
    t = values[:, columns["t"]].copy()
    q = block([f"q_{j}" for j in joints])
    dq = block([f"dq_{j}" for j in joints])
    ddq = block([f"ddq_{j}" for j in joints])
    differentiated = dq is None or ddq is None
    if differentiated:
        dq_sg, ddq_sg = savgol_derivatives(path, t, q, savgol_window, savgol_order)
        dq = dq_sg if dq is None else dq
        ddq = ddq_sg if ddq is None else ddq
    orientation = block(list(ORIENTATION))
    if orientation is not None:
        orientation = orientation / np.linalg.norm(orientation, axis=1, keepdims=True)
    return Log(
        t=t,
        q=q,
        dq=dq,
        ddq=ddq,
        tau=block([f"tau_{j}" for j in joints]),
        position=block(list(POSITION)),
        orientation=orientation,
        joint_names=chain.joint_names,
        source=str(path),
        dropped=tuple(dropped),
        differentiated=differentiated,
    )


def savgol_derivatives(
    path: str | os.PathLike, t: Array, q: Array, window: int, order: int
) -> tuple[Array, Array]:
    """dq, ddq of uniformly sampled q by Savitzky-Golay differentiation (deriv = 1, 2)."""
    steps = np.diff(t)
    dt = float(np.median(steps))
    uneven = np.abs(steps - dt) > 1e-6 * dt
    if np.any(uneven):
        line = int(np.argmax(uneven)) + 3
        raise WorkbenchError(
            f"{path}: line {line}, column 't': time step {steps[uneven][0]:.6g} s differs from "
            f"{dt:.6g} s; Savitzky-Golay differentiation of q needs uniform sampling "
            "(log dq_<joint> and ddq_<joint>, or resample)"
        )
    if window % 2 == 0 or window <= order or window > t.shape[0]:
        raise WorkbenchError(
            f"{path}: Savitzky-Golay window {window} must be odd, larger than the order "
            f"{order} and at most the number of samples {t.shape[0]}"
        )
    kw = dict(window_length=window, polyorder=order, delta=dt, axis=0, mode="interp")
    return savgol_filter(q, deriv=1, **kw), savgol_filter(q, deriv=2, **kw)


def write_log(path: str | os.PathLike, log: Log) -> Path:
    """Write ``log`` as CSV or NPZ (by the suffix of ``path``), atomically."""
    path = Path(path)
    table = {"t": log.t}
    for prefix in _PREFIXES:
        block = getattr(log, prefix)
        if block is not None:
            table.update({f"{prefix}_{j}": block[:, i] for i, j in enumerate(log.joint_names)})
    for names, block in ((POSITION, log.position), (ORIENTATION, log.orientation)):
        if block is not None:
            table.update({name: block[:, i] for i, name in enumerate(names)})
    if path.suffix.lower() == ".npz":
        return atomic_write(path, lambda tmp: _save_npz(tmp, table))
    return atomic_write(path, lambda tmp: _save_csv(tmp, table))


def _save_npz(tmp: Path, table: dict[str, Array]) -> None:
    with open(tmp, "wb") as fh:
        np.savez(fh, **table)


def _save_csv(tmp: Path, table: dict[str, Array]) -> None:
    data = np.column_stack(list(table.values()))
    np.savetxt(tmp, data, delimiter=",", header=",".join(table), comments="", fmt="%.17g")


def _read_csv(path: Path) -> tuple[list[str], list[tuple[int, list[str]]]]:
    with open(path, newline="", encoding="utf-8") as fh:
        rows = [(i + 1, row) for i, row in enumerate(csv.reader(fh)) if row]
    if not rows:
        raise WorkbenchError(f"{path}: empty log (expected a header row)")
    header = [name.strip() for name in rows[0][1]]
    for line, row in rows[1:]:
        if len(row) != len(header):
            raise WorkbenchError(
                f"{path}: line {line} has {len(row)} cells; the header has {len(header)}"
            )
    return header, rows[1:]


def _read_npz(path: Path) -> tuple[list[str], list[tuple[int, list]]]:
    try:
        with np.load(path, allow_pickle=False) as data:
            table = {name: np.asarray(data[name]) for name in data.files}
    except (OSError, ValueError) as exc:
        raise WorkbenchError(f"cannot read NPZ log {path}: {exc}") from exc
    header = list(table)
    lengths = {name: a.shape for name, a in table.items()}
    shapes = set(lengths.values())
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        listing = ", ".join(f"{k}: {v}" for k, v in lengths.items())
        raise WorkbenchError(f"{path}: arrays must be 1-D of one length ({listing})")
    columns = [table[name] for name in header]
    rows = [(i + 2, [c[i] for c in columns]) for i in range(columns[0].shape[0])]
    return header, rows


def _check_header(
    path: Path, header: list[str], chain: Chain, require: tuple[str, ...]
) -> dict[str, int]:
    """Map column names to indices; reject duplicates, unknown joints and missing columns."""
    known = {"t", *POSITION, *ORIENTATION}
    known |= {f"{p}_{j}" for p in _PREFIXES for j in chain.joint_names}
    columns: dict[str, int] = {}
    for k, name in enumerate(header):
        where = f"{path}: line 1, column {k + 1} ('{name}')"
        if name in columns:
            raise WorkbenchError(f"{where}: duplicate column")
        if name not in known:
            prefix, _, joint = name.partition("_")
            if prefix in _PREFIXES and joint:
                raise WorkbenchError(
                    f"{where}: unknown joint '{joint}'; the model's {chain.n} joints are "
                    f"{', '.join(chain.joint_names)}"
                )
            raise WorkbenchError(
                f"{where}: unknown column; expected t, q_/dq_/ddq_/tau_<joint>, "
                "px, py, pz, qx, qy, qz, qw"
            )
        columns[name] = k
    needed = ["t", *(f"q_{j}" for j in chain.joint_names)]
    if "tau" in require:
        needed += [f"tau_{j}" for j in chain.joint_names]
    if "position" in require:
        needed += list(POSITION)
    partial_orientation = [c for c in ORIENTATION if c in columns]
    if partial_orientation:
        needed += list(ORIENTATION)
    missing = [name for name in needed if name not in columns]
    if missing:
        logged = sum(f"q_{j}" in columns for j in chain.joint_names)
        raise WorkbenchError(
            f"{path}: line 1: missing column(s) {', '.join(missing)} "
            f"(the log has q for {logged} of the model's {chain.n} joints)"
        )
    return columns


def _parse_cells(
    path: Path, header: list[str], rows: list[tuple[int, list]], drop_bad_rows: bool
) -> tuple[Array, list[DroppedRow]]:
    """Numeric (N, columns) array; bad cells raise or drop their row (with the reason)."""
    it = header.index("t")
    kept, dropped = [], []
    last_t = -np.inf
    for line, row in rows:
        problem = None
        values = np.empty(len(header))
        for k, cell in enumerate(row):
            try:
                values[k] = float(cell)
            except (TypeError, ValueError):
                problem = (k, f"'{cell}' is not a number")
                break
            if not np.isfinite(values[k]):
                problem = (k, f"{cell} is not finite")
                break
        if problem is None and values[it] <= last_t:
            problem = (it, f"time {values[it]:.9g} does not increase (previous {last_t:.9g})")
        if problem is not None:
            k, reason = problem
            if not drop_bad_rows:
                raise WorkbenchError(
                    f"{path}: line {line}, column {k + 1} ('{header[k]}'): {reason} "
                    "(drop_bad_rows / --drop-bad-rows skips such rows)"
                )
            dropped.append(DroppedRow(line, header[k], reason))
            continue
        last_t = values[it]
        kept.append(values)
    return np.array(kept).reshape(len(kept), len(header)), dropped
