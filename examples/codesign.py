"""Co-design of the spherical five-bar: the trajectory and the arcs' width and payload placement.

    python examples/codesign.py [--knots K]

Solves problems/fivebar_codesign.toml and prints the designed quantities
before and after and the moving mass against its budget.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from workbench.ocp import read, solve

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--knots", type=int, help="override the problem's knots")
    args = parser.parse_args(argv)
    problem = read(ROOT / "problems" / "fivebar_codesign.toml")
    if args.knots:
        problem = replace(problem, knots=args.knots)
    result = solve(problem, progress=False)
    print(f"{result.status}: objective {result.objective:.6g} in {result.solve_time_s:.2f} s")
    for name, v in result.design["variables"].items():
        print(f"  {name}: {1e3 * v['before']:.2f} mm -> {1e3 * v['after']:.2f} mm")
    mass = result.design["moving_mass_kg"]
    print(f"  moving mass {mass['before']:.3f} -> {mass['after']:.3f} kg "
          f"(budget {result.design['mass_budget_kg']} kg)")  # fmt: skip


if __name__ == "__main__":
    main()
