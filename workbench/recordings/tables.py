"""Numeric tables in CSV (optionally gzip-compressed) and NPZ files, with errors that say where.

A table is a header of column names and an (N, m) float array. CSV: the
first non-empty row is the header (a UTF-8 byte-order mark, as spreadsheet
programs write it, is accepted), every other non-empty row holds one number
per column. NPZ: one 1-D array per column, all of one length.

Every problem raises :class:`~workbench.errors.WorkbenchError` naming the
file, the line and the column: CSV lines count from 1 with the header on
line 1; NPZ row ``k`` is called line ``k + 2`` so that both read the same.
With ``drop_bad_rows=True``, rows with a non-numeric, NaN or inf cell (or,
for the ``increasing`` column, a value that does not increase) are left out
and listed in :attr:`Table.dropped` instead.

Well-formed files are parsed by NumPy's C reader; only when that fails is
the file read again cell by cell to find and name the first bad cell. With
``progress=True`` a progress bar (tqdm, on stderr) follows the parse of a
CSV file by bytes read.

Time columns are read once more, exactly, by :func:`column_ns`: a CSV cell's
decimal text becomes integer nanoseconds (:func:`workbench.recordings.stamps.decimal_ns`),
so that epoch seconds with 9 decimals keep every nanosecond that float64
(about 0.24 µs at today's epoch) would round away.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import os
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from workbench.config import MEMORY_BUDGET, check_memory
from workbench.errors import WorkbenchError, excerpt
from workbench.io import atomic_write, check_input_file
from workbench.lie import Array
from workbench.recordings.stamps import LARGEST_NS, TEXT_WIDTH, decimal_ns, float_ns


@dataclass(frozen=True)
class DroppedRow:
    """A row left out with ``drop_bad_rows``: its line, first bad column and why."""

    line: int
    column: str
    reason: str


@dataclass(frozen=True)
class Table:
    """Columns of numbers read from ``path`` (see the module docstring)."""

    path: Path
    header: tuple[str, ...]
    values: Array  # (N, m)
    lines: np.ndarray  # (N,) the line of each row, for messages
    dropped: tuple[DroppedRow, ...] = ()
    rows: np.ndarray | None = None  # (N,) index of each kept row among all data rows
    time_ns: np.ndarray | None = None  # (N,) int64 ns of column "t" where exact (bag topics)

    def __post_init__(self) -> None:
        if self.rows is None:
            object.__setattr__(self, "rows", np.arange(self.values.shape[0]))

    def __len__(self) -> int:
        return self.values.shape[0]

    def index(self, name: str) -> int:
        """Position of column ``name``; an error listing the columns if there is none."""
        try:
            return self.header.index(name)
        except ValueError:
            listing = ", ".join(excerpt(h) for h in self.header[:20])
            more = f" and {len(self.header) - 20} more" if len(self.header) > 20 else ""
            raise WorkbenchError(
                f"{self.path}: line 1: no column {excerpt(name)}; the columns are {listing}{more}"
            ) from None

    def column(self, name: str) -> Array:
        """The values of column ``name`` (N,)."""
        return self.values[:, self.index(name)]

    def where(self, row: int, name: str | None = None) -> str:
        """'FILE: line L[, column C ('name')]' for messages about one cell."""
        text = f"{self.path}: line {int(self.lines[row])}"
        if name is not None:
            text += f", column {self.index(name) + 1} ({excerpt(name)})"
        return text


def read_table(
    path: str | os.PathLike,
    *,
    drop_bad_rows: bool = False,
    increasing: str | None = None,
    progress: bool = False,
) -> Table:
    """Read a CSV (``.csv``, ``.csv.gz``, or any other suffix) or NPZ table.

    ``increasing`` names a column whose values must strictly increase (a
    time column); ``progress`` shows a progress bar while a CSV file is
    parsed. The file is only read.
    """
    path = check_input_file(path, "table file")
    if path.suffix.lower() == ".npz":
        header, values = _read_npz(path)
        lines = np.arange(values.shape[0]) + 2
        table = _clean(path, header, values, lines, drop_bad_rows, increasing)
    else:
        table = _read_csv(path, drop_bad_rows, increasing, progress)
    if len(table) == 0:
        raise WorkbenchError(f"{path}: no data rows after the header")
    return table


def read_header(path: str | os.PathLike) -> list[str]:
    """The column names of a CSV or NPZ table, without reading its rows (errors as read_table)."""
    path = check_input_file(path, "table file")
    if path.suffix.lower() == ".npz":
        return _read_npz(path)[0]
    for line, text in _text_lines(path):
        if text.strip():
            header = [c.strip() for c in _cells(path, line, text)]
            _check_header(path, header)
            return header
    raise WorkbenchError(f"{path}: empty file (expected a header row)")


def column_ns(table: Table, name: str, digits: int = 9) -> np.ndarray:
    """Column ``name`` of ``table`` as exact integers ``round(value * 10**digits)`` (int64):
    time stamps in nanoseconds when the column's unit is 10**-digits s (``digits`` 9 for s,
    0 for ns).

    A bag topic's table gives its exact stamps (``time_ns``); a CSV file's column is read
    again as text and parsed exactly (:func:`~workbench.recordings.stamps.decimal_ns`; a cell
    it does not read, e.g. longer than :data:`~workbench.recordings.stamps.TEXT_WIDTH`
    bytes, from its float value); an NPZ array of integers exactly, of floats from each
    float. Rows are those of ``table`` (bad rows dropped as it dropped them).
    """
    k = table.index(name)
    if table.time_ns is not None and name == "t" and digits == 9:
        return table.time_ns
    path = table.path
    exact = np.zeros(len(table), dtype=bool)
    ns = np.zeros(len(table), dtype=np.int64)
    if path.suffix.lower() == ".npz":
        with np.load(path, allow_pickle=False) as data:
            raw = np.asarray(data[name])[table.rows]
        if raw.dtype.kind in "biu" and np.abs(raw).max(initial=0) < LARGEST_NS / 10**digits:
            return raw.astype(np.int64) * 10**digits
    elif table.time_ns is None:
        ns, exact = _exact_column(table, k, digits)
    values = table.values[:, k]
    beyond = ~exact & ~(np.abs(values) < LARGEST_NS / 10.0**digits)
    if beyond.any():
        row = int(np.argmax(beyond))
        raise WorkbenchError(
            f"{table.where(row, name)}: time {values[row]:g} is beyond the 64-bit nanoseconds "
            "time stamps are kept in (about 285 years)"
        )
    ns[~exact] = float_ns(values[~exact], digits)
    return ns


def _exact_column(table: Table, k: int, digits: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~workbench.recordings.stamps.decimal_ns` of column ``k`` of a CSV table's rows.

    NumPy's reader reads the column as text (:data:`TEXT_WIDTH` bytes; a longer cell is left
    to its float value); every value must be read and agree with the float the table holds,
    within the rounding of both, else (a line of blanks NumPy counts as a row, quoted cells)
    the column is read line by line as :func:`read_table`'s cell-by-cell reader reads it.
    Returns the integers and where they are exact (elsewhere the float values are used).
    """
    path = table.path
    header_line = next(line for line, text in _text_lines(path) if text.strip())
    values = table.values[:, k]
    try:
        with _open_text(path) as fh:
            text = np.loadtxt(
                fh, delimiter=",", skiprows=header_line, usecols=k, dtype=f"S{TEXT_WIDTH}",
                comments=None, ndmin=1, encoding="utf-8",
            )  # fmt: skip
        ns, exact = _parsed(text, table.rows, digits)
        exact &= _agrees(ns, values, digits)
    except (ValueError, UnicodeError, IndexError):
        exact = np.zeros(values.shape, dtype=bool)
    if not exact.all():  # blank lines or quoted cells: read as read_table read them
        cells = [
            _cells(path, line, text)[k].encode("utf-8", "replace")[: TEXT_WIDTH + 1]
            for line, text in _text_lines(path)
            if line > header_line and text.strip()
        ]
        ns, exact = _parsed(np.array(cells, dtype=f"S{TEXT_WIDTH + 1}"), table.rows, digits)
        exact &= _agrees(ns, values, digits)  # a cell Python reads otherwise: its float
    return ns, exact


def _parsed(text: np.ndarray, rows: np.ndarray, digits: int) -> tuple[np.ndarray, np.ndarray]:
    text = text[rows]
    ns, exact = decimal_ns(text, digits)
    return ns, exact & (np.strings.str_len(text) < TEXT_WIDTH)  # else perhaps cut short


def _agrees(ns: np.ndarray, values: Array, digits: int) -> np.ndarray:
    """Whether integers ``ns`` (units of 10**-digits) are the floats ``values`` within the
    rounding of both (half a unit, a few float64 epsilons)."""
    return np.abs(ns / 10.0**digits - values) <= 10.0**-digits + 1e-15 * np.abs(values)


def write_table(path: str | os.PathLike, columns: dict[str, Array]) -> Path:
    """Write named 1-D columns as CSV (17 significant digits) or NPZ (by suffix), atomically."""
    path = Path(path)
    if path.suffix.lower() == ".npz":

        def write(tmp: Path) -> None:
            with open(tmp, "wb") as fh:
                np.savez(fh, **columns)

    else:

        def write(tmp: Path) -> None:
            data = np.column_stack(list(columns.values()))
            header = ",".join(columns)
            np.savetxt(tmp, data, delimiter=",", header=header, comments="", fmt="%.17g")

    return atomic_write(path, write)


# ----------------------------------------------------------------------- CSV
@contextlib.contextmanager
def _open_text(path: Path, progress: bool = False) -> Iterator[io.TextIOBase]:
    """The file as UTF-8 text (BOM skipped); with ``progress``, a bar counts the bytes read."""
    with contextlib.ExitStack() as stack:
        raw = stack.enter_context(open(path, "rb"))
        if progress:
            bar = stack.enter_context(
                tqdm(
                    total=path.stat().st_size, desc=f"reading {path.name}", unit="B",
                    unit_scale=True, leave=False, file=sys.stderr,
                )
            )  # fmt: skip
            raw = _CountedReader(raw, bar)
        if path.suffix.lower() == ".gz":
            gz = stack.enter_context(gzip.GzipFile(fileobj=raw, mode="rb"))
            raw = io.BufferedReader(_BoundedReader(gz, path))
        text = io.TextIOWrapper(raw, encoding="utf-8-sig", newline="")
        stack.callback(text.close)
        yield text


class _CountedReader(io.RawIOBase):
    """A binary file whose reads advance a progress bar (the file is closed by its owner)."""

    def __init__(self, raw: io.BufferedReader, bar: tqdm) -> None:
        self.raw, self.bar = raw, bar

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = self.raw.readinto(buffer)
        self.bar.update(count or 0)
        return count


class _BoundedReader(io.RawIOBase):
    """A decompressed stream that stops at the text budget (:func:`_check_text_size`): a
    .gz trailer holds the size modulo 2^32 and only its last member's, so it can say small
    for a file that expands beyond memory."""

    def __init__(self, raw: gzip.GzipFile, path: Path) -> None:
        self.raw, self.path, self.count = raw, path, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        count = self.raw.readinto(buffer)
        self.count += count or 0
        if self.count > MEMORY_BUDGET / TEXT_MEMORY_FACTOR:
            _check_text_size(self.path, self.count)
        return count


def _text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line, with errors for binary or non-UTF-8 content."""
    try:
        with _open_text(path) as fh:
            yield from enumerate(fh, start=1)
    except UnicodeDecodeError:
        line, byte = _first_non_utf8(path)
        raise WorkbenchError(
            f"{path}: line {line} is not UTF-8 text (byte 0x{byte:02x}); save the file as UTF-8 CSV"
        ) from None
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise WorkbenchError(f"cannot read {path}: {exc}") from None


def _first_non_utf8(path: Path) -> tuple[int, int]:
    """Line and value of the first byte that is not UTF-8 (text is decoded in chunks)."""
    opener = gzip.open if path.suffix.lower() == ".gz" else open
    with opener(path, "rb") as fh:
        data = fh.read()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return data[: exc.start].count(b"\n") + 1, data[exc.start]
    return 1, 0  # not reached: the caller saw a decoding error


TEXT_MEMORY_FACTOR = 8  # bytes of memory per byte of CSV text: the parse, the table, the fits


def _check_text_size(path: Path, size: int | None = None) -> None:
    """Refuse a CSV whose text (``size`` bytes; by default the file's, or a .gz file's
    decompressed size from its trailer) would not fit in memory once read and fitted, before
    reading it (a .gz file is checked again as it decompresses, :class:`_BoundedReader`)."""
    if size is None:
        size = path.stat().st_size
        if path.suffix.lower() == ".gz" and size >= 18:
            with open(path, "rb") as fh:
                fh.seek(-4, os.SEEK_END)
                size = max(size, int.from_bytes(fh.read(4), "little"))  # ISIZE: modulo 2^32
    check_memory(
        f"{path} ({size / 2**20:.0f} MiB of text)",
        TEXT_MEMORY_FACTOR * size,
        f"{TEXT_MEMORY_FACTOR} bytes per byte of text; a log this long is read chunk by chunk "
        "as Parquet or a chunk directory by --kind dynamic",
    )


def _read_csv(path: Path, drop_bad_rows: bool, increasing: str | None, progress: bool) -> Table:
    _check_text_size(path)
    header_line, header, data_lines = None, None, 0
    for line, text in _text_lines(path):
        if not text.strip():
            continue
        if header is None:
            header_line, header = line, [c.strip() for c in _cells(path, line, text)]
        else:
            data_lines += 1
    if header is None:
        raise WorkbenchError(f"{path}: empty file (expected a header row)")
    _check_header(path, header)
    if data_lines:
        values = _fast_parse(path, header_line, len(header), progress)
    else:
        values = np.zeros((0, len(header)))
    if values is not None and values.shape[0] == data_lines:
        lines = _data_line_numbers(path, header_line, values.shape[0])
        return _clean(path, header, values, lines, drop_bad_rows, increasing)
    return _slow_parse(path, header, drop_bad_rows, increasing)


def _fast_parse(path: Path, header_line: int, width: int, progress: bool) -> Array | None:
    """NumPy's parser on a well-formed file with data rows; None when it cannot parse it.

    (No ``warnings.catch_warnings`` here: it is not thread-safe, and large logs
    read their CSV parts on several threads.)
    """
    try:
        with _open_text(path, progress) as fh:
            values = np.loadtxt(
                fh, delimiter=",", skiprows=header_line, ndmin=2, comments=None, dtype=float
            )
    except (ValueError, UnicodeDecodeError, OSError, EOFError):
        return None
    if values.size == 0:
        return np.zeros((0, width))
    return values if values.shape[1] == width else None


def _data_line_numbers(path: Path, header_line: int, rows: int) -> np.ndarray:
    lines = [line for line, text in _text_lines(path) if line > header_line and text.strip()]
    return np.asarray(lines[:rows], dtype=np.int64)


def _cells(path: Path, line: int, text: str) -> list[str]:
    """The cells of one CSV line; a cell longer than the csv module's field limit (131,072
    characters, no number or column name is that long) or an unclosed quote is an error
    naming the line."""
    try:
        return next(csv.reader([text]))
    except csv.Error as exc:
        raise WorkbenchError(f"{path}: line {line}: not a CSV row of a log table ({exc})") from None


def _slow_parse(path: Path, header: list[str], drop_bad_rows: bool, increasing: str | None):
    rows, lines, dropped, index = [], [], [], []
    seen_header = False
    data_row = -1
    for line, text in _text_lines(path):
        if not text.strip():
            continue
        if not seen_header:
            seen_header = True
            continue
        data_row += 1
        cells = _cells(path, line, text)
        if len(cells) != len(header):
            raise WorkbenchError(
                f"{path}: line {line} has {len(cells)} cells; the header has {len(header)}"
            )
        values = np.empty(len(header))
        problem = None
        for k, cell in enumerate(cells):
            try:
                values[k] = float(cell)
            except ValueError:
                problem = (k, f"{excerpt(cell.strip())} is not a number")
                break
        if problem is not None:
            if not drop_bad_rows:
                _raise_cell(path, line, problem[0], header, problem[1])
            dropped.append(DroppedRow(line, header[problem[0]], problem[1]))
            continue
        rows.append(values)
        lines.append(line)
        index.append(data_row)
    values = np.array(rows).reshape(len(rows), len(header))
    table = _clean(
        path, header, values, np.asarray(lines), drop_bad_rows, increasing, np.asarray(index)
    )
    merged = sorted([*dropped, *table.dropped], key=lambda d: d.line)
    return Table(table.path, table.header, table.values, table.lines, tuple(merged), table.rows)


def _raise_cell(path: Path, line: int, k: int, header: list[str], reason: str) -> None:
    raise WorkbenchError(
        f"{path}: line {line}, column {k + 1} ({excerpt(header[k])}): {reason} "
        "(drop_bad_rows / --drop-bad-rows skips such rows)"
    )


def _check_header(path: Path, header: list[str]) -> None:
    seen: set[str] = set()
    for k, name in enumerate(header):
        if not name:
            raise WorkbenchError(f"{path}: line 1, column {k + 1}: empty column name")
        if name in seen:
            raise WorkbenchError(
                f"{path}: line 1, column {k + 1} ({excerpt(name)}): duplicate column"
            )
        seen.add(name)


# ----------------------------------------------------------------------- NPZ
def _read_npz(path: Path) -> tuple[list[str], Array]:
    try:
        data = np.load(path, allow_pickle=False)
        if not isinstance(data, np.lib.npyio.NpzFile):
            raise ValueError("not an NPZ archive (a single .npy array?)")
        with data:
            table = {name: np.asarray(data[name]) for name in data.files}
    except (
        OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, AttributeError,
        NotImplementedError, RuntimeError,
    ) as exc:  # fmt: skip
        reason = "not an NPZ archive" if "pickle" in str(exc) else str(exc)
        raise WorkbenchError(f"cannot read NPZ file {path}: {reason}") from None
    if not table:
        raise WorkbenchError(f"{path}: the NPZ archive holds no arrays")
    shapes = {name: a.shape for name, a in table.items()}
    if len(set(shapes.values())) != 1 or len(next(iter(shapes.values()))) != 1:
        listing = ", ".join(f"{k}: {v}" for k, v in shapes.items())
        raise WorkbenchError(f"{path}: arrays must be 1-D of one length ({listing})")
    header = list(table)
    for name in header:
        if table[name].dtype.kind not in "biuf":
            raise WorkbenchError(
                f"{path}: array '{name}' has dtype {table[name].dtype}; expected numbers"
            )
    return header, np.column_stack([table[name].astype(float) for name in header])


# -------------------------------------------------------- finiteness, order
def _clean(
    path: Path,
    header: list[str],
    values: Array,
    lines: np.ndarray,
    drop_bad_rows: bool,
    increasing: str | None,
    row_index: np.ndarray | None = None,
) -> Table:
    """Reject or drop rows with non-finite cells or a non-increasing ``increasing`` column."""
    if row_index is None:
        row_index = np.arange(values.shape[0])
    bad = ~np.isfinite(values)
    it = header.index(increasing) if increasing in header else None
    order_bad = _not_increasing(values[:, it], bad.any(axis=1)) if it is not None else None
    if not bad.any() and (order_bad is None or not order_bad.any()):
        return Table(path, tuple(header), values, lines, (), row_index)
    dropped: list[DroppedRow] = []
    keep = np.ones(values.shape[0], dtype=bool)
    for row in range(values.shape[0]):
        if bad[row].any():
            k = int(np.argmax(bad[row]))
            reason = f"{values[row, k]} is not finite"
        elif order_bad is not None and order_bad[row]:
            k = it
            previous = values[:row][keep[:row], it]
            last = previous[-1] if previous.size else -np.inf
            reason = f"{increasing} {values[row, k]:.9g} does not increase (previous {last:.9g})"
        else:
            continue
        if not drop_bad_rows:
            _raise_cell(path, int(lines[row]), k, header, reason)
        dropped.append(DroppedRow(int(lines[row]), header[k], reason))
        keep[row] = False
    return Table(path, tuple(header), values[keep], lines[keep], tuple(dropped), row_index[keep])


def _not_increasing(column: Array, skip: np.ndarray) -> np.ndarray:
    """Rows whose value does not exceed the last kept value (rows in ``skip`` are not kept)."""
    bad = np.zeros(column.shape[0], dtype=bool)
    running = np.maximum.accumulate(np.where(skip, -np.inf, column))
    previous = np.concatenate([[-np.inf], running[:-1]])
    candidates = np.flatnonzero(~skip & (column <= previous))
    if candidates.size == 0:
        return bad
    last = -np.inf  # exact, sequential pass from the first problem on (rare)
    for row in range(column.shape[0]):
        if skip[row]:
            continue
        if column[row] <= last:
            bad[row] = True
        else:
            last = column[row]
    return bad
