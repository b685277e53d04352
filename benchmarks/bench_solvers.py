"""Solvers and second derivatives on every shipped reaching problem, in one run.

    python benchmarks/bench_solvers.py [--repeats 3]

Each problem of ``problems/*_reach.toml`` and ``problems/fivebar_codesign.toml``
solved by ``workbench.ocp.reach.solve`` after one untimed solve (kernels and
compiled Hessians loaded):

* "ipopt": the default, IPOPT with the exact Hessian blocks of
  :mod:`workbench.ocp.model_sx`;
* "ipopt-differences": IPOPT with the bridge's central differences of the
  analytic Jacobians (the previous default);
* "fatrop" and "sqpmethod-hpipm": the stage-ordered transcription
  (:mod:`workbench.ocp.stages`; fixed duration, no design: not co-design);
  SQP at most ``--sqp-iterations`` (it does not converge on these problems).

Status, iterations, solve time (median of ``--repeats``), objective and its
relative difference to "ipopt". Markdown rows on stdout.
"""

from __future__ import annotations

import argparse
import functools
import statistics
from dataclasses import replace

from timing import machine, row

from workbench.closed_chains import load
from workbench.ocp import reach
from workbench.ocp.model_functions import model_callbacks
from workbench.ocp.problem import ReachProblem
from workbench.resources import shipped
from workbench.warm_up import warm_up

PROBLEMS = ("fivebar_reach", "fivebar_codesign", "planar_fivebar_reach", "fourbar_reach",
            "delta_reach")  # fmt: skip
VARIANTS = {
    "ipopt": ("ipopt", model_callbacks),
    "ipopt-differences": ("ipopt", functools.partial(model_callbacks, exact_hessian=False)),
    "fatrop": ("fatrop", model_callbacks),
    "sqpmethod-hpipm": ("sqpmethod-hpipm", model_callbacks),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sqp-iterations", type=int, default=100)
    args = parser.parse_args()
    warm_up()
    print(machine())
    print(row("problem", "solver", "status", "iterations", "solve s", "objective",
              "rel. diff. to ipopt"))  # fmt: skip
    print(row(*["---"] * 7))
    for name in PROBLEMS:
        problem = ReachProblem.from_toml(shipped("problems") / f"{name}.toml")
        model = load(problem.model)
        reference = None
        for variant, (solver, functions) in VARIANTS.items():
            if solver != "ipopt" and problem.design is not None:
                print(row(name, variant, "n/a (design)", "", "", "", ""))
                continue
            case = replace(problem, solver=solver)
            if solver == "sqpmethod-hpipm":
                case = replace(case, max_iterations=args.sqp_iterations)
            runs = [
                reach.solve(case, model, progress=False, functions=functions)
                for _ in range(args.repeats + 1)
            ][1:]
            result, seconds = runs[-1], statistics.median(r.solve_time_s for r in runs)
            reference = result.objective if reference is None else reference
            difference = abs(result.objective - reference) / abs(reference)
            print(row(name, variant, result.status, result.iterations, f"{seconds:.3f}",
                      f"{result.objective:.10g}", f"{difference:.1e}"), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
