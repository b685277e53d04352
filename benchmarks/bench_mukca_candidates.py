"""MUKCa's sockets: what each kinematic candidate gives on other tool positions, and what folds say.

For each tool position of a robot of ``models/mukca``, every candidate of
the default selection (``frames``, ``offsets`` and ``twists`` with the
evidence's ridge: :mod:`workbench.calibration.problems.kinematic_problem`) is
fitted on the whole log in one process, and its calibrated chain predicts
the ball centres of every other tool position of the same robot (the
figures of ``bench_mukca.py``: spread and distance error, mm, means over the
other positions). Beside them, each candidate's held-out score on folds of
the training log alone (mean per-sample squared error, 1e-6 m^2, with its
standard error over the samples), for several fold schemes: the default
(the last 20 %), 5 contiguous folds, 5 folds of random samples, leave one
out, and ``C`` clusters of configurations (k-means on (cos q, sin q), ten
restarts from a fixed seed; every fold holds out one cluster, so its score
measures extrapolation to another region of the joint space). It shows
which fold scores agree with the other tool positions' figures:

    python benchmarks/bench_mukca_candidates.py ROBOT [--clusters 3 5] [--models DIR]

(``--models DIR``: another folder of data sets, as for ``bench_mukca.py``.)
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

from workbench import models
from workbench.calibration.fitting.kinematic import KinematicProblem
from workbench.calibration.problems.kinematic_problem import KinematicCalibrationProblem
from workbench.calibration.problems.problem import Options
from workbench.calibration.selection.selection import cross_validate
from workbench.calibration.selection.validation import EndSplit, Folds
from workbench.errors import WorkbenchError
from workbench.recordings.log_files import logged_joints, read_log

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_mukca  # noqa: E402
from bench_mukca import DISTANCE, positions, urdf_name  # noqa: E402


def read(robot: str, position: str):
    """The chain (the log's joints) and the log of one tool position."""
    urdf = str(bench_mukca.MODELS / "urdf" / urdf_name(robot))
    path = str(bench_mukca.MODELS / robot / f"{position}.toml")
    joints, locked, held = logged_joints(path, models.movable_joints(urdf))
    chain = models.load(urdf, moving=True, joints=joints, locked=locked, held=held)
    with warnings.catch_warnings():  # the Kinova's joint 6 beyond its URDF limit
        warnings.simplefilter("ignore")
        return chain, read_log(path, chain, require=("position",))


def figures(chain, log) -> tuple[float, float]:
    """Spread and distance error (m) of ``chain``'s predicted ball centres on ``log``."""
    problem = KinematicProblem.from_log(log)
    points = problem.predict(problem.start(chain))[0][0]
    centres = [points[f.rows].mean(axis=0) for f in problem.fixtures]
    spread = np.mean([np.linalg.norm(points[f.rows] - c, axis=1).mean()
                      for f, c in zip(problem.fixtures, centres, strict=True)])  # fmt: skip
    return float(spread), float(abs(np.linalg.norm(centres[0] - centres[1]) - DISTANCE))


def clusters(q: np.ndarray, k: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """Leave-one-cluster-out folds: k-means on (cos q, sin q), the best of ten restarts."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([np.cos(q), np.sin(q)])
    best = (np.inf, None)
    for _ in range(10):
        centres = X[rng.choice(len(X), k, replace=False)]
        for _ in range(100):
            label = np.argmin(((X[:, None] - centres[None]) ** 2).sum(axis=2), axis=1)
            moved = np.array([X[label == j].mean(axis=0) if (label == j).any() else centres[j]
                              for j in range(k)])  # fmt: skip
            if np.allclose(moved, centres):
                break
            centres = moved
        inertia = float(((X - centres[label]) ** 2).sum())
        if inertia < best[0]:
            best = (inertia, label)
    label = best[1]
    return [(np.flatnonzero(label != j), np.flatnonzero(label == j)) for j in np.unique(label)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("robot")
    parser.add_argument("--clusters", type=int, nargs="*", default=[3, 5])
    parser.add_argument("--models", type=Path, default=bench_mukca.MODELS)
    parser.add_argument("--schemes", nargs="*", help="only these fold schemes (by their names)")
    options = parser.parse_args()
    bench_mukca.MODELS = options.models.resolve()
    tools = positions(options.robot)
    logs = {p: read(options.robot, p) for p in tools}
    for train in tools:
        chain, log = logs[train]
        problem = KinematicCalibrationProblem(chain, log, Options())
        candidates = problem.candidates[:3]  # compliance: the twists fit without masses
        schemes = {
            "last 20 %": problem.folds(EndSplit(0.2)),
            "5 contiguous": problem.folds(Folds(5)),
            "5 random": problem.folds(Folds(5, True, 0)),
            "leave one out": problem.folds(Folds(-1)),
        } | {f"{k} clusters": clusters(log.q, k) for k in options.clusters}
        if options.schemes is not None:
            schemes = {k: v for k, v in schemes.items() if k in options.schemes}
        print(f"{options.robot} {train} ({len(log)} configurations)")
        for c in candidates:
            fit = problem.fit(None, c)
            other = [figures(problem.chain(fit), logs[p][1]) for p in tools if p != train]
            spread, distance = 1e3 * np.mean(other, axis=0)
            line = f"  {c.name:<28} other positions {spread:.3f} / {distance:.3f} mm;"
            for name, folds in schemes.items():
                fit_on = lambda t, c=c, p=problem: p.fit(t, c)  # noqa: E731
                try:
                    score = cross_validate(problem, folds, fit_on, c)
                except WorkbenchError:  # a cluster that holds every sample of a socket
                    line += f"  {name}: leaves a socket out"
                    continue
                loss = 1e6 * score.losses(problem)
                line += f"  {name} {loss.mean():.3f} +- {loss.std(ddof=1) / np.sqrt(loss.size):.3f}"
            print(line + f"  (ridge {fit.ridge:.3g})", flush=True)


if __name__ == "__main__":
    main()
