"""Kinematic calibration of a whole mobile manipulator: the command a user waits for.

example-robot-data's ``tiago`` (48 movable joints), the torso and the 7 arm
joints calibrated (the other 40 locked at zero), 34 static mocap postures of
the tool (``arm_tool_link``) seen by a motion-capture system whose frame is
unknown (``[measurement_frame] known = false``), 5 contiguous folds of model
selection. The log is simulated (the real recording of such a robot is not in
the repository): postures uniform within the joint limits, a truth whose
twists are perturbed by 2 mrad / 2 mm (``perturbed_truth``), a mocap frame
rotated by about 0.7 rad and moved by about 1 m, 0.3 mm of marker noise.
Written with its description to ``FOLDER`` (default: a temporary folder)::

    python benchmarks/bench_kinematic_tiago.py [--folder FOLDER] [--repeats 5]

prints the command it times (``python -m workbench.cli calibrate --model
tiago --log FOLDER/tiago_mocap.toml --kind kinematic --out OUT --quiet``),
the wall time and the CPU time (user + sys of the child) of each run, and
their min and median. The first run is untimed (numba's cache).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
JOINTS = ("torso_lift_joint", *(f"arm_{i}_joint" for i in range(1, 8)))
POSTURES = 34
SEED = 37


def write_log(folder: Path) -> Path:
    """The simulated mocap log and its description in ``folder``; the description's path."""
    import workbench as wb
    from workbench import lie
    from workbench.calibration.simulation.simulate import perturbed_truth
    from workbench.dynamics.kinematics import forward_kinematics

    chain = wb.models.load("tiago", joints=list(JOINTS))
    rng = np.random.default_rng(SEED)
    truth = perturbed_truth(chain, "kinematic", 2e-3, seed=SEED).chain
    q = rng.uniform(chain.lower, chain.upper, size=(POSTURES, chain.n))
    tool = forward_kinematics(truth, q)[:, :3, 3]
    mocap = lie.exp_se3(np.array([0.3, -0.2, 0.6, 1.0, -0.4, 0.3]))  # base in the mocap frame
    seen = tool @ mocap[:3, :3].T + mocap[:3, 3] + rng.normal(scale=3e-4, size=tool.shape)
    table = np.column_stack([q, seen])
    np.savetxt(folder / "tiago_mocap.csv", table, delimiter=",", comments="",
               header=",".join([*JOINTS, "x", "y", "z"]), fmt="%.12g")  # fmt: skip
    listed = ", ".join(f'"{j}"' for j in JOINTS)
    description = folder / "tiago_mocap.toml"
    description.write_text(
        f'description = "tiago torso and arm, {POSTURES} simulated mocap postures"\n\n'
        f'[positions]\nfile = "tiago_mocap.csv"\ncolumns = [{listed}]\nunit = "rad"\n\n'
        '[[markers]]\nname = "tool"\nframe = "arm_tool_link"\nposition = ["x", "y", "z"]\n'
        'unit = "m"\n\n[measurement_frame]\nknown = false\n\n[validation]\nfolds = 5\n'
    )
    return description


def command(description: Path, out: Path) -> list[str]:
    return [
        sys.executable, "-m", "workbench.cli", "calibrate", "--model", "tiago",
        "--log", str(description), "--kind", "kinematic", "--out", str(out), "--quiet",
    ]  # fmt: skip


def timed(args: list[str]) -> tuple[float, float]:
    """Wall and CPU (user + sys of the child) seconds of one run of ``args`` (its ``--out``
    folder removed first)."""
    shutil.rmtree(args[args.index("--out") + 1], ignore_errors=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path)
    parser.add_argument("--repeats", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        folder = options.folder or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        description = write_log(folder)
        args = command(description, folder / "out")
        print(" ".join(args))
        timed(args)
        runs = [timed(args) for _ in range(options.repeats)]
        for wall, cpu in runs:
            print(f"  wall {wall:.2f} s, cpu {cpu:.2f} s")
        walls, cpus = zip(*runs, strict=True)
        print(
            f"wall min {min(walls):.2f} s, median {statistics.median(walls):.2f} s; "
            f"cpu min {min(cpus):.2f} s, median {statistics.median(cpus):.2f} s"
        )


if __name__ == "__main__":
    main()
