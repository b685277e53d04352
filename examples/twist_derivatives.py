"""Derivatives of the joint torques of a URDF robot with respect to its joint twists.

    python examples/twist_derivatives.py [URDF]

d tau / d [eta, q, dq, ddq] at random states ([Kwon] Algorithm 1, docs/
references.md) for a URDF robot (default: the KUKA iiwa shipped in
models/), checked against central differences of the torques of
``chain.with_eta``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import workbench as wb
from workbench.testing import central_differences, relative_error

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("urdf", nargs="?", default=ROOT / "models" / "iiwa" / "iiwa14.urdf")
    parser.add_argument("--samples", type=int, default=1000)
    args = parser.parse_args(argv)
    chain = wb.load(args.urdf)
    rng = np.random.default_rng(0)
    q, dq, ddq = (rng.uniform(-1, 1, (args.samples, chain.n)) for _ in range(3))
    start = time.perf_counter()
    d = wb.twist_derivatives(chain, q, dq, ddq)
    seconds = time.perf_counter() - start
    print(f"{chain.name}: {chain.n} joints, d tau / d eta {d.dtau_deta.shape[1:]} per sample, "
          f"{1e6 * seconds / args.samples:.1f} us per sample")  # fmt: skip

    def tau(eta):
        return wb.inverse_dynamics(chain.with_eta(eta), q[0], dq[0], ddq[0])

    fd = central_differences(tau, np.zeros(6 * (chain.n + 1)))
    print(f"against central differences: relative error {relative_error(d.dtau_deta[0], fd):.1e}")


if __name__ == "__main__":
    main()
