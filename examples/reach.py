"""Reaching with a closed chain: solve a problem file, write plots and an animation.

    python examples/reach.py [PROBLEM] [--out DIR] [--knots K]

Default: the spherical five-bar's problem (problems/fivebar_reach.toml); any
other reaching problem works (problems/delta_reach.toml, ...). Writes
summary.json, trajectory files, plots, animation.html and report.html.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import workbench as wb

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problem", nargs="?", default=ROOT / "problems" / "fivebar_reach.toml")
    parser.add_argument("--out", default="results/example_reach")
    parser.add_argument("--knots", type=int, help="override the problem's knots")
    args = parser.parse_args(argv)
    problem = wb.ocp.read(args.problem)
    if args.knots:
        problem = replace(problem, knots=args.knots)
    result = wb.ocp.solve(problem, progress=False)
    print(f"{result.model.name}: {result.status}, objective {result.objective:.6g}, "
          f"{result.iterations} iterations, {result.solve_time_s:.2f} s")  # fmt: skip
    if result.status == "solved":
        wb.ocp.write(result, args.out)
        print(f"results, plots and animation.html in {args.out}/")


if __name__ == "__main__":
    main()
