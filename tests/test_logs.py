"""Calibration logs: round trips, Savitzky-Golay derivatives, and one error per bad-log case."""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.calibration.simulation.simulate import simulate_log
from workbench.recordings.log_files import read_log, write_log


@pytest.fixture(scope="module")
def chain() -> wb.Chain:
    return wb.models.load("planar_2r")


def write_csv(path, header, rows) -> None:
    path.write_text("\n".join([",".join(header), *(",".join(map(str, r)) for r in rows)]) + "\n")


def good_table(chain):
    header = ["t", *(f"q_{j}" for j in chain.joint_names), *(f"tau_{j}" for j in chain.joint_names)]
    rows = [[0.01 * k, 0.05 * k, -0.05 * k, 1.0 + 0.1 * k, 2.0 - 0.1 * k] for k in range(20)]
    return header, rows


@pytest.mark.parametrize("suffix", [".csv", ".npz"])
def test_round_trip(tmp_path, chain, suffix):
    log, _ = simulate_log(chain, kind="twist", samples=50)
    path = write_log(tmp_path / f"log{suffix}", log)
    back = read_log(path, chain, require=("tau",))
    for name in ("q", "dq", "ddq", "tau"):
        np.testing.assert_array_equal(getattr(back, name), getattr(log, name))
    # times are read as integer nanoseconds since the first: 0.01 * 35 comes back as 0.35
    np.testing.assert_allclose(back.t, log.t - log.t[0], rtol=0, atol=0.5e-9)
    assert back.position is None and not back.differentiated


def test_savgol_derivatives(tmp_path, chain):
    log, _ = simulate_log(chain, kind="twist", samples=400)
    only_q = log.subset(np.arange(len(log)))
    path = tmp_path / "q.csv"
    header = ["t", *(f"q_{j}" for j in chain.joint_names), *(f"tau_{j}" for j in chain.joint_names)]
    write_csv(path, header, np.column_stack([only_q.t, only_q.q, only_q.tau]).tolist())
    back = read_log(path, chain, require=("tau",), savgol_window=11)
    inner = slice(10, -10)
    assert back.differentiated
    assert np.abs(back.dq[inner] - log.dq[inner]).max() < 1e-3 * np.abs(log.dq).max()
    assert np.abs(back.ddq[inner] - log.ddq[inner]).max() < 1e-2 * np.abs(log.ddq).max()


def test_input_not_modified(tmp_path, chain):
    header, rows = good_table(chain)
    path = tmp_path / "log.csv"
    write_csv(path, header, rows)
    before = path.read_bytes()
    read_log(path, chain, require=("tau",))
    assert path.read_bytes() == before


def check_error(tmp_path, chain, header, rows, *fragments, require=("tau",)):
    path = tmp_path / "bad.csv"
    write_csv(path, header, rows)
    with pytest.raises(wb.WorkbenchError) as info:
        read_log(path, chain, require=require)
    message = str(info.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message


def test_missing_column(tmp_path, chain):
    header, rows = good_table(chain)
    check_error(tmp_path, chain, header[:-1], [r[:-1] for r in rows], "line 1", "missing", "tau_")


def test_missing_position_for_kinematic(tmp_path, chain):
    header, rows = good_table(chain)
    check_error(tmp_path, chain, header, rows, "line 1", "px, py, pz", require=("position",))


def test_unknown_joint(tmp_path, chain):
    header, rows = good_table(chain)
    header[1] = "q_elbow_typo"
    check_error(tmp_path, chain, header, rows, "line 1, column 2", "unknown joint 'elbow_typo'")


def test_wrong_joint_count(tmp_path, chain):
    header, rows = good_table(chain)
    drop = header.index(f"q_{chain.joint_names[-1]}")
    header = header[:drop] + header[drop + 1 :]
    rows = [r[:drop] + r[drop + 1 :] for r in rows]
    check_error(tmp_path, chain, header, rows, "line 1", f"q for 1 of the model's {chain.n}")


def test_non_numeric_cell(tmp_path, chain):
    header, rows = good_table(chain)
    rows[4][2] = "abc"
    check_error(tmp_path, chain, header, rows, "line 6, column 3", "'abc' is not a number")


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_non_finite_cell(tmp_path, chain, value):
    header, rows = good_table(chain)
    rows[7][3] = value
    check_error(tmp_path, chain, header, rows, "line 9, column 4", "not finite")


def test_time_not_increasing(tmp_path, chain):
    header, rows = good_table(chain)
    rows[10][0] = rows[9][0]
    check_error(tmp_path, chain, header, rows, "line 12, column 1 ('t')", "does not increase")


def test_ragged_row(tmp_path, chain):
    header, rows = good_table(chain)
    rows[3] = rows[3][:-1]
    check_error(tmp_path, chain, header, rows, "line 5 has 4 cells")


def test_npz_bad_cell_names_line_and_column(tmp_path, chain):
    header, rows = good_table(chain)
    data = np.array(rows, dtype=float)
    data[5, 1] = np.nan
    path = tmp_path / "bad.npz"
    np.savez(path, **{name: data[:, k] for k, name in enumerate(header)})
    with pytest.raises(wb.WorkbenchError, match=r"line 7, column 2 \('q_"):
        read_log(path, chain, require=("tau",))


def test_drop_bad_rows_counts_them(tmp_path, chain):
    header, rows = good_table(chain)
    header += [f"{p}_{j}" for p in ("dq", "ddq") for j in chain.joint_names]
    rows = [[*r, 0.0, 0.0, 0.0, 0.0] for r in rows]
    rows[2][1] = "x"
    rows[5][3] = "nan"
    rows[8][0] = 0.0
    path = tmp_path / "bad.csv"
    write_csv(path, header, rows)
    log = read_log(path, chain, require=("tau",), drop_bad_rows=True)
    assert len(log) == len(rows) - 3
    assert [(d.line, d.column) for d in log.dropped] == [(4, header[1]), (7, header[3]), (10, "t")]


def test_a_log_too_long_for_memory_is_refused_before_it_is_read(tmp_path, chain, monkeypatch):
    """A .csv.gz whose decompressed text (its gzip trailer) would need more memory than the
    budget is refused naming the file and the size, before a line is parsed."""
    import gzip

    from workbench.recordings import tables

    header, rows = good_table(chain)
    path = tmp_path / "log.csv.gz"
    text = ",".join(header) + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n"
    with gzip.open(path, "wt") as fh:
        fh.write(text)
    monkeypatch.setattr(tables, "TEXT_MEMORY_FACTOR", 2**34 / len(text))
    with pytest.raises(wb.WorkbenchError, match=r"log.csv.gz \(0 MiB of text\) needs about"):
        read_log(path, chain, require=("tau",))


def test_a_gzip_whose_trailer_says_small_is_stopped_as_it_expands(tmp_path, chain, monkeypatch):
    """A .csv.gz's trailer holds only its last member's size (modulo 2^32): a second, empty
    member makes a long log look short. Its text is counted as it decompresses and the read
    stops at the budget with the same message, naming the file."""
    import gzip

    from workbench import config
    from workbench.recordings import tables

    header, _ = good_table(chain)
    rows = [[0.01 * k, 1e-3 * k, -1e-3 * k, 1.0 + 1e-3 * k, 2.0 - 1e-3 * k] for k in range(1000)]
    text = ",".join(header) + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n"
    path = tmp_path / "log.csv.gz"
    path.write_bytes(gzip.compress(text.encode()) + gzip.compress(b""))
    assert int.from_bytes(path.read_bytes()[-4:], "little") == 0  # the trailer says empty
    budget = tables.TEXT_MEMORY_FACTOR * (path.stat().st_size + len(text)) // 2
    assert tables.TEXT_MEMORY_FACTOR * path.stat().st_size < budget  # the first check passes
    monkeypatch.setattr(config, "MEMORY_BUDGET", budget)
    monkeypatch.setattr(tables, "MEMORY_BUDGET", budget)
    with pytest.raises(wb.WorkbenchError, match=r"log.csv.gz \(\d+ MiB of text\) needs about"):
        read_log(path, chain, require=("tau",))
    monkeypatch.setattr(config, "MEMORY_BUDGET", 2 * tables.TEXT_MEMORY_FACTOR * len(text))
    monkeypatch.setattr(tables, "MEMORY_BUDGET", 2 * tables.TEXT_MEMORY_FACTOR * len(text))
    assert len(read_log(path, chain, require=("tau",))) == len(rows)
