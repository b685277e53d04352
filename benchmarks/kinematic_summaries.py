"""Kinematic calibrations' ``summary.json`` before and after a change: run, then compare.

Runs the shipped kinematic recordings through the command a user runs
(UR10e camera postures, every MUKCa tool position of panda_1, kuka_14 and
dinova_1, the simulated tiago mocap log of ``bench_kinematic_tiago.py``)
into ``FOLDER/<name>/``, or compares every number of two such folders'
``summary.json`` (same keys, same strings, numbers equal to ``--rtol``
relative, default 1e-9; the folders' own paths in strings aside)::

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


def differences(a: object, b: object, rtol: float, where: str = "") -> list[str]:
    """Where ``a`` and ``b`` differ: keys, strings, or numbers beyond ``rtol`` relative."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys {sorted(a.keys() ^ b.keys())}"]
        return [d for k in a for d in differences(a[k], b[k], rtol, f"{where}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} against {len(b)} entries"]
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, rtol, f"{where}[{i}]")
        ]
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool):
        if abs(a - b) <= rtol * max(abs(a), abs(b)):
            return []
        return [f"{where}: {a!r} against {b!r} (relative {abs(a - b) / max(abs(a), abs(b)):.1e})"]
    return [] if a == b else [f"{where}: {a!r} against {b!r}"]


def compare(before: Path, after: Path, rtol: float) -> int:
    worst = 0
    for path in sorted(before.glob("*/summary.json")):
        other = after / path.parent.name / "summary.json"
        if not other.exists():
            print(f"{path.parent.name}: missing in {after}")
            worst = 1
            continue
        mine = json.loads(path.read_text().replace(str(before), "FOLDER"))
        theirs = json.loads(other.read_text().replace(str(after), "FOLDER"))
        found = differences(mine, theirs, rtol)
        count = sum(1 for _ in _numbers(json.loads(path.read_text())))
        print(f"{path.parent.name}: {count} numbers, {len(found)} differ beyond {rtol:g}")
        for line in found[:20]:
            print("   ", line)
        worst = max(worst, int(bool(found)))
    return worst


def _numbers(value: object):
    if isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)
    elif isinstance(value, list):
        for v in value:
            yield from _numbers(v)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


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
