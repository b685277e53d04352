"""Kinematic calibration of the iiwa from 10,000 tool positions: analytic vs FD Jacobian.

Same solver (LM in the identifiable subspace), same log; the FD variant
replaces the analytic d r / d eta by central differences of the residual
(2 * 6 (n + 1) forward-kinematics evaluations per iteration). FIGAROH is not
driven here (see BENCHMARKS.md).

    python benchmarks/bench_calibration.py
"""

from __future__ import annotations

import numpy as np
from timing import machine, median_seconds, row

import workbench as wb
from workbench.calibration.kinematic import KinematicProblem, calibrate_kinematic
from workbench.calibration.simulate import simulate_log


class FiniteDifferenceProblem(KinematicProblem):
    """The kinematic problem with a central-difference Jacobian (step 1e-6)."""

    def evaluate(self, chain):
        r = self.residual(chain)
        p, h = 6 * (chain.n + 1), 1e-6
        J = np.empty((r.size, p))
        for k in range(p):
            e = np.zeros(p)
            e[k] = h
            J[:, k] = (self.residual(chain.with_eta(e)) - self.residual(chain.with_eta(-e))) / (
                2 * h
            )
        return r, J


def main() -> None:
    chain = wb.models.load("iiwa")
    log, truth = simulate_log(chain, samples=10_000, perturb=1e-2)
    print(machine())
    print(row("Jacobian", "time [s]", "iterations", "max twist error", "max tool error"))
    print(row("---", "---", "---", "---", "---"))
    times = {}
    for name, cls in (("analytic", KinematicProblem), ("central FD", FiniteDifferenceProblem)):
        problem = cls.from_log(log)
        times[name] = median_seconds(lambda p=problem: calibrate_kinematic(chain, p), repeats=3)
        fit = calibrate_kinematic(chain, problem)
        twist = np.abs(fit.chain.twists - truth.chain.twists).max()
        tool = np.abs(fit.chain.tool_frame[:3, 3] - truth.chain.tool_frame[:3, 3]).max()
        iters = fit.solution.iterations
        print(row(name, f"{times[name]:.2f}", iters, f"{twist:.1e}", f"{tool:.1e}"))
    print(f"\nratio FD / analytic: {times['central FD'] / times['analytic']:.1f}x")


if __name__ == "__main__":
    main()
