"""Design an excitation trajectory for the iiwa, then check what it buys on simulated data.

1. Design: a 10 s Fourier trajectory (5 harmonics, at rest at both ends) that maximises
   log det of the information of the base inertial parameters and friction, within the
   joint position, velocity, acceleration (10 rad/s^2) and torque limits
   (``problems/excite_dynamic.toml``).
2. Check: a perturbed "true" robot is logged with 1 % torque noise along the designed
   trajectory and along a random one of the same period and limits, and both logs are
   identified with ``calibrate_dynamic``: the designed one gives smaller parameter errors,
   and its predicted standard deviations match the observed ones.

Run from the repository root: ``python examples/excitation.py`` (about a minute). The command
line does step 1 and writes the files: ``workbench excite --model iiwa --kind dynamic
--out results/excite problems/excite_dynamic.toml``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import workbench as wb
from workbench.excitation import (
    FourierSpace,
    TorqueFunction,
    excite,
    identification_errors,
    random_parameters,
    read_problem,
)

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    chain = wb.models.load("iiwa")
    problem = read_problem(ROOT / "problems" / "excite_dynamic.toml", chain)
    result = excite(chain, "dynamic", problem)
    d = result.design
    print(
        f"design: log det {d.initial['log_det']:.1f} -> {d.log_det:.1f}, condition number "
        f"{d.initial['condition_number']:.0f} -> {d.condition_number:.0f} in {d.seconds:.1f} s "
        f"({d.iterations} IPOPT iterations); peak fraction of each limit on a fine grid: "
        + ", ".join(f"{k} {np.max(v):.3f}" for k, v in d.limit_ratios.items())
    )

    s = problem.trajectory
    space = FourierSpace(chain.n, s.period, s.harmonics)
    limits = problem.limits.limits(chain)
    theta = random_parameters(space, limits, TorqueFunction(chain), np.random.default_rng(7))
    random = space.trajectory(theta).sampled(s.sample_rate, s.periods)[1:]
    out = identification_errors(
        chain, {"designed": (result.q, result.dq, result.ddq), "random": random},
        result.noise, repeats=20,
    )  # fmt: skip
    rms = {k: np.sqrt(np.mean(v["errors"] ** 2, axis=0)) for k, v in out.items()}
    ratio = rms["random"] / rms["designed"]
    print(
        f"identification of {ratio.size} base parameters, 20 noisy logs each: RMS error random / "
        f"designed = {np.exp(np.mean(np.log(ratio))):.2f} (geometric mean over the parameters)"
    )
    match = out["designed"]["errors"].std(axis=0) / out["designed"]["predicted"]
    print(
        "observed / predicted std along the designed trajectory: "
        f"{match.min():.2f} .. {match.max():.2f}"
    )
    names = result.prediction.names
    worst = np.argsort(
        -result.prediction.std / np.maximum(np.abs(result.prediction.nominal), 1e-12)
    )[:3]
    print("least precise base parameters (predicted relative std):")
    for k in worst:
        print(f"  {names[k]}: {result.prediction.relative_std[k]:.3g} %")


if __name__ == "__main__":
    main()
