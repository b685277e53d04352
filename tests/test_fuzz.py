"""Property-based fuzzing of the readers of user files: any bytes give a result or a WorkbenchError.

The CSV/NPZ table reader (:func:`workbench.recordings.tables.read_table`),
the log reader on top of it (:func:`workbench.recordings.log_files.read_log`),
the TOML reader with its typed accessors (:func:`workbench.config.read_toml`,
:class:`workbench.config.Section`) and log descriptions
(:func:`workbench.recordings.recording.read_description`) get random bytes,
random text near the valid formats, and mutations of valid files.
"""

from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import workbench as wb
from workbench.config import Section, read_toml
from workbench.recordings.log_files import read_log
from workbench.recordings.recording import read_description
from workbench.recordings.tables import read_table

FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
CHAIN = None


def chain() -> wb.Chain:
    global CHAIN
    if CHAIN is None:
        CHAIN = wb.models.load("planar_2r")
    return CHAIN


def _survives(read, data: bytes, name: str) -> None:
    """``read(path)`` of ``data`` written to ``name`` in a new folder returns or raises
    WorkbenchError; any other exception fails the test."""
    with tempfile.TemporaryDirectory(prefix="fuzz-") as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        try:
            read(path)
        except wb.WorkbenchError:
            pass


CELLS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(10**20), 10**20).map(str),
    st.sampled_from(["", " ", "nan", "inf", "-", "1e999", "0x10", "1,2", '"3"', "\ufeff", "é"]),
    st.text(max_size=5),
)
COLUMNS = st.sampled_from(
    ["t", "q_joint_1", "q_joint_2", "dq_joint_1", "tau_joint_2", "px", "py", "pz", "qw", "x", ""]
)


@st.composite
def csv_like(draw) -> bytes:
    """A header of plausible and implausible columns and rows of odd cells."""
    header = draw(st.lists(COLUMNS, min_size=1, max_size=6))
    rows = draw(st.lists(st.lists(CELLS, max_size=7), max_size=8))
    text = "\n".join([",".join(header), *(",".join(r) for r in rows)])
    bom = draw(st.sampled_from([b"", b"\xef\xbb\xbf"]))
    return bom + text.encode("utf-8", "surrogatepass")


def _valid_log_bytes() -> bytes:
    names = ["t", "q_joint_1", "q_joint_2"]
    rows = [[0.01 * k, 0.1 * np.sin(k / 5), 0.2 * np.cos(k / 7)] for k in range(40)]
    lines = [",".join(names), *(",".join(repr(v) for v in r) for r in rows)]
    return "\n".join(lines).encode()


@st.composite
def mutated(draw, original: bytes) -> bytes:
    """``original`` with a few bytes replaced, deleted or inserted, or cut short."""
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        action = draw(st.sampled_from(["replace", "delete", "insert", "truncate"]))
        byte = draw(st.integers(0, 255))
        if action == "replace" and data:
            data[at] = byte
        elif action == "delete" and data:
            del data[at]
        elif action == "insert":
            data.insert(at, byte)
        else:
            del data[at:]
    return bytes(data)


def _npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


VALID_NPZ = _npz_bytes({"t": np.arange(5.0), "q_joint_1": np.zeros(5), "q_joint_2": np.ones(5)})


# ------------------------------------------------------------------ tables, logs
@FUZZ
@given(data=st.binary(max_size=400), name=st.sampled_from(["a.csv", "a.npz", "a.csv.gz", "a"]))
def test_read_table_on_random_bytes(data, name):
    _survives(lambda p: read_table(p, increasing="t"), data, name)


@FUZZ
@given(data=csv_like(), drop=st.booleans())
def test_read_table_on_csv_like_text(data, drop):
    _survives(lambda p: read_table(p, drop_bad_rows=drop, increasing="t"), data, "a.csv")


@FUZZ
@given(data=st.one_of(csv_like(), mutated(_valid_log_bytes())), drop=st.booleans())
def test_read_log_on_csv_like_text(data, drop):
    _survives(lambda p: read_log(p, chain(), drop_bad_rows=drop), data, "log.csv")


@FUZZ
@given(data=mutated(VALID_NPZ))
def test_read_log_on_mutated_npz(data):
    _survives(lambda p: read_log(p, chain()), data, "log.npz")


@FUZZ
@given(
    arrays=st.dictionaries(
        COLUMNS.filter(bool),
        st.one_of(
            st.lists(st.floats(), max_size=6).map(np.array),
            st.just(np.array(["a", "b"])),
            st.just(np.zeros((2, 2))),
            st.just(np.array([1 + 2j])),
            st.just(np.array(3.0)),
        ),
        max_size=4,
    )
)
def test_read_log_on_odd_npz_arrays(arrays):
    _survives(lambda p: read_log(p, chain()), _npz_bytes(arrays), "log.npz")


def test_npz_with_a_pickled_object_is_refused(tmp_path):
    buffer = io.BytesIO()
    np.savez(buffer, t=np.array([object()], dtype=object))
    path = tmp_path / "log.npz"
    path.write_bytes(buffer.getvalue())
    with pytest.raises(wb.WorkbenchError, match=r"log\.npz"):
        read_table(path)


def test_npz_that_is_a_zip_of_something_else(tmp_path):
    path = tmp_path / "log.npz"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("t.npy", b"not an array")
    with pytest.raises(wb.WorkbenchError, match=r"log\.npz"):
        read_table(path)


# ---------------------------------------------------------------------- TOML
TOML_VALUES = st.sampled_from(
    ['1', '1.5', '-1', 'nan', 'inf', 'true', '"false"', '"x"', '[1, 2]', '[[1, 2], [3]]',
     '["a", 1]', '{a = 1}', '1979-05-27', '[]', '"data.csv"', '[0.0, 1.0]']
)  # fmt: skip
KEYS = st.sampled_from(
    ["knots", "file", "columns", "unit", "side", "ratios", "scale", "sample_period", "x", "folds"]
)
SECTIONS = st.sampled_from(
    ["", "[time]", "[positions]", "[torques]", "[transmission]", "[processing]", "[model]",
     "[[markers]]", "[validation]", "[model.payload]", "[measurement_frame]"]
)  # fmt: skip


@st.composite
def toml_like(draw) -> bytes:
    """Sections of key = value lines, some valid TOML, some not."""
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        lines.append(draw(SECTIONS))
        for _ in range(draw(st.integers(0, 4))):
            lines.append(f"{draw(KEYS)} = {draw(TOML_VALUES)}")
    if draw(st.booleans()):
        lines.insert(draw(st.integers(0, len(lines))), draw(st.text(max_size=10)))
    return "\n".join(lines).encode("utf-8", "surrogatepass")


def _read_every_way(path: Path) -> None:
    """read_toml, then every typed accessor on every key of every table."""
    top = Section(read_toml(path, "problem file"), str(path))
    for name, value in top.table.items():
        tables = [value] if isinstance(value, dict) else []
        for table in tables:
            section = top.section(name)
            for key in list(table):
                for accessor in ("number", "integer", "boolean", "string", "strings", "array"):
                    try:
                        getattr(section, accessor)(key)
                    except wb.WorkbenchError:
                        pass
            try:
                section.done()
            except wb.WorkbenchError:
                pass
    top.done()


@FUZZ
@given(data=st.one_of(st.binary(max_size=300), toml_like()))
def test_read_toml_and_accessors(data):
    _survives(_read_every_way, data, "problem.toml")


@FUZZ
@given(data=toml_like(), csv=st.one_of(st.just(_valid_log_bytes()), csv_like()))
def test_read_description(data, csv):
    def read(path: Path) -> None:
        (path.parent / "data.csv").write_bytes(csv.replace(b"q_joint_", b"j"))
        read_description(path, chain())

    _survives(read, data, "log.toml")
