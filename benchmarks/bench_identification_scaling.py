"""Time and peak memory of the in-memory dynamic identification against the sample count.

    python benchmarks/bench_identification_scaling.py [--samples 10000 100000 300000]
        [--model panda_arm] [--dir /tmp/workbench-scaling] [--source .] [--keep]

For each sample count: writes the synthetic log of :mod:`bench_large_log`
(sum-of-sines trajectory at 1 kHz, torques of a perturbed ground truth with
viscous and Coulomb friction and ``--noise`` N m noise, default 0.05) as one NPZ table, then runs
the whole command

    python -m workbench.cli calibrate --model MODEL --log LOG.npz --kind dynamic
        --folds 5 --out DIR --quiet

in a fresh process (address space limited to ``--limit-gb``) under
``/usr/bin/time -v`` with ``PYTHONPATH=--source``
(so that two checkouts can be compared on the same logs): its wall time,
peak RSS (``Maximum resident set size``) and held-out relative RMS. The
exponent of time in samples is the slope of log(time) against log(samples)
between consecutive counts. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from bench_large_log import synthetic_log
from timing import machine


def write_log(model: str, samples: int, path: Path, noise: float, chunk: int = 250_000) -> None:
    """The synthetic log of ``samples`` samples as one NPZ table at ``path``."""
    if path.exists():
        return
    _, columns = synthetic_log(model, noise=noise)
    parts = [columns(start, min(chunk, samples - start)) for start in range(0, samples, chunk)]
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(
        path.with_suffix(".part.npz"),
        **{k: np.concatenate([p[k] for p in parts]) for k in parts[0]},
    )
    path.with_suffix(".part.npz").rename(path)


def run_command(source: Path, model: str, log: Path, out: Path, limit_gb: float) -> dict:
    """The whole command on ``log`` from the checkout ``source``: wall time, peak RSS; its
    address space limited to ``limit_gb`` GB (a failed allocation ends it, not the machine)."""
    command = [
        "/usr/bin/time", "-v", sys.executable, "-m", "workbench.cli", "calibrate",
        "--model", model, "--log", str(log), "--kind", "dynamic", "--folds", "5",
        "--out", str(out), "--quiet",
    ]  # fmt: skip
    env = dict(os.environ, PYTHONPATH=str(source.resolve()))
    started = time.perf_counter()
    limit = int(limit_gb * 1e9)

    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    done = subprocess.run(command, capture_output=True, text=True, env=env, preexec_fn=limited)
    wall = time.perf_counter() - started
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    result = {
        "seconds": wall,
        "peak_rss_mb": int(peak.group(1)) / 1024 if peak else float("nan"),
        "exit_code": done.returncode,
    }
    if done.returncode == 0:
        summary = json.loads((out / "summary.json").read_text())
        result["heldout_relative_rms"] = summary["heldout_relative_rms"]
    else:
        result["error"] = done.stderr[-2000:]
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, nargs="+", default=[10_000, 100_000, 300_000])
    parser.add_argument("--model", default="panda_arm")
    parser.add_argument("--noise", type=float, default=0.05, help="torque noise, N m")
    parser.add_argument("--dir", default="/tmp/workbench-scaling")
    parser.add_argument("--source", default=".", help="checkout to run (PYTHONPATH)")
    parser.add_argument("--limit-gb", type=float, default=16.0, help="address space limit")
    parser.add_argument("--keep", action="store_true", help="keep the generated logs")
    parser.add_argument("--json", help="write every number to this file")
    args = parser.parse_args()
    folder = Path(args.dir)
    print(machine(), file=sys.stderr)
    rows = []
    for samples in args.samples:
        log = folder / f"{args.model}-{samples}.npz"
        write_log(args.model, samples, log, args.noise)
        out = folder / f"out-{samples}"
        result = {
            "samples": samples,
            **run_command(Path(args.source), args.model, log, out, args.limit_gb),
        }
        shutil.rmtree(out, ignore_errors=True)
        if not args.keep:
            log.unlink()
        print(json.dumps(result), file=sys.stderr)
        rows.append(result)
    print("| samples | wall [s] | peak RSS [MB] | exponent | held-out relative RMS |")
    print("| --- | --- | --- | --- | --- |")
    for i, row in enumerate(rows):
        slope = "-"
        if i and rows[i - 1]["exit_code"] == 0 and row["exit_code"] == 0:
            ratio = np.log(row["seconds"] / rows[i - 1]["seconds"])
            slope = f"{ratio / np.log(row['samples'] / rows[i - 1]['samples']):.2f}"
        figure = row.get("heldout_relative_rms", f"failed (exit {row['exit_code']})")
        print(f"| {row['samples']:,} | {row['seconds']:.1f} | {row['peak_rss_mb']:.0f} | "
              f"{slope} | {figure} |")  # fmt: skip
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
