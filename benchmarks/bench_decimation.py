"""Decimation of a regressor-shaped array: the project's einsum against scipy's upfirdn.

``workbench.recordings.signals.decimate`` (anti-aliasing FIR of ``firwin(20 factor + 1,
0.8 / factor)``, every factor-th output, one einsum on a strided view per block of 200
outputs) against ``scipy.signal.upfirdn`` of the same filter on the same zero-padded array
(what the project called before, column by column), in the same run: largest difference
and time per call, min and median of ``--repeats``. The shape is that of the TX40
identification's regressor blocks (6 joints x 60 columns).

    python benchmarks/bench_decimation.py --repeats 5
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.signal

from workbench.recordings import signals


def upfirdn(x: np.ndarray, factor: int) -> np.ndarray:
    """The same outputs by scipy's upfirdn on the array padded by the filter's half length."""
    h, half = scipy.signal.firwin(20 * factor + 1, 0.8 / factor), 10 * factor
    outputs = -(-len(x) // factor)
    window = np.zeros(((outputs - 1) * factor + 2 * half + 1, *x.shape[1:]))
    window[half : half + len(x)] = x
    return scipy.signal.upfirdn(h, window, down=factor, axis=0)[20 : 20 + outputs]


def timed(function, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        out.append(time.perf_counter() - start)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(
        "| factor | samples | largest difference | einsum min / median s | upfirdn min / median s |"
    )
    print("| --- | --- | --- | --- | --- |")
    for factor in (4, 10, 25):
        x = rng.normal(size=(2000 * factor, 6, 60))
        ours, theirs = signals.decimate(x, factor), upfirdn(x, factor)
        a = timed(lambda x=x, f=factor: signals.decimate(x, f), args.repeats)
        b = timed(lambda x=x, f=factor: upfirdn(x, f), args.repeats)
        cells = [f"{min(t):.3f} / {np.median(t):.3f}" for t in (a, b)]
        print(f"| {factor} | {len(x)} | {np.abs(ours - theirs).max():.1e} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
