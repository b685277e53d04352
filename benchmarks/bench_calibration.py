"""Kinematic calibration of the iiwa from 10,000 tool positions: the fit, the whole CLI, vs FD.

Same log for every row: ``simulate_log(chain, samples=10_000, perturb=1e-2)``
(noise-free tool positions in the base frame), which is also what
``workbench simulate-log iiwa --kind kinematic --samples 10000`` writes.

* fit: ``calibrate_kinematic`` (Levenberg-Marquardt in the identifiable
  subspace; residuals and the factors of the normal equations from the
  compiled kernels), median of 5 after a warm-up, with the default thread
  pool and with one thread;
* central FD: the same solver with the Jacobian replaced by central
  differences of the (compiled) residual through ``retract``, 2 x 48
  residual evaluations per linearisation, folded by a numpy QR; one run;
* CLI: ``workbench calibrate --model iiwa --log LOG.csv --kind kinematic
  --out DIR --quiet`` in a new process (interpreter start, imports, reading
  the CSV, the fit on all samples and on the first 80 %, held-out errors,
  plots, URDF, report), median of 3 wall times after one untimed run.

    python benchmarks/bench_calibration.py
"""

from __future__ import annotations

import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
from timing import machine, median_seconds, row

import workbench as wb
from workbench.calibration.fitting.kinematic import (
    KinematicProblem,
    Linearisation,
    calibrate_kinematic,
)
from workbench.calibration.simulation.simulate import simulate_log
from workbench.runtime import available_cores, set_num_threads
from workbench.testing import central_differences


class FiniteDifferenceProblem(KinematicProblem):
    """The kinematic problem with a central-difference Jacobian (step 1e-6) through retract."""

    def linearise(self, model, weights=None):
        r = self.residual(model)
        p = 6 * model.chain.n + sum(self.sizes)
        J = central_differences(lambda x: self.residual(self.retract(model, x)), np.zeros(p))
        P, preferred = self.prior(model)
        R = np.linalg.qr(np.column_stack([J @ P, r]), mode="r")
        Rw = R
        if weights is not None:
            s = np.sqrt(weights)[:, None]
            Rw = np.linalg.qr(s * np.column_stack([J @ P, r]), mode="r")
        return Linearisation(r, R=R, Rw=Rw, P=P, preferred=preferred)


def cli_seconds(repeats: int = 3) -> float:
    """Median wall time of ``workbench calibrate`` on a simulated 10,000-sample CSV log."""
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "log.csv"
        subprocess.run(
            ["workbench", "simulate-log", "iiwa", "--out", str(log), "--kind", "kinematic",
             "--samples", "10000"],
            check=True, capture_output=True,
        )  # fmt: skip
        times = []
        for k in range(repeats + 1):
            out = Path(tmp) / f"out{k}"
            command = ["workbench", "calibrate", "--model", "iiwa", "--log", str(log)]
            command += ["--kind", "kinematic", "--out", str(out), "--quiet"]
            start = time.perf_counter()
            subprocess.run(command, check=True, capture_output=True)
            if k:  # the first run may compile or load the kernels' disk cache
                times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    chain = wb.models.load("iiwa")
    log, truth = simulate_log(chain, samples=10_000, perturb=1e-2)
    print(machine())
    print(row("variant", "time [s]", "iterations", "max twist error", "max tool error [m]"))
    print(row("---", "---", "---", "---", "---"))
    cores = available_cores()
    variants = [
        (f"fit ({cores} threads)", KinematicProblem, cores, 5),
        ("fit (1 thread)", KinematicProblem, 1, 5),
        (f"central FD ({cores} threads)", FiniteDifferenceProblem, cores, 1),
    ]
    times = {}
    for name, cls, threads, repeats in variants:
        set_num_threads(threads)
        problem = cls.from_log(log)
        fit = calibrate_kinematic(chain, problem)  # warm-up, and the figures below
        times[name] = median_seconds(lambda p=problem: calibrate_kinematic(chain, p), repeats, 0)
        twist = np.abs(fit.chain.twists - truth.chain.twists).max()
        tool = np.abs(fit.chain.tool_frame[:3, 3] - truth.chain.tool_frame[:3, 3]).max()
        iters = fit.solution.iterations
        print(row(name, f"{times[name]:.3f}", iters, f"{twist:.1e}", f"{tool:.1e}"))
    set_num_threads(cores)
    cli = cli_seconds()
    print(row("whole CLI (workbench calibrate, 2 fits)", f"{cli:.2f}", "-", "-", "-"))
    fit_time = times[f"fit ({cores} threads)"]
    print(f"\nratio FD / fit: {times[f'central FD ({cores} threads)'] / fit_time:.1f}x")


if __name__ == "__main__":
    main()
