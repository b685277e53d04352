"""Default reach (spherical five-bar): analytic callbacks vs CasADi finite differences vs pure SX.

    python benchmarks/bench_reach.py [--repeats 3] [--fd-knots 3]

The problem of ``problems/fivebar_reach.toml`` (K = 100 knots) solved by
``workbench.ocp.reach.solve`` on (a) the analytic batched callbacks
(default), (b) the same callbacks with ``finite_differences=True`` (CasADi
differentiates them numerically, IPOPT's exact Hessian included) and (c)
the pure-SX model functions of tests/ocp_reference.py (CasADi AD).
Wall time is the whole ``solve`` call (NLP construction, IPOPT, and for
solved problems the forward simulation ``solve`` runs afterwards); IPOPT
is ``solve_time_s``, the solver call alone. Finite differences take
minutes per iteration at K = 100, so (b) runs once on the same task with
``--fd-knots`` knots, next to (a) and (c) at that size for comparison.
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import replace
from pathlib import Path

from timing import machine, row

from workbench.closed_chains import load
from workbench.ocp import reach
from workbench.ocp.model_functions import model_callbacks
from workbench.ocp.problem import ReachProblem
from workbench.resources import shipped
from workbench.testing.ocp_reference import sx_functions
from workbench.warm_up import warm_up


def timed(solve, repeats: int) -> tuple[float, float, reach.ReachResult]:
    """Median wall time and median IPOPT time of ``solve()`` over ``repeats`` runs."""
    walls, results = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        results.append(solve())
        walls.append(time.perf_counter() - start)
    ipopt = statistics.median(r.solve_time_s for r in results)
    return statistics.median(walls), ipopt, results[-1]


def fd_callbacks(model, knots, rows, design=None):
    return model_callbacks(model, knots, rows, design, finite_differences=True)


def variants(problem, fb, repeats: int, finite_differences: bool) -> list[tuple]:
    """(name, repeats, wall, ipopt, result) for analytic, [FD] and SX on ``problem``."""
    runs = [("analytic callbacks", repeats, lambda: reach.solve(problem, fb, progress=False))]
    if finite_differences:
        runs.append(
            (
                "callbacks, CasADi finite differences",
                1,
                lambda: reach.solve(problem, fb, progress=False, functions=fd_callbacks),
            )
        )
    runs.append(
        (
            "pure SX (CasADi AD)",
            repeats,
            lambda: reach.solve(problem, fb, progress=False, functions=sx_functions),
        )
    )
    return [(name, n, *timed(solve, n)) for name, n, solve in runs]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--fd-knots", type=int, default=3, help="knots of the finite-difference run (0: skip)"
    )
    args = parser.parse_args()
    fb = load("fivebar")
    problem = ReachProblem.from_toml(shipped("problems") / "fivebar_reach.toml")
    warm_up()  # compile or load the numba kernels
    sizes = [(problem, False)]
    if args.fd_knots:
        sizes.append((replace(problem, knots=args.fd_knots), True))
    rows = []
    for task, finite_differences in sizes:
        runs = variants(task, fb, args.repeats, finite_differences)
        sx = runs[-1][-1].objective
        rows += [(task.knots, *run, abs(run[-1].objective - sx) / abs(sx)) for run in runs]
    print(machine())
    print(
        f"five-bar reach (problems/{Path(problem.source).name}, T = {problem.duration} s), "
        f"median of {args.repeats} (finite differences: 1 run)\n"
    )
    print(
        row(
            "K", "variant", "runs", "wall s", "IPOPT s", "status", "iterations", "objective",
            "rel. diff. to SX",
        )
    )  # fmt: skip
    print(row(*["---"] * 9))
    for K, name, n, wall, ipopt, result, difference in rows:
        print(
            row(
                K, name, n, f"{wall:.2f}", f"{ipopt:.2f}", result.status, result.iterations,
                f"{result.objective:.10f}", f"{difference:.1e}",
            )
        )  # fmt: skip


if __name__ == "__main__":
    main()
