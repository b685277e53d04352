"""Point-to-point reaching of the spherical five-bar: an optimal control problem in CasADi.

PROBLEM is a TOML problem file (default: the shipped problems/fivebar_reach.toml;
problems/fivebar_codesign.toml also optimises the design). IPOPT prints one line
per iteration. A solved problem writes into DIR: summary.json, trajectory.npz and
trajectory.csv, joint_angles.png, motor_torques.png, power_energy.png (design.png
with design variables) and animation.html (open it in a browser). An infeasible
or failed solve prints one line, exits with code 1 and writes nothing.
"""

from __future__ import annotations

import argparse
import sys

HELP = "optimise a five-bar reaching motion (and design); write results and an animation"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "problem", nargs="?", metavar="PROBLEM", help="problem TOML (default: fivebar_reach.toml)"
    )
    parser.add_argument("--out", default="results/reach", metavar="DIR", help="results directory")
    parser.add_argument("--quiet", action="store_true", help="no IPOPT iteration lines")


def run(args: argparse.Namespace) -> int:
    from workbench.fivebar import FiveBar
    from workbench.io import results_directory
    from workbench.ocp.reach import ReachProblem, objective_unit, solve
    from workbench.ocp.report import write_results
    from workbench.resources import shipped

    path = args.problem or shipped("problems") / "fivebar_reach.toml"
    problem = ReachProblem.from_toml(path)
    fivebar = FiveBar.default()
    result = solve(problem, fivebar, progress=not args.quiet)
    if result.status != "solved":
        message = " ".join(result.message.split())
        print(f"workbench reach: {result.status}: {message} ({problem.source})", file=sys.stderr)
        return 1
    with results_directory(args.out) as stage:
        write_results(stage, problem, result, fivebar)
    print(
        f"solved {problem.source}: objective {result.objective:.6g} {objective_unit(problem)}, "
        f"{result.iterations} iterations, {result.solve_time_s:.2f} s, constraint violation "
        f"{result.max_constraint_violation:.1e}, final pointing error "
        f"{result.final_pointing_error_rad:.1e} rad (simulated); results in {args.out}/"
    )
    return 0
