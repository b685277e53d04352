"""Designed vs random excitation on the iiwa and the TX40 (slow: two designs); predicted errors.

A perturbed ground truth (inertias moved and scaled by 5 %, viscous and Coulomb friction) is
logged with torque noise (1 % of the effort limits) along the optimal trajectory of
problems/excite_dynamic.toml and along random trajectories of the same period, harmonics and
limits; both are identified by least squares with calibrate_dynamic (WLS, friction terms,
no consistent completion). The designed trajectory must give smaller parameter errors, and on
every trajectory the estimates must follow the predicted distribution N(beta_true, F^-1):

* F^-1 equals the textbook sigma-weighted (W^T Sigma^-1 W)^-1 of the base regressor (numpy);
* whitened by F^-1, the spread of the R repeats about their mean is chi-square with (R - 1) p
  degrees of freedom (two-sided), and R |mean|^2 chi-square with p (one-sided: bias);
* per base parameter, (R - 1) s^2 / predicted^2 is chi-square with R - 1 degrees of freedom.

The bounds are the chi-square quantiles at FALSE_ALARM per model, split equally over the
trajectories and their checks (Bonferroni; the per-parameter share further over the p
parameters), so a correct prediction fails with probability below FALSE_ALARM whatever the
seeds, while standard deviations off by 25 % in every direction, or by 2 in one parameter,
fail. The same checks run fast on one random iiwa trajectory at 20 Hz (no design).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from scipy.stats import chi2

import workbench as wb
from workbench.excitation.design import TorqueFunction, random_parameters
from workbench.excitation.experiment import excite, identification_errors
from workbench.excitation.problem import read_problem
from workbench.excitation.trajectory import FourierSpace
from workbench.identification.drives import Drives
from workbench.identification.torque_model import TorqueModel, base_parameters

ROOT = Path(__file__).resolve().parents[1]
FALSE_ALARM = 1e-3  # chance that a correct prediction fails the test, per model


def textbook_covariance(chain, q, dq, ddq, noise):
    """(W^T Sigma^-1 W)^-1 of the base regressor W (K n, p) of friction-term identification."""
    model = TorqueModel(chain, Drives(chain.n))
    W = model.columns(q, dq, ddq, select=base_parameters(model).independent)
    W = (W / noise[None, :, None]).reshape(-1, W.shape[-1])
    return np.linalg.inv(W.T @ W)


def assert_follows_prediction(chain, trajectories, noise, out):
    """The checks of the module docstring on the output of identification_errors."""
    alpha = FALSE_ALARM / (3 * len(out))  # each check of each trajectory
    for label, v in out.items():
        errors, predicted = v["errors"], v["predicted"]
        repeats, p = errors.shape
        L = np.linalg.cholesky(v["covariance"])
        z = np.linalg.solve(L, errors.T).T  # N(0, I) rows if the prediction holds
        mean = z.mean(axis=0)
        spread = float(np.sum((z - mean) ** 2))
        dof = (repeats - 1) * p
        low, high = chi2.ppf([alpha / 2, 1 - alpha / 2], dof)
        assert low < spread < high, (label, "spread / dof", spread / dof, low / dof, high / dof)
        bias = repeats * float(mean @ mean)
        assert bias < chi2.ppf(1 - alpha, p), (label, "bias chi-square", bias, p)
        ratio = errors.std(axis=0, ddof=1) / predicted
        a = alpha / p
        low, high = np.sqrt(chi2.ppf([a / 2, 1 - a / 2], repeats - 1) / (repeats - 1))
        assert np.all((ratio > low) & (ratio < high)), (label, ratio.min(), ratio.max(), low, high)
        np.testing.assert_allclose(predicted, np.sqrt(np.diag(v["covariance"])), rtol=1e-12)
        textbook = textbook_covariance(chain, *trajectories[label], noise)
        whitened = np.linalg.solve(L, np.linalg.solve(L, textbook).T)  # I if they agree
        np.testing.assert_allclose(whitened, np.eye(p), rtol=0, atol=1e-8, err_msg=label)


def test_least_squares_errors_follow_their_predicted_covariance():
    """The same checks, fast: the iiwa along one random trajectory at 20 Hz (no design)."""
    chain = wb.models.load("iiwa")
    problem = read_problem(ROOT / "problems" / "excite_dynamic.toml", chain)
    space = FourierSpace(chain.n, problem.trajectory.period, problem.trajectory.harmonics)
    limits = problem.limits.limits(chain)
    theta = random_parameters(space, limits, TorqueFunction(chain), np.random.default_rng(100), 100)
    trajectories = {"random": space.trajectory(theta).sampled(20.0, 1)[1:]}
    noise = problem.noise(chain)
    out = identification_errors(chain, trajectories, noise, repeats=30)
    assert_follows_prediction(chain, trajectories, noise, out)


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
    assert_follows_prediction(chain, trajectories, result.noise, out)
