"""MUKCa's sockets: train on one tool position, predict every other with calibrated.urdf alone.

For each robot of ``models/mukca`` and each tool position, runs the command a
user runs (``python -m workbench.cli calibrate --model URDF --log POSITION.toml
--kind kinematic``, timed) and loads the ``calibrated.urdf`` it writes with
Pinocchio; on every other tool position of the same robot the ball centres of
each socket's configurations are predicted from that URDF alone (the
``ball_link`` origin, other joints at zero). Held-out figures per (train,
test) pair: the spread (mean distance of a socket's predicted centres to their
centroid, averaged over the two sockets) and the distance error (|centroid
distance - 0.05 m|); the table gives their means over all ordered pairs, and
the nominal model's (the URDF as shipped) on the same test positions.

    python benchmarks/bench_mukca.py [robot ...]        # default: all three
    python benchmarks/bench_mukca.py --models DIR [robot ...]

``--models DIR``: another folder laid out as ``models/mukca`` (``urdf/`` and
one folder of logs per data set, e.g. written by ``models/mukca/make_logs.py
MUKCA/data panda_2 ... --out DIR`` from the other data sets of MUKCa's
repository); a data set's URDF is that of its kind (its name's prefix), and
``panda_plus_bota.urdf`` for a Panda ``..._with_sensor``.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pinocchio as pin

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models" / "mukca"
ROBOTS = ("panda_1", "kuka_14", "dinova_1")  # the data sets shipped in models/mukca
URDFS = {"panda": "panda.urdf", "kuka": "iiwa14.urdf", "dinova": "gen3lite.urdf"}
DISTANCE = 0.05  # m between the sockets' centres
# MUKCa's own optimiser on this machine (mm): spread, distance error; the shipped three are
# the figures, the other data sets of MUKCa's repository were measured by running it
# (commit 05a05ab, its defaults: spread, distance and regulariser 1e-4; BENCHMARKS.md)
MUKCA = {
    "panda_1": (0.937, 0.666), "kuka_14": (0.371, 0.094), "dinova_1": (4.652, 1.156),
    "dinova_2": (3.971, 1.290), "panda_1_with_sensor": (0.255, 0.081),
    "panda_2": (0.631, 0.259), "panda_2_clean": (0.467, 0.214), "panda_3": (0.221, 0.059),
    "panda_3_bis": (0.317, 0.076), "panda_4": (0.302, 0.167), "panda_4_clean": (0.254, 0.069),
    "panda_6": (0.257, 0.099), "panda_7": (0.444, 0.149),
}  # fmt: skip


def urdf_name(robot: str) -> str:
    """The nominal URDF of a data set: that of its kind (the name's prefix)."""
    return "panda_plus_bota.urdf" if robot.endswith("_with_sensor") else URDFS[robot.split("_")[0]]


def positions(robot: str) -> list[str]:
    return sorted(p.stem for p in (MODELS / robot).glob("*.toml"))


def sockets(robot: str, position: str) -> tuple[list[str], list[np.ndarray]]:
    """The joint names and each socket's configurations (N_s, n) of one tool position."""
    path = MODELS / robot / f"{position}.csv"
    names = path.read_text().splitlines()[0].split(",")
    table = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    return names[1:], [table[table[:, 0] == s, 1:] for s in (0, 1)]


def figures(urdf: Path, robot: str, position: str) -> tuple[float, float]:
    """Spread and distance error (m) of ``urdf``'s predicted ball centres on ``position``."""
    model = pin.buildModelFromUrdf(str(urdf))
    data = model.createData()
    frame = model.getFrameId("ball_link")
    names, configurations = sockets(robot, position)
    index = [model.idx_qs[model.getJointId(name)] for name in names]
    centres, spreads = [], []
    for Q in configurations:
        points = []
        for q in Q:
            full = pin.neutral(model)
            full[index] = q
            pin.framesForwardKinematics(model, data, full)
            points.append(data.oMf[frame].translation.copy())
        points = np.array(points)
        centre = points.mean(axis=0)
        centres.append(centre)
        spreads.append(np.linalg.norm(points - centre, axis=1).mean())
    return float(np.mean(spreads)), float(abs(np.linalg.norm(centres[0] - centres[1]) - DISTANCE))


def calibrate(robot: str, position: str, out: Path) -> tuple[float, int]:
    """Run the command on one tool position; its wall time and exit code."""
    command = [
        sys.executable, "-m", "workbench.cli", "calibrate",
        "--model", str(MODELS / "urdf" / urdf_name(robot)),
        "--log", str(MODELS / robot / f"{position}.toml"),
        "--kind", "kinematic", "--out", str(out), "--quiet",
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr}")
    return seconds, done.returncode


def table(robot: str, folder: Path) -> dict:
    """The pairs' figures (mm), means, and the command times (s) of one robot."""
    urdf = MODELS / "urdf" / urdf_name(robot)
    tools = positions(robot)
    nominal = {p: figures(urdf, robot, p) for p in tools}
    pairs, times = [], []
    for train in tools:
        out = folder / robot / train
        seconds, code = calibrate(robot, train, out)
        times.append(seconds)
        for test in tools:
            if test != train:
                spread, distance = figures(out / "calibrated.urdf", robot, test)
                pairs.append((train, test, spread, distance, *nominal[test], code))
    mean = np.mean([p[2:6] for p in pairs], axis=0) * 1e3
    return {"pairs": pairs, "mean_mm": mean, "times_s": times}


def main(robots: list[str]) -> None:
    print(
        "| robot | spread mm | distance error mm | nominal spread / distance | MUKCa | command s |"
    )
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as folder:
        for robot in robots:
            result = table(robot, Path(folder))
            for train, test, s, d, ns, nd, code in result["pairs"]:
                print(
                    f"  {robot} {train} -> {test}: {s * 1e3:.3f} / {d * 1e3:.3f} mm "
                    f"(nominal {ns * 1e3:.3f} / {nd * 1e3:.3f}; exit {code})",
                    file=sys.stderr,
                )
            s, d, ns, nd = result["mean_mm"]
            peer = " / ".join(str(v) for v in MUKCA[robot]) if robot in MUKCA else "-"
            times = ", ".join(f"{t:.1f}" for t in result["times_s"])
            print(f"| {robot} | {s:.3f} | {d:.3f} | {ns:.3f} / {nd:.3f} | {peer} | {times} |")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("robots", nargs="*", help="data sets (default: every one of the folder)")
    parser.add_argument("--models", type=Path, default=MODELS, help="folder of the data sets")
    arguments = parser.parse_args()
    MODELS = arguments.models.resolve()
    found = sorted(p.name for p in MODELS.iterdir() if p.is_dir() and p.name != "urdf")
    main(arguments.robots or found)
