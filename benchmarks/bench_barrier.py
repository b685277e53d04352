"""IPOPT's barrier update on every shipped reaching problem: adaptive (the default) vs monotone.

    python benchmarks/bench_barrier.py [--repeats 3]

Each problem of ``problems/*_reach.toml`` and ``problems/fivebar_codesign.toml``
solved by ``workbench.ocp.reach.solve`` with ``[solver] barrier = "adaptive"``
and ``"monotone"`` in the same run, after one untimed solve (kernels loaded):
iterations, IPOPT time (median of ``--repeats``) and the relative difference
of the objectives. Markdown rows on stdout.
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace

from timing import machine, row

from workbench.ocp import reach
from workbench.ocp.problem import ReachProblem
from workbench.resources import shipped
from workbench.warm_up import warm_up

PROBLEMS = ("fivebar_reach", "fivebar_codesign", "planar_fivebar_reach", "fourbar_reach",
            "delta_reach")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    warm_up()
    print(machine())
    print(row("problem", "barrier", "status", "iterations", "IPOPT s", "objective",
              "rel. diff. to monotone"))  # fmt: skip
    print(row(*["---"] * 7))
    for name in PROBLEMS:
        problem = ReachProblem.from_toml(shipped("problems") / f"{name}.toml")
        reach.solve(problem, progress=False)
        results = {}
        for barrier in ("monotone", "adaptive"):
            runs = [
                reach.solve(replace(problem, barrier=barrier), progress=False)
                for _ in range(args.repeats)
            ]
            results[barrier] = (runs[-1], statistics.median(r.solve_time_s for r in runs))
        reference = results["monotone"][0].objective
        for barrier, (result, seconds) in results.items():
            difference = abs(result.objective - reference) / abs(reference)
            print(row(name, barrier, result.status, result.iterations, f"{seconds:.2f}",
                      f"{result.objective:.10g}", f"{difference:.1e}"))  # fmt: skip


if __name__ == "__main__":
    main()
