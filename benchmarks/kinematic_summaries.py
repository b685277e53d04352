"""Kinematic calibrations' ``summary.json`` before and after a change: run, then compare.

Runs the shipped kinematic recordings through the command a user runs
(UR10e camera postures, every MUKCa tool position of panda_1, kuka_14 and
dinova_1, the simulated tiago mocap log of ``bench_kinematic_tiago.py``)
into ``FOLDER/<name>/``, or compares every number of two such folders'
``summary.json`` (same keys, same strings, numbers equal to ``--rtol``
relative, default 1e-9, by ``compare_summaries.walk``; the folders' own
paths in strings aside; times skipped)::

    python benchmarks/kinematic_summaries.py run FOLDER
    python benchmarks/kinematic_summaries.py compare BEFORE AFTER [--rtol 1e-9]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from bench_kinematic_tiago import write_log
from compare_summaries import walk

ROOT = Path(__file__).resolve().parents[1]
MUKCA = ROOT / "models" / "mukca"
URDFS = {"panda_1": "panda.urdf", "kuka_14": "iiwa14.urdf", "dinova_1": "gen3lite.urdf"}


def runs(folder: Path) -> dict[str, list[str]]:
    """Each run's name and its command's arguments after ``calibrate``."""
    todo = {"ur10e": ["--model", "ur10e", "--log", str(ROOT / "models/ur10/calibration.toml")]}
    for robot, urdf in URDFS.items():
        for toml in sorted((MUKCA / robot).glob("*.toml")):
            todo[f"{robot}_{toml.stem}"] = [
                "--model", str(MUKCA / "urdf" / urdf), "--log", str(toml)
            ]  # fmt: skip
    (folder / "tiago_log").mkdir(parents=True, exist_ok=True)
    todo["tiago"] = ["--model", "tiago", "--log", str(write_log(folder / "tiago_log"))]
    return todo


def run(folder: Path) -> None:
    for name, args in runs(folder).items():
        command = [sys.executable, "-m", "workbench.cli", "calibrate", *args,
                   "--kind", "kinematic", "--out", str(folder / name), "--quiet"]  # fmt: skip
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        print(f"{name}: exit {done.returncode}", flush=True)
        if done.returncode not in (0, 1):
            print(done.stderr, file=sys.stderr)


def compare(before: Path, after: Path, rtol: float) -> int:
    """Per run, its numbers and those beyond ``rtol`` relative, and other differences
    (:func:`compare_summaries.walk`); 1 when any."""
    worst = 0
    for path in sorted(before.glob("*/summary.json")):
        other = after / path.parent.name / "summary.json"
        if not other.exists():
            print(f"{path.parent.name}: missing in {after}")
            worst = 1
            continue
        mine = json.loads(path.read_text().replace(str(before), "FOLDER"))
        theirs = json.loads(other.read_text().replace(str(after), "FOLDER"))
        numbers, texts = [], []
        walk(mine, theirs, "", numbers, texts)
        beyond = [(d, where) for d, where in numbers if d > rtol]
        print(f"{path.parent.name}: {len(numbers)} numbers, {len(beyond)} differ beyond {rtol:g}")
        for d, where in beyond[:20]:
            print(f"    {where}: relative {d:.1e}")
        for line in texts:
            print("    differs:", line)
        worst = max(worst, int(bool(beyond or texts)))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("run").add_argument("folder", type=Path)
    c = sub.add_parser("compare")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--rtol", type=float, default=1e-9)
    options = parser.parse_args()
    if options.action == "run":
        run(options.folder)
    else:
        sys.exit(compare(options.before, options.after, options.rtol))


if __name__ == "__main__":
    main()
