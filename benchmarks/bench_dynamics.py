"""Batched inverse dynamics vs a Python loop over pinocchio.rnea (issue 2).

    python benchmarks/bench_dynamics.py [--samples 10000] [--repeats 5]

Both sides evaluate the same N random iiwa states (with gravity); the
Pinocchio side is the loop a user writes: ``for s: pinocchio.rnea(model,
data, q[s], dq[s], ddq[s])`` on the model of the same chain. Prints µs per
sample (median of the repeats) and the ratio ours / Pinocchio, for the
project's default thread pool (one worker per core) and for one thread.
"""

from __future__ import annotations

import argparse

import numpy as np
import pinocchio as pin
from timing import machine, median_seconds, row

import workbench as wb
from workbench import runtime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    N = args.samples
    chain = wb.models.load("iiwa")
    model = wb.to_pinocchio(chain)
    data = model.createData()
    rng = np.random.default_rng(0)
    q, dq, ddq = rng.uniform(-2.0, 2.0, size=(3, N, chain.n))

    def pinocchio_loop():
        for s in range(N):
            pin.rnea(model, data, q[s], dq[s], ddq[s])

    reference = np.array([pin.rnea(model, data, q[s], dq[s], ddq[s]) for s in range(N)])
    assert np.abs(wb.inverse_dynamics(chain, q, dq, ddq) - reference).max() < 1e-9
    t_pin = median_seconds(pinocchio_loop, args.repeats)
    print(machine())
    print(f"iiwa, N = {N} samples, median of {args.repeats}\n")
    print(row("method", "µs / sample", "ours / Pinocchio loop"))
    print(row("---", "---", "---"))
    print(row("Python loop over pinocchio.rnea", f"{t_pin / N * 1e6:.3f}", "1.00"))
    cores = runtime.available_cores()
    for threads in sorted({cores, 1}, reverse=True):
        runtime.set_num_threads(threads)
        t = median_seconds(lambda: wb.inverse_dynamics(chain, q, dq, ddq), args.repeats)
        label = f"wb.inverse_dynamics, {threads} thread{'s' if threads > 1 else ''}"
        print(row(label, f"{t / N * 1e6:.3f}", f"{t / t_pin:.2f}"))


if __name__ == "__main__":
    main()
