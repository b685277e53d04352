"""Cost of reading a CSV time column exactly (integer nanoseconds) beside the table's own parse.

    python benchmarks/bench_epoch_stamps.py [--rows 1000000] [--repeats 5] [--dir /tmp/...]

Writes a CSV of ``--rows`` rows (an epoch time column with 9 decimals, 6
positions and 6 torques as ``%.17g``, about 230 bytes a row) and times, each
as min and median of ``--repeats`` runs: ``read_table`` (NumPy's float parse,
what every table costs) and ``column_ns`` (the time column read again as text
and parsed to integer nanoseconds, :mod:`workbench.recordings.stamps`), with
the peak memory of the process. Checks that ``column_ns`` gives the stamps
written.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
from pathlib import Path

import numpy as np
from timing import machine, timed

from workbench.recordings.tables import column_ns, read_table


def write_csv(path: Path, rows: int) -> np.ndarray:
    rng = np.random.default_rng(0)
    stamps = 1_732_712_345_123_456_789 + np.arange(rows, dtype=np.int64) * 1_000_000
    stamps += rng.integers(-200_000, 200_000, rows)
    values = rng.normal(size=(rows, 12))
    with open(path, "w") as fh:
        fh.write("t," + ",".join([f"q{i}" for i in range(6)] + [f"tau{i}" for i in range(6)]))
        fh.write("\n")
        for start in range(0, rows, 100_000):  # block by block: bounded memory
            block = slice(start, start + 100_000)
            sec, nsec = np.divmod(stamps[block], 1_000_000_000)
            text = np.char.add(
                np.char.add(sec.astype(str), "."), np.char.zfill(nsec.astype(str), 9)
            )
            body = np.column_stack([text, np.char.mod("%.17g", values[block])])
            fh.write("\n".join(",".join(row) for row in body.tolist()) + "\n")
    return stamps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    folder = args.dir or Path(tempfile.mkdtemp(prefix="epoch-stamps-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        path = folder / "log.csv"
        stamps = write_csv(path, args.rows)
        print(machine())
        print(f"{args.rows} rows, {path.stat().st_size / 2**20:.0f} MiB")
        table, lo, med = timed(lambda: read_table(path), args.repeats)
        print(f"read_table: min {lo:.3f} s, median {med:.3f} s")
        ns, lo, med = timed(lambda: column_ns(table, "t"), args.repeats)
        print(f"column_ns:  min {lo:.3f} s, median {med:.3f} s")
        assert np.array_equal(ns, stamps), "column_ns differs from the stamps written"
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**10
        print(f"peak memory {peak:.0f} MiB; stamps exact")
    finally:
        if args.dir is None:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
