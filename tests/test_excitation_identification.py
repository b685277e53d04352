"""Designed vs random excitation on the iiwa and the Staubli TX40 (slow: two full designs).

A perturbed ground truth (inertias moved and scaled by 5 %, viscous and Coulomb friction) is
logged with torque noise (1 % of the effort limits) along the optimal trajectory of
problems/excite_dynamic.toml and along random trajectories of the same period, harmonics and
limits; both are identified with calibrate_dynamic (WLS, friction terms). The designed
trajectory must give smaller parameter errors, and its predicted standard deviations must match
the observed spread of the estimates within a factor 2 for every base parameter.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.excitation.design import TorqueFunction, random_parameters
from workbench.excitation.experiment import excite, identification_errors
from workbench.excitation.problem import read_problem
from workbench.excitation.trajectory import FourierSpace

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["iiwa", "staubli_tx40"])
def test_designed_trajectory_beats_random_and_predicts_its_errors(name):
    chain = wb.models.load(name)
    problem = read_problem(ROOT / "problems" / "excite_dynamic.toml", chain)
    result = excite(chain, "dynamic", problem)
    settings = problem.trajectory
    space = FourierSpace(chain.n, settings.period, settings.harmonics)
    limits = problem.limits.limits(chain)
    trajectories = {"optimal": (result.q, result.dq, result.ddq)}
    for seed in range(2):
        theta = random_parameters(
            space, limits, TorqueFunction(chain), np.random.default_rng(100 + seed), 100
        )
        _, q, dq, ddq = space.trajectory(theta).sampled(settings.sample_rate, settings.periods)
        trajectories[f"random{seed}"] = (q, dq, ddq)
    out = identification_errors(chain, trajectories, result.noise, repeats=30)
    rms = {k: np.sqrt(np.mean(v["errors"] ** 2, axis=0)) for k, v in out.items()}
    for label in trajectories:
        if label != "optimal":
            ratio = rms[label] / rms["optimal"]
            assert np.exp(np.mean(np.log(ratio))) > 1.3, label  # geometric mean over parameters
    for label, v in out.items():
        observed = v["errors"].std(axis=0)
        match = observed / v["predicted"]
        assert np.all((match > 0.5) & (match < 2.0)), (label, match.min(), match.max())
