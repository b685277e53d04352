"""d tau / d [eta, q, dq, ddq] on the iiwa (n = 7, 69 columns) against its peers (issue 3).

    python benchmarks/bench_twist_derivatives.py [--repeats 5]

For N = 1, 100 and 10,000 random states, all in one run:

* ours: ``wb.twist_derivatives`` (all 69 columns), default thread pool
  and one thread;
* finite differences through Pinocchio, the best a user could write:
  2 x 48 perturbed models ``to_pinocchio(chain.with_eta(+-h e_k))`` built
  once (not timed), two ``pinocchio.rnea`` calls per eta direction per
  sample, plus ``computeRNEADerivatives`` for the state part;
* CasADi AD: the Jacobian of an SX reference inverse dynamics
  (tests/casadi_reference.py) with respect to [eta, q, dq, ddq], mapped
  over the samples (``Function.map`` with the serial and thread backends;
  the faster is reported), SX virtual machine, no code generation;
* the state part alone: ``rnea_derivatives`` (the same kernel without
  the eta columns) vs a Python loop over ``computeRNEADerivatives``
  (``rnea_derivatives_pinocchio``).

Prints µs per sample (median of the repeats) and ratios.
"""

from __future__ import annotations

import argparse

import casadi as ca
import numpy as np
import pinocchio as pin
from timing import machine, median_seconds, row

import workbench as wb
from workbench import runtime
from workbench.dynamics.derivatives import (
    rnea_derivatives,
    rnea_derivatives_pinocchio,
    twist_derivatives,
)
from workbench.testing.casadi_reference import inverse_dynamics_function

H = 1e-6


def finite_differences(chain, plus, minus, data_plus, data_minus, model, data, q, dq, ddq):
    """The user's best finite differences: perturbed models built beforehand."""
    N, n = q.shape
    out = np.empty((N, n, 6 * (n + 1) + 3 * n))
    m = 6 * (n + 1)
    for s in range(N):
        for k in range(m):
            tp = pin.rnea(plus[k], data_plus[k], q[s], dq[s], ddq[s])
            tm = pin.rnea(minus[k], data_minus[k], q[s], dq[s], ddq[s])
            out[s, :, k] = (tp - tm) / (2 * H)
        pin.computeRNEADerivatives(model, data, q[s], dq[s], ddq[s])
        out[s, :, m : m + n] = data.dtau_dq
        out[s, :, m + n : m + 2 * n] = data.dtau_dv
        out[s, :, m + 2 * n :] = data.M
    return out


def casadi_jacobian(chain):
    n = chain.n
    tau = inverse_dynamics_function(chain)
    x = ca.SX.sym("x", 6 * (n + 1) + 3 * n)
    m = 6 * (n + 1)
    eta, q, dq, ddq = ca.vertsplit(x, [0, m, m + n, m + 2 * n, x.numel()])
    J = ca.jacobian(tau(eta, q, dq, ddq), x)
    return ca.Function("J", [x], [J])


def measure(chain, N, rng, repeats, cores, jac, plus, minus, model):
    """Time every method on N random states and print one table row."""
    n, m = chain.n, 6 * (chain.n + 1)
    data = model.createData()
    data_plus = [p.createData() for p in plus]
    data_minus = [p.createData() for p in minus]
    q, dq, ddq = rng.uniform(-2.0, 2.0, size=(3, N, n))
    fd_args = (chain, plus, minus, data_plus, data_minus, model, data, q, dq, ddq)
    ours = twist_derivatives(chain, q, dq, ddq).dtau_dlambda
    assert np.abs(ours - finite_differences(*fd_args)).max() < 1e-5 * np.abs(ours).max()
    x = np.concatenate([np.zeros((N, m)), q, dq, ddq], axis=1).T
    mapped = [jac.map(N, "serial"), jac.map(N, "thread", cores)]
    ad = np.array(mapped[0](x)).reshape(n, N, -1).transpose(1, 0, 2)
    assert np.abs(ours - ad).max() < 1e-9 * np.abs(ours).max()
    repeats = repeats if N < 10_000 else max(3, repeats // 2)
    t_ours = {}
    for threads in (cores, 1):
        runtime.set_num_threads(threads)
        t_ours[threads] = median_seconds(lambda: twist_derivatives(chain, q, dq, ddq), repeats)
    runtime.set_num_threads(cores)
    t_fd = median_seconds(lambda: finite_differences(*fd_args), repeats)
    t_ad = min(median_seconds(lambda f=f: f(x), repeats) for f in mapped)
    t_state = median_seconds(lambda: rnea_derivatives(chain, q, dq, ddq), repeats)
    t_pin_state = median_seconds(lambda: rnea_derivatives_pinocchio(chain, q, dq, ddq), repeats)
    us = 1e6 / N
    print(
        row(
            N, f"{t_ours[cores] * us:.2f}", f"{t_ours[1] * us:.2f}", f"{t_fd * us:.1f}",
            f"{t_ad * us:.1f}", f"{t_fd / t_ours[cores]:.1f}x", f"{t_ad / t_ours[cores]:.1f}x",
            f"{t_state * us:.2f}", f"{t_pin_state * us:.2f}",
        ),
        flush=True,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 100, 10_000])
    args = parser.parse_args()
    chain = wb.models.load("iiwa")
    n, m = chain.n, 6 * (chain.n + 1)
    model = wb.to_pinocchio(chain)
    plus, minus = [], []
    for k in range(m):
        e = np.zeros(m)
        e[k] = H
        plus.append(wb.to_pinocchio(chain.with_eta(e)))
        minus.append(wb.to_pinocchio(chain.with_eta(-e)))
    jac = casadi_jacobian(chain)
    cores = runtime.available_cores()
    rng = np.random.default_rng(0)
    print(machine())
    print(f"iiwa, n = {n}, {m + 3 * n} columns, median of {args.repeats}; µs per sample\n")
    print(
        row(
            "N", f"ours ({cores} threads)", "ours (1 thread)", "Pinocchio FD",
            "CasADi AD", "FD / ours", "AD / ours",
            f"state only: ours ({cores} thr.)", "state only: Pinocchio loop",
        )
    )  # fmt: skip
    print(row(*["---"] * 9))
    for N in args.sizes:
        measure(chain, N, rng, args.repeats, cores, jac, plus, minus, model)


if __name__ == "__main__":
    main()
