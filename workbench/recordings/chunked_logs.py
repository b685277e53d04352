"""Logs too long for memory: a Parquet file or a directory of chunk files, indexed and read by part.

Input: a Parquet file (row groups are the parts) or a directory of chunk
files (``*.parquet``, ``*.npz``, ``*.csv``, ``*.csv.gz``; name order is time
order), every part a table in the project columns with ``t``, ``q_``,
``dq_``, ``ddq_`` and ``tau_<joint>`` for every joint, time strictly
increasing across parts. :func:`open_chunked_log` reads only the time column
of every part (counts, time order, columns); :func:`read_part` reads one part.

Large logs come **pre-processed**: the zero-phase Butterworth filter (forward
and backward over the whole signal), the central differences and
Savitzky-Golay differentiation of the in-memory readers
(:mod:`workbench.recordings.log_files`) work on whole signals and are not
reproduced part by part, so velocities and accelerations must be logged, and
decimation is not applied (the log's rows are the torque equations, as for a
table log in memory). Log descriptions (``.toml``) stay in memory. NaN or
infinite values are errors naming part, row and column (no dropping of bad
rows).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from workbench.chain import Chain
from workbench.errors import WorkbenchError
from workbench.lie import Array
from workbench.recordings.log import Defaults
from workbench.recordings.tables import read_table

PARTS = (".parquet", ".npz", ".csv", ".csv.gz")
_PREFIXES = ("q", "dq", "ddq", "tau")


@dataclass(frozen=True)
class Part:
    """One block of a chunked log: a file, or one row group of a Parquet file."""

    path: Path
    row_group: int | None  # Parquet row group; None: the whole file
    rows: int
    offset: int  # index of its first sample in the log
    t_first: float
    t_last: float

    @property
    def label(self) -> str:
        return (
            str(self.path)
            if self.row_group is None
            else f"{self.path} (row group {self.row_group})"
        )


@dataclass(frozen=True)
class ChunkedLog:
    """A log read block by block (module docstring), in place of an in-memory :class:`Log`.

    Carries what the torque model and the reports ask of a log: no
    transmission, no speed threshold, the default settings of a table log.
    """

    source: str
    parts: tuple[Part, ...]
    joint_names: tuple[str, ...]
    defaults: Defaults = field(default_factory=Defaults)
    transmission: None = None
    min_speed: None = None
    payload: None = None
    dropped: tuple = ()
    differentiated: bool = False
    decimation: int = 1
    border: int = 0
    clock: None = None  # pre-processed chunks are on their own uniform grid
    excluded: tuple = ()  # every torque channel enters (no description to exclude one)
    effort_unit: None = None  # efforts in N m (revolute) and N (prismatic)
    scale_from_nominal: tuple = ()
    fixtures: tuple = ()  # torques only: no marker rests on anything

    def torque_channels(self) -> np.ndarray:
        """Every joint's torque equations enter (n,) bool."""
        return np.ones(len(self.joint_names), dtype=bool)

    def __len__(self) -> int:
        return sum(p.rows for p in self.parts)

    @property
    def t_range(self) -> tuple[float, float]:
        return self.parts[0].t_first, self.parts[-1].t_last


def is_chunked_log(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a large-log input: a Parquet file or a directory of chunk files (not
    a ROS 2 bag's folder, which holds a ``metadata.yaml``)."""
    path = Path(path)
    if path.is_dir():
        return not (path / "metadata.yaml").is_file()
    return path.suffix.lower() == ".parquet"


def open_chunked_log(path: str | os.PathLike, chain: Chain) -> ChunkedLog:
    """Index a Parquet file or a directory of chunk files for ``chain`` (module docstring).

    Reads the column names and the time column of every part (no other
    data): counts, the time order within and across parts, the columns.
    """
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and _is_part(p))
        if not files:
            raise WorkbenchError(
                f"{path}: no chunk files ({', '.join('*' + s for s in PARTS)}) in the directory"
            )
    elif path.is_file() and path.suffix.lower() == ".parquet":
        files = [path]
    elif not path.exists():
        raise WorkbenchError(f"file not found: {path}")
    else:
        raise WorkbenchError(
            f"{path}: a large log is a Parquet file or a directory of chunk files "
            f"({', '.join(PARTS)})"
        )
    needed = ["t", *(f"{p}_{j}" for p in _PREFIXES for j in chain.joint_names)]
    parts: list[Part] = []
    offset = 0
    for file in files:
        for row_group, t in _times(file, needed):
            if t.size == 0:
                continue
            where = file if row_group is None else f"{file} (row group {row_group})"
            steps = np.diff(t)
            if np.any(~np.isfinite(t)) or np.any(steps <= 0):
                bad = int(np.argmax(~np.isfinite(t[1:]) | (steps <= 0))) + 1
                raise WorkbenchError(
                    f"{where}: row {bad + 1}: time t = {float(t[bad]):.10g} does not increase "
                    f"(previous {float(t[bad - 1]):.10g}); t must increase strictly"
                )
            if parts and not t[0] > parts[-1].t_last:
                raise WorkbenchError(
                    f"{where}: starts at t = {float(t[0]):.10g}, not after the end of "
                    f"{parts[-1].label} (t = {parts[-1].t_last:.10g}); parts must follow each "
                    "other in time "
                    "(name order)"
                )
            parts.append(Part(file, row_group, int(t.size), offset, float(t[0]), float(t[-1])))
            offset += int(t.size)
    if not parts:
        raise WorkbenchError(f"{path}: no samples")
    return ChunkedLog(str(path), tuple(parts), tuple(chain.joint_names))


def _is_part(path: Path) -> bool:
    name = path.name.lower()
    return not name.startswith(".") and name.endswith(PARTS)


def _times(file: Path, needed: list[str]):
    """(row group or None, t) of each block of ``file``, after checking its columns."""
    if file.suffix.lower() == ".parquet":
        import pyarrow.parquet as pq  # only Parquet parts need pyarrow (~0.1 s to import)

        try:
            reader = pq.ParquetFile(file)
        except Exception as exc:  # pyarrow raises several types for a bad file
            raise WorkbenchError(f"cannot read Parquet file {file}: {exc}") from None
        _check_columns(file, reader.schema_arrow.names, needed)
        import pyarrow as pa

        for name in needed:
            kind = reader.schema_arrow.field(name).type
            if not (pa.types.is_floating(kind) or pa.types.is_integer(kind)):
                raise WorkbenchError(
                    f"{file}: column {name} holds {kind} values; a large log's columns are numbers"
                )
        for k in range(reader.num_row_groups):
            t = reader.read_row_group(k, columns=["t"]).column("t").to_numpy()
            yield k, np.asarray(t, dtype=float)
        return
    if file.suffix.lower() == ".npz":
        try:
            with np.load(file, allow_pickle=False) as data:
                names = list(data.files)
                _check_columns(file, names, needed)
                t = _numeric(data["t"], file, "t", None)
            yield None, t
        except (OSError, ValueError, EOFError, KeyError) as exc:
            raise WorkbenchError(f"cannot read NPZ file {file}: {exc}") from None
        return
    table = read_table(file, increasing="t")
    _check_columns(file, list(table.header), needed)
    yield None, table.column("t").copy()


def _numeric(values, where, column: str, rows: int | None) -> Array:
    """A column as a float vector of ``rows`` entries (any count when None), or an error."""
    values = np.asarray(values)
    if values.dtype.kind not in "fiub" or values.ndim != 1:
        raise WorkbenchError(
            f"{where}: column {column} is a {values.ndim}-D array of {values.dtype}; a large "
            "log's columns are vectors of numbers"
        )
    if rows is not None and values.shape[0] != rows:
        raise WorkbenchError(
            f"{where}: column {column} has {values.shape[0]} entries, t has {rows}"
        )
    return values.astype(float)


def _check_columns(file: Path, names: list[str], needed: list[str]) -> None:
    missing = [c for c in needed if c not in names]
    if missing:
        raise WorkbenchError(
            f"{file}: missing column(s) {', '.join(missing[:8])}"
            f"{' ...' if len(missing) > 8 else ''}; a large log needs t, q_, dq_, ddq_ and "
            "tau_<joint> for every joint (pre-processed: see workbench.calibration."
            "chunked_logs)"
        )


def read_part(part: Part, joint_names: tuple[str, ...]) -> dict[str, Array]:
    """The samples of one part: t (m,), q, dq, ddq, tau (m, n); NaN or inf is an error."""
    columns = ["t", *(f"{p}_{j}" for p in _PREFIXES for j in joint_names)]
    suffix = part.path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq  # as in _times

        table = pq.ParquetFile(part.path).read_row_group(part.row_group, columns=columns)
        values = {c: np.asarray(table.column(c).to_numpy(), dtype=float) for c in columns}
    elif suffix == ".npz":
        with np.load(part.path, allow_pickle=False) as data:
            values = {c: _numeric(data[c], part.label, c, part.rows) for c in columns}
    else:
        table = read_table(part.path, increasing="t")
        values = {c: table.column(c) for c in columns}
    out = {"t": values["t"]}
    for p in _PREFIXES:
        block = np.column_stack([values[f"{p}_{j}"] for j in joint_names])
        bad = ~np.isfinite(block)
        if bad.any():
            row, col = np.argwhere(bad)[0]
            raise WorkbenchError(
                f"{part.label}: row {row + 1}, column {p}_{joint_names[col]} is "
                f"{float(block[row, col])}; large logs must be finite (--drop-bad-rows is for "
                "logs read in memory)"
            )
        out[p] = block
    if out["t"].shape[0] != part.rows:
        raise WorkbenchError(f"{part.label}: changed while it was read ({part.rows} rows indexed)")
    return out
