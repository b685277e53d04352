"""Solve an optimal-control problem file: point-to-point reaching of a closed chain.

PROBLEM is a TOML problem file (default: the shipped problems/fivebar_reach.toml;
problems/fivebar_codesign.toml also optimises the five-bar's design,
problems/planar_fivebar_reach.toml, problems/fourbar_reach.toml and
problems/delta_reach.toml move the other shipped closed chains); its top-level
key kind (default "reach") names the problem kind (workbench.ocp.kinds). IPOPT prints
one line per iteration. A solved problem writes into DIR: summary.json,
trajectory.npz and trajectory.csv, joint_angles.png, motor_torques.png,
power_energy.png (design.png with design variables), animation.html and
report.html (open it in a browser). When the knots are too far apart to
resolve the motion (the planned torques, integrated interval by interval,
miss the plan by more than 5 % of the tool's travel) the results are written
and a warning, also in summary.json, asks for more knots. An infeasible or
failed solve prints one line, exits with code 1 and writes nothing; a goal
beyond the model's reach is refused before any solve (one line, exit 2).
"""

from __future__ import annotations

import argparse
import sys

HELP = "optimise a reaching motion of a closed chain (and a design); write results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "problem", nargs="?", metavar="PROBLEM",
        help="problem TOML (default: the shipped fivebar_reach.toml)",
    )  # fmt: skip
    parser.add_argument("--out", default="results/reach", metavar="DIR", help="results directory")
    parser.add_argument("--quiet", action="store_true", help="no IPOPT iteration lines")


def run(args: argparse.Namespace) -> int:
    import numpy  # noqa: F401  (both processes use them: imported once, before the fork)
    import pinocchio  # noqa: F401

    from workbench import runtime, warm_up
    from workbench.viz import drawing

    # first run: the derivatives' kernel compiles on the second core while this one goes on
    runtime.compile_beside(warm_up.DERIVATIVES, ("-m", "workbench.warm_up", "--derivatives"))

    # plots and animation drawn beside the solve
    with drawing.worker("workbench.viz.plots", "workbench.viz.viewer"):
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from workbench.io import check_not_input, check_output_directory
    from workbench.ocp import kinds
    from workbench.resources import shipped

    path = args.problem or shipped("problems") / "fivebar_reach.toml"
    problem = kinds.read(path)
    check_output_directory(args.out)
    check_not_input(args.out, path, directory=True)
    result = kinds.solve(problem, progress=not args.quiet)
    if result.status != "solved":
        message = " ".join(result.message.split())
        print(f"workbench reach: {result.status}: {message} ({problem.source})", file=sys.stderr)
        return 1
    kinds.write(result, args.out)
    for warning in result.warnings:
        print(f"workbench reach: warning: {warning}", file=sys.stderr)
    print(f"solved {problem.source}: {result.describe()}; results in {args.out}/")
    return 0
