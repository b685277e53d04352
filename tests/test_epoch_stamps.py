"""Epoch time stamps read exactly: one recording as CSV and as every kind of bag, by relative paths.

References: Python's ``decimal`` module (exact decimal arithmetic, not the
project's parser) for the text of time stamps; the integer nanoseconds the
test writes into the CSV text and the bags (``rosbags``' writers) for the
times read back; and, for the identified parameters, the same recording as a
CSV: every form must give the CSV's parameters to 1e-12 of the largest.

The stamps sit at 1.73e9 s (today's epoch), where float64 seconds keep only
about 2.4e-7 s: the tests check that this trap is real for the data used
(float64 epoch seconds change the times by more than 1e-8 s and the
parameters by more than 1e-10), so that they would fail on a float64 path.
"""

from __future__ import annotations

import csv
import os
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.calibration.cross_validation import calibrate
from workbench.calibration.selection.validation import Folds
from workbench.calibration.simulation.simulate import perturbed_truth
from workbench.calibration.simulation.trajectories import exciting_trajectory
from workbench.cli import main
from workbench.recordings.log_files import read_log
from workbench.recordings.stamps import decimal_ns
from workbench.recordings.tables import column_ns, read_table
from workbench.testing.bag_writer import write_joint_states

EPOCH_NS = 1_732_712_345_123_456_789  # 2024-11-27, in ns since 1970
SAMPLES, PERIOD_NS = 400, 10_000_000  # 4 s at 100 Hz, stamps jittered by +-20 %
BAGS = {  # file under rec/bags -> storage
    "run.bag": "ros1",
    "run_db3": "sqlite3",  # a ROS 2 bag folder (metadata.yaml)
    "run_mcap": "mcap",
    "bare.mcap": "mcap",  # a storage file alone
    "bare.db3": "sqlite3",
}


def test_decimal_text_is_read_to_the_nanosecond():
    """Integer nanoseconds of decimal text equal Python's exact decimal arithmetic (rounded
    half away from zero); text that is no number, or too large, is marked unread."""
    rng = np.random.default_rng(0)
    whole, fraction = rng.integers(0, 2e9, 300), rng.integers(0, 1e9, 300)
    texts = [f"{s}.{n:09d}" for s, n in zip(whole, fraction, strict=True)]
    scaled = rng.uniform(-1e4, 1e4, 200) * 10.0 ** rng.integers(-9, 3, 200)
    texts += [f"{x:.17g}" for x in scaled]
    texts += ["0", "-0", " 12.5 ", "+.5E+1", "5.", "1e3", "-2.0000000005", "0.00000000049"]
    texts += ["1732712345123456789e-9", "8.999999999e9"]
    bad = ["nan", "inf", "", ".", "-", "1e", "1..2", "1-2", "--1", "1 2", "abc", "9.1e18", "1e1000"]
    for digits in (9, 6, 0):
        ns, read = decimal_ns(np.array([t.encode() for t in texts + bad], dtype="S40"), digits)
        exact = [
            int((Decimal(t.strip()) * 10**digits).quantize(Decimal(1), rounding=ROUND_HALF_UP))
            for t in texts
        ]
        assert read[: len(texts)].all() and not read[len(texts) :].any()
        assert ns[: len(texts)].tolist() == exact


def test_time_columns_are_read_exactly_whatever_the_file(tmp_path):
    """The stamps written come back from a gzip CSV with a line of blanks, a dropped bad row
    and a quoted cell (read as read_table reads them), and from an NPZ array of integer ns;
    a time beyond 64-bit nanoseconds is an error naming the cell."""
    import gzip

    stamps = EPOCH_NS + np.arange(5, dtype=np.int64) * 1_000_000_007
    text = epoch_text(stamps)
    lines = ["t,x", f"{text[0]},1", "   ", f'"{text[1]}",2', f"{text[2]},bad", *text[3:]]
    lines[-2:] = [f"{lines[-2]},4", f"{lines[-1]},5"]
    with gzip.open(tmp_path / "log.csv.gz", "wt") as fh:
        fh.write("\n".join(lines) + "\n")
    table = read_table(tmp_path / "log.csv.gz", drop_bad_rows=True)
    np.testing.assert_array_equal(column_ns(table, "t"), stamps[[0, 1, 3, 4]])
    np.savez(tmp_path / "log.npz", t=stamps, x=np.zeros(5))
    np.testing.assert_array_equal(column_ns(read_table(tmp_path / "log.npz"), "t", 0), stamps)
    (tmp_path / "far.csv").write_text("t,x\n0,1\n1e300,2\n")
    with pytest.raises(wb.WorkbenchError, match=r"far.csv: line 3, column 1 \('t'\): time 1e\+300"):
        column_ns(read_table(tmp_path / "far.csv"), "t")


def recording(chain):
    """Integer ns stamps at the epoch, q and tau of a perturbed truth (noise 0.02 N m)."""
    rng = np.random.default_rng(4)
    offset_ns = np.arange(SAMPLES) * PERIOD_NS + rng.integers(-2, 3, SAMPLES) * PERIOD_NS // 10
    offset_ns[0] = 0
    truth = perturbed_truth(chain, "dynamic", 0.1, seed=1)
    _, q, dq, ddq = exciting_trajectory(chain, SAMPLES, PERIOD_NS / 1e9, times=offset_ns / 1e9)
    tau = wb.inverse_dynamics(truth.chain, q, dq, ddq) + rng.normal(scale=0.02, size=q.shape)
    return EPOCH_NS + offset_ns, q, tau


def write_csv(path: Path, stamps: list[str], q, tau) -> None:
    """The recording with its time column as the given text (the stamps as logged)."""
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        n = q.shape[1]
        writer.writerow(["stamp", *(f"q{i}" for i in range(n)), *(f"tau{i}" for i in range(n))])
        writer.writerows(
            [s, *map(repr, row)] for s, row in zip(stamps, np.c_[q, tau].tolist(), strict=True)
        )


def description(path: Path, data: str, n: int) -> Path:
    """A log description beside ``data`` (a CSV with a stamp column, or a bag)."""
    text = "[validation]\nfolds = 5\n"
    if data.endswith(".csv"):
        q = ", ".join(f'"q{i}"' for i in range(n))
        tau = ", ".join(f'"tau{i}"' for i in range(n))
        text += f'[time]\nfile = "{data}"\ncolumn = "stamp"\n'
        text += f'[positions]\nfile = "{data}"\ncolumns = [{q}]\n'
        text += f'[torques]\nfile = "{data}"\ncolumns = [{tau}]\n'
    else:
        text += f'[positions]\nfile = "{data}"\n[torques]\nfile = "{data}"\n'
    path.write_text(text)
    return path


def epoch_text(stamps_ns: np.ndarray) -> list[str]:
    return [f"{s // 10**9}.{s % 10**9:09d}" for s in stamps_ns.tolist()]


@pytest.fixture(scope="module")
def ur5():
    return wb.models.load("ur5")


@pytest.fixture(scope="module")
def recorded(ur5, tmp_path_factory):
    """rec/log.csv (epoch seconds with 9 decimals), rec/bags/* and a description of each."""
    root = tmp_path_factory.mktemp("recorded")
    (root / "rec" / "bags").mkdir(parents=True)
    stamps, q, tau = recording(ur5)
    write_csv(root / "rec" / "log.csv", epoch_text(stamps), q, tau)
    description(root / "rec" / "csv.toml", "log.csv", ur5.n)
    write_csv(root / "rec" / "relative.csv", epoch_text(stamps - stamps[0]), q, tau)
    description(root / "rec" / "relative.toml", "relative.csv", ur5.n)
    for name, storage in BAGS.items():
        bag = root / "rec" / "bags" / name
        write_joint_states(bag, storage, stamps, ur5.joint_names, position=q, effort=tau)
        description(root / "rec" / f"{name.replace('.', '_')}.toml", f"bags/{name}", ur5.n)
    return root, stamps, q, tau


def relative_paths() -> list[str]:
    """The CSV's description (epoch stamps; stamps from 0), every bag, every bag's
    description: relative, with a folder part."""
    paths = ["rec/csv.toml", "rec/relative.toml", *(f"rec/bags/{name}" for name in BAGS)]
    return paths + [f"rec/{name.replace('.', '_')}.toml" for name in BAGS]


@pytest.fixture(scope="module")
def logs(recorded, ur5) -> dict:
    """The recording read by every relative path, from the folder above ``rec``."""
    root = recorded[0]
    here = Path.cwd()
    os.chdir(root)
    try:
        return {path: read_log(path, ur5, require=("tau",)) for path in relative_paths()}
    finally:
        os.chdir(here)


def test_epoch_csv_column_is_read_exactly(recorded, ur5):
    """The CSV's time column in integer ns is the stamps written, where float64 epoch seconds
    are off by up to about 1.2e-7 s."""
    root, stamps, _, _ = recorded
    table = read_table(root / "rec" / "log.csv")
    np.testing.assert_array_equal(column_ns(table, "stamp"), stamps)
    float64 = table.column("stamp")  # what float64 epoch seconds keep
    error = np.abs((float64 - float64[0]) - (stamps - stamps[0]) / 1e9)
    assert error.max() > 1e-8


def test_every_bag_and_the_csv_give_the_same_log(logs):
    """CSV (epoch stamps, or stamps from 0 as a simulation writes them) and ROS 1 / ROS 2
    sqlite3 / MCAP bags, bag folders and bare files, given directly or by a description:
    bit-identical times (seconds since the first stamp), positions, velocities,
    accelerations and torques (float64 epoch seconds would move the bags' clock away from
    the CSV's that starts at 0)."""
    reference = logs["rec/csv.toml"]
    assert reference.clock["resampled"]  # the jittered stamps, resampled on a uniform grid
    for path, log in logs.items():
        for name in ("t", "q", "dq", "ddq", "tau"):
            np.testing.assert_array_equal(getattr(log, name), getattr(reference, name), path)


def identified(chain, log) -> dict[str, float]:
    report = calibrate(chain, "dynamic", log, Folds(5))
    return {name: value for name, value, _ in report.parameters}


def test_identical_parameters_and_the_float64_trap(recorded, logs, ur5, tmp_path):
    """A bag gives the CSV's parameters to 1e-12 of the largest; the same CSV with its stamps
    as float64 epoch seconds would not (it moves them by more than 1e-10)."""
    _, stamps, q, tau = recorded
    reference = identified(ur5, logs["rec/csv.toml"])
    bag = identified(ur5, logs["rec/bags/run.bag"])
    largest = max(abs(v) for v in reference.values())
    assert bag.keys() == reference.keys()
    assert max(abs(bag[k] - reference[k]) for k in reference) <= 1e-12 * largest
    write_csv(tmp_path / "float64.csv", [f"{s / 1e9:.17g}" for s in stamps.tolist()], q, tau)
    rounded = identified(ur5, read_log(description(tmp_path / "f.toml", "float64.csv", ur5.n), ur5))
    assert max(abs(rounded[k] - reference[k]) for k in reference) > 1e-10 * largest


@pytest.mark.slow
def test_cli_gives_identical_parameters_by_every_path_form(recorded, monkeypatch):
    """``workbench calibrate --log PATH --kind dynamic --folds 5`` from the folder above the
    files, for the CSV's description, every bag and every bag's description: parameters.csv
    equal to 1e-12 of the largest parameter."""
    root, _, _, _ = recorded
    monkeypatch.chdir(root)
    results = {}
    for k, path in enumerate(relative_paths()):
        args = ["calibrate", "--model", "ur5", "--log", path, "--kind", "dynamic"]
        assert main([*args, "--folds", "5", "--quiet", "--out", f"out{k}"]) == 0, path
        with open(root / f"out{k}" / "parameters.csv") as fh:
            results[path] = {row["name"]: float(row["value"]) for row in csv.DictReader(fh)}
    reference = results["rec/csv.toml"]
    largest = max(abs(v) for v in reference.values())
    for path, values in results.items():
        assert values.keys() == reference.keys(), path
        assert max(abs(values[k] - reference[k]) for k in reference) <= 1e-12 * largest, path
