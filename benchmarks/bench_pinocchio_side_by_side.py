"""The package side by side with Pinocchio 4 in one run: inverse dynamics, its state
derivatives and closed-chain forward dynamics, on the same models and states.

    python benchmarks/bench_pinocchio_side_by_side.py [--samples 1000] [--repeats 5]

* Inverse dynamics: ``wb.inverse_dynamics`` against ``pin.rnea``; state derivatives:
  ``wb.dynamics.derivatives.rnea_derivatives`` (d tau/dq, d tau/d dq, M) against
  ``pin.computeRNEADerivatives``. Per sample: one call on one state, in a Python loop over
  the N states (both sides pay Python's call overhead); batched: one call of ours on the N
  states against the loop a Pinocchio user writes (``for s: pin.rnea(...)``). Robots: UR5
  and Panda (arm, fingers locked) of example-robot-data through ``wb.models.load``, the
  same chain converted with ``wb.to_pinocchio``; N random states (positions, velocities,
  accelerations uniform in [-2, 2]), gravity on.
* Closed chains: ``closed_chains.dynamics.forward_dynamics`` batched over the states
  against ``pin.constraintDynamics`` per state (the models, states and constraint models
  of ``bench_closed_chain_dynamics.py``, 100 states).

Times are µs per sample, min and median of ``--repeats`` runs after one untimed run;
"max diff" is the largest difference to Pinocchio relative to max(1, max |Pinocchio|).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_closed_chain_dynamics import FOLDERS, SHIPPED, constrained_states
from timing import machine, row, timed

import workbench as wb
from workbench.closed_chains import load
from workbench.closed_chains.dynamics import forward_dynamics
from workbench.dynamics.derivatives import rnea_derivatives

ROBOTS = ("ur5", "panda_arm")


def difference(ours: np.ndarray, reference: np.ndarray) -> str:
    return f"{np.abs(ours - reference).max() / max(1.0, np.abs(reference).max()):.1e}"


def open_chain_rows(name: str, samples: int, repeats: int, rng) -> list[str]:
    """Inverse dynamics and its derivatives on one robot: per sample and batched."""
    chain = wb.models.load(name)
    model = wb.to_pinocchio(chain)
    data = model.createData()
    q, dq, ddq = rng.uniform(-2.0, 2.0, size=(3, samples, chain.n))
    per = 1e6 / samples

    def pin_rnea():
        return np.array([pin.rnea(model, data, q[s], dq[s], ddq[s]) for s in range(samples)])

    def pin_derivatives():
        out = np.empty((3, samples, chain.n, chain.n))
        for s in range(samples):
            pin.computeRNEADerivatives(model, data, q[s], dq[s], ddq[s])
            out[0, s], out[1, s], out[2, s] = data.dtau_dq, data.dtau_dv, data.M
        upper = np.triu(out[2])  # Pinocchio fills M's upper triangle
        out[2] = upper + np.swapaxes(np.triu(out[2], 1), 1, 2)
        return out

    def ours_rnea_each():
        return np.array([wb.inverse_dynamics(chain, q[s], dq[s], ddq[s]) for s in range(samples)])

    def ours_derivatives_each():
        return np.stack(
            [np.stack(rnea_derivatives(chain, q[s], dq[s], ddq[s]))[:, 0] for s in range(samples)],
            axis=1,
        )

    def ours_derivatives_batched():
        return np.stack(rnea_derivatives(chain, q, dq, ddq))

    rows = []
    cases = [
        ("inverse dynamics", pin_rnea, ours_rnea_each,
         lambda: wb.inverse_dynamics(chain, q, dq, ddq)),
        ("RNEA state derivatives", pin_derivatives, ours_derivatives_each,
         ours_derivatives_batched),
    ]  # fmt: skip
    for what, theirs, each, batched in cases:
        reference, p_min, p_median = timed(theirs, repeats)
        one, e_min, e_median = timed(each, repeats)
        many, b_min, b_median = timed(batched, repeats)
        rows.append(row(
            f"{name} (n = {chain.n})", what, f"{p_min * per:.2f}", f"{p_median * per:.2f}",
            f"{e_min * per:.2f}", f"{e_median * per:.2f}", f"{b_min * per:.2f}",
            f"{b_median * per:.2f}", difference(many, reference),
        ))  # fmt: skip
        assert np.abs(one - many).max() <= 1e-9 * max(1.0, np.abs(many).max())
    return rows


def closed_chain_row(name: str, chain, samples: int, repeats: int, rng) -> str:
    """Forward dynamics of a closed chain against ``constraintDynamics``."""
    model, data, cms, cds, q, dqa, tau, dq, torque = constrained_states(chain, samples, rng)
    settings = pin.ProximalSettings(1e-14, 1e-10, 200)

    def theirs():
        return np.array([pin.constraintDynamics(model, data, q[k], dq[k], torque[k], cms, cds,
                                                settings) for k in range(samples)])  # fmt: skip

    reference, p_min, p_median = timed(theirs, repeats)
    (_, ddq), o_min, o_median = timed(lambda: forward_dynamics(chain, q, dqa, tau), repeats)
    per = 1e6 / samples
    return row(
        f"{name} (n = {chain.n})", "closed-chain forward dynamics", f"{p_min * per:.2f}",
        f"{p_median * per:.2f}", "-", "-", f"{o_min * per:.2f}", f"{o_median * per:.2f}",
        difference(ddq, reference),
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(machine())
    print(f"µs per sample, min / median of {args.repeats}; N = {args.samples} open-chain "
          "states, 100 closed-chain states\n")  # fmt: skip
    print(row("model", "quantity", "Pinocchio min", "Pinocchio median", "ours per sample min",
              "ours per sample median", "ours batched min", "ours batched median",
              "max diff"))  # fmt: skip
    print(row(*["---"] * 9))
    for name in ROBOTS:
        for line in open_chain_rows(name, args.samples, args.repeats, rng):
            print(line, flush=True)
    chains = [(p.name, load(p / "robot.yaml")) for p in FOLDERS]
    chains += [(name, load(name)) for name in SHIPPED]
    for name, chain in chains:
        print(closed_chain_row(name, chain, 100, args.repeats, rng), flush=True)


if __name__ == "__main__":
    main()
