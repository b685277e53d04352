"""Look at a motion: a closed chain's trajectory as a self-contained meshcat page.

    python examples/view.py [--model delta] [--out results/example_view.html]

Moves the motors of a shipped closed chain along a smooth path, solves the
passive joints and writes the animation (open the HTML file in a browser;
``workbench view DIR`` serves a results directory live).
"""

from __future__ import annotations

import argparse

import numpy as np

import workbench as wb
from workbench.closed_chains import solve_passive
from workbench.viz import Robot, write_html


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="delta")
    parser.add_argument("--out", default="results/example_view.html")
    args = parser.parse_args(argv)
    model = wb.closed_chains.load(args.model)
    t = np.linspace(0.0, 2.0, 41)
    home = model.home[model.active]
    phase = 2 * np.pi * t[:, None] / t[-1] + np.arange(len(home))
    q = solve_passive(model, home + 0.2 * np.sin(phase))
    path = write_html(args.out, Robot.from_urdf(model.urdf_path), t, q,
                             tool_frame=model.tool_name)  # fmt: skip
    print(f"{model.name}: {len(t)} frames written to {path}")


if __name__ == "__main__":
    main()
