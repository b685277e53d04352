"""Five-bar motor torques and derivatives: generic closed chain vs specialised code vs FD.

    python benchmarks/bench_fivebar.py [--samples 100,1000] [--repeats 5]

N closed five-bar states. Generic: ``workbench.closed_chains.derivatives``
(full-state partials d tau_a / d [eta (36), q, dq, ddq (5 each)], and the
state columns only; the closure, S and dS come from the loop kernels).
Specialised: the project's former five-bar-only code
(benchmarks/fivebar_specialised.py, eq. 11-14 of seed 000 written for this
mechanism). Finite differences: central, batched over all N samples, of the
generic motor torques (eta columns through ``with_eta``). Same run, same
machine; the torques and derivatives agree to the printed relative error.
"""

from __future__ import annotations

import argparse

import numpy as np
from fivebar_specialised import from_closed_chain
from timing import machine, median_seconds, row

from workbench.closed_chains import load
from workbench.closed_chains.derivatives import torque_derivatives
from workbench.closed_chains.dynamics import motor_torques
from workbench.closed_chains.kinematics import accelerations, solve_passive, velocities
from workbench.warm_up import warm_up


def finite_differences(model, q, dq, ddq, h=1e-6):
    columns = []
    n = model.n
    for k in range(6 * (n + 1)):
        eta = np.zeros(6 * (n + 1))
        eta[k] = h
        plus, minus = model.with_eta(eta), model.with_eta(-eta)
        columns.append(
            (motor_torques(plus, q, dq, ddq) - motor_torques(minus, q, dq, ddq)) / (2 * h)
        )
    for block in range(3):
        for k in range(n):
            args_plus, args_minus = [q, dq, ddq], [q, dq, ddq]
            step = np.zeros(n)
            step[k] = h
            args_plus[block] = args_plus[block] + step
            args_minus[block] = args_minus[block] - step
            columns.append(
                (motor_torques(model, *args_plus) - motor_torques(model, *args_minus)) / (2 * h)
            )
    return np.stack(columns, axis=-1)


def measure(model, old, N: int, repeats: int, rng) -> None:
    """Print the rows of N closed states (module docstring)."""
    q = solve_passive(model, rng.uniform(-0.8, 0.8, (N, 2)))
    dq = velocities(model, q, rng.normal(size=(N, 2)))
    ddq = accelerations(model, q, dq, rng.normal(size=(N, 2)))
    new = torque_derivatives(model, q, dq, ddq)
    ours = np.concatenate([new.dtau_deta, new.dtau_dq, new.dtau_dv, new.dtau_da], axis=-1)
    theirs = old.torque_derivatives(q, dq, ddq).dtau_dlambda
    scale = np.abs(theirs).max()
    diff_old = np.abs(ours - theirs).max() / scale
    diff_fd = np.abs(ours - finite_differences(model, q, dq, ddq)).max() / scale
    runs = {
        "generic, 51 columns": lambda: torque_derivatives(model, q, dq, ddq),
        "specialised, 51 columns": lambda: old.torque_derivatives(q, dq, ddq),
        "generic, 15 state columns": lambda: torque_derivatives(model, q, dq, ddq, with_eta=False),
        "specialised, 15 state columns": lambda: old.torque_derivatives(q, dq, ddq, with_eta=False),
        "generic torques": lambda: motor_torques(model, q, dq, ddq),
        "specialised torques": lambda: old.torque(q, dq, ddq),
        "central FD of the generic torques (102 batched calls)": lambda: finite_differences(
            model, q, dq, ddq
        ),
    }
    t = {name: median_seconds(f, repeats) / N * 1e6 for name, f in runs.items()}
    pairs = {
        "generic, 51 columns": "specialised, 51 columns",
        "generic, 15 state columns": "specialised, 15 state columns",
        "generic torques": "specialised torques",
    }
    for name, value in t.items():
        ratio = f"{value / t[pairs[name]]:.2f}" if name in pairs else ""
        diff = f"{diff_old:.1e}" if name.startswith("generic, 51") else ""
        if name.startswith("central"):
            diff = f"{diff_fd:.1e} (vs FD)"
        print(row(N, name, f"{value:.1f}", ratio, diff))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", default="100,1000")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    warm_up()
    model = load("fivebar")
    old = from_closed_chain(model)
    print(machine())
    print(row("N", "method", "µs / sample", "generic / specialised", "max rel. diff."))
    print(row(*["---"] * 5))
    rng = np.random.default_rng(0)
    for N in map(int, args.samples.split(",")):
        measure(model, old, N, args.repeats, rng)


if __name__ == "__main__":
    main()
