"""Five-bar motor torques with d tau_pr / d lambda (eq. 14) vs finite differences (issue 5).

    python benchmarks/bench_fivebar.py [--samples 1000] [--repeats 5]

N closed five-bar states; lambda = [eta (36), q, dq, ddq (5 each)], 51
columns. Ours: ``FiveBar.torque_derivatives`` (all columns, and the state
columns only). Finite differences: central, 102 batched evaluations of
``FiveBar.torque`` over all N samples at once (eta columns through
``FiveBar.with_eta``), i.e. the best a user can do without eq. 14.
"""

from __future__ import annotations

import argparse

import numpy as np
from timing import machine, median_seconds, row

import workbench as wb


def finite_differences(fb, q, dq, ddq, h=1e-6):
    columns = []
    for k in range(36):
        eta = np.zeros(36)
        eta[k] = h
        plus, minus = fb.with_eta(eta), fb.with_eta(-eta)
        columns.append((plus.torque(q, dq, ddq) - minus.torque(q, dq, ddq)) / (2 * h))
    for block in range(3):
        for k in range(5):
            args_plus, args_minus = [q, dq, ddq], [q, dq, ddq]
            step = np.zeros(5)
            step[k] = h
            args_plus[block] = args_plus[block] + step
            args_minus[block] = args_minus[block] - step
            columns.append((fb.torque(*args_plus) - fb.torque(*args_minus)) / (2 * h))
    return np.stack(columns, axis=-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    fb = wb.fivebar.FiveBar.default()
    rng = np.random.default_rng(0)
    N = args.samples
    q = fb.solve_passive(rng.uniform(-0.8, 0.8, (N, 2)))
    dq = fb.velocities(q, rng.normal(size=(N, 2)))
    ddq = fb.accelerations(q, dq, rng.normal(size=(N, 2)))
    ours = fb.torque_derivatives(q, dq, ddq).dtau_dlambda
    fd = finite_differences(fb, q, dq, ddq)
    error = np.abs(ours - fd).max() / np.abs(fd).max()
    t_fd = median_seconds(lambda: finite_differences(fb, q, dq, ddq), args.repeats)
    t_all = median_seconds(lambda: fb.torque_derivatives(q, dq, ddq), args.repeats)
    t_state = median_seconds(
        lambda: fb.torque_derivatives(q, dq, ddq, with_eta=False), args.repeats
    )
    t_tau = median_seconds(lambda: fb.torque(q, dq, ddq), args.repeats)
    print(machine())
    print(
        f"five-bar, N = {N} closed states, median of {args.repeats}; "
        f"max |ours - FD| / max |FD| = {error:.1e}\n"
    )
    print(row("method", "µs / sample", "ours / FD"))
    print(row("---", "---", "---"))
    print(
        row(
            "central FD of FiveBar.torque (102 batched calls), 51 columns",
            f"{t_fd / N * 1e6:.1f}",
            "1.00",
        )
    )
    print(
        row(
            "torque_derivatives, 51 columns (eq. 14)",
            f"{t_all / N * 1e6:.1f}",
            f"{t_all / t_fd:.3f}",
        )
    )
    print(
        row(
            "torque_derivatives, 15 state columns",
            f"{t_state / N * 1e6:.1f}",
            f"{t_state / t_fd:.3f}",
        )
    )
    print(row("torque alone (eq. 13)", f"{t_tau / N * 1e6:.2f}", f"{t_tau / t_fd:.4f}"))


if __name__ == "__main__":
    main()
