"""tau, tau_dot, tau_ddot together vs central differences in time of pinocchio.rnea (issue 9).

    python benchmarks/bench_time_derivatives.py [--samples 10000] [--repeats 5]

Both sides take the same N iiwa trajectory samples (q and its first four
derivatives). The Pinocchio side is the five-point stencil a user writes:
rnea at q(t + k h), k = -2..2 (states from the Taylor expansion of the
trajectory, prepared outside the timed loop), tau_dot and tau_ddot from the
fourth-order central differences; five rnea calls per sample in a Python
loop. Ours is the compiled kernel of ``wb.time_derivatives`` (warmed up
before timing) with the project's default thread pool (one worker per core)
and with one thread. Prints µs per sample (median of the repeats) and the
ratio ours / theirs.
"""

from __future__ import annotations

import argparse
from math import factorial

import numpy as np
import pinocchio as pin
from timing import machine, median_seconds, row

import workbench as wb
from workbench import runtime
from workbench.dynamics.time_derivatives import time_derivatives
from workbench.models.pinocchio_conversion import shared_model

H = 1e-3


def shifted_states(derivatives: list[np.ndarray], shift: float) -> list[np.ndarray]:
    """(q, dq, ddq) at t + shift from the Taylor series of the trajectory to 4th order."""
    return [
        sum(derivatives[k + j] * shift**j / factorial(j) for j in range(5 - k)) for k in range(3)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    N = args.samples
    chain = wb.models.load("iiwa")
    model = shared_model(chain)
    data = model.createData()
    derivatives = list(np.random.default_rng(0).uniform(-2.0, 2.0, size=(5, N, chain.n)))
    states = [shifted_states(derivatives, k * H) for k in (-2, -1, 0, 1, 2)]

    def pinocchio_stencil():
        out = np.empty((3, N, chain.n))
        for s in range(N):
            t = [pin.rnea(model, data, x[0][s], x[1][s], x[2][s]) for x in states]
            out[0, s] = t[2]
            out[1, s] = (t[0] - 8 * t[1] + 8 * t[3] - t[4]) / (12 * H)
            out[2, s] = (-t[0] + 16 * t[1] - 30 * t[2] + 16 * t[3] - t[4]) / (12 * H**2)
        return out

    ours = np.array(time_derivatives(chain, *derivatives))
    theirs = pinocchio_stencil()
    scale = np.abs(ours).max(axis=(1, 2))
    errors = np.abs(ours - theirs).max(axis=(1, 2)) / scale
    t_pin = median_seconds(pinocchio_stencil, args.repeats)
    print(machine())
    print(f"iiwa, N = {N} samples, median of {args.repeats}; stencil h = {H}")
    print(f"max relative difference tau, tau_dot, tau_ddot: {errors[0]:.1e}, {errors[1]:.1e}, "
          f"{errors[2]:.1e} (stencil truncation)\n")  # fmt: skip
    print(row("method", "µs / sample", "ours / Pinocchio stencil"))
    print(row("---", "---", "---"))
    print(
        row("5-point stencil over pinocchio.rnea (Python loop)", f"{t_pin / N * 1e6:.2f}", "1.00")
    )
    cores = runtime.available_cores()
    for threads in sorted({cores, 1}, reverse=True):
        runtime.set_num_threads(threads)
        t = median_seconds(lambda: time_derivatives(chain, *derivatives), args.repeats)
        label = f"wb.time_derivatives, {threads} thread{'s' if threads > 1 else ''}"
        print(row(label, f"{t / N * 1e6:.2f}", f"{t / t_pin:.2f}"))
    runtime.set_num_threads(cores)


if __name__ == "__main__":
    main()
