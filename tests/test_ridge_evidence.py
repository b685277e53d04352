"""The ridge chosen by the evidence (calibration.selection.ridge_evidence).

References the project did not write: scipy's multivariate normal density (the marginal
likelihood of the linear-Gaussian model, the noise variance profiled out), and simulated
data with a known truth drawn from a known prior, whose held-out error is computed exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from workbench.calibration.selection.ridge_evidence import GRID, log_evidence, ridge_by_evidence


def _problem(seed: int, m: int = 120, k: int = 30, frames: int = 4):
    """Residuals r = -(J z_true) + noise of a model with ``k`` coordinates under a prior and
    ``frames`` free directions: J (m, k + frames), C (k, k + frames) picks the coordinates."""
    rng = np.random.default_rng(seed)
    s = k + frames
    J = rng.normal(size=(m, s)) * rng.uniform(0.2, 3.0, size=s)  # columns of unequal scale
    C = np.hstack([np.eye(k), np.zeros((k, frames))])
    scale2 = np.sum((J @ C.T) ** 2, axis=0)  # s_i^2: the coordinates' column norms
    return rng, J, C, scale2


def test_log_evidence_is_the_profiled_gaussian_marginal_likelihood():
    """Every coordinate under the prior (C = I, c = 0): the evidence of each ridge, up to one
    constant, is scipy's log density of r ~ N(0, sigma^2 (I + J W^-1 J^T)) at the sigma^2
    that maximises it."""
    rng, J, _, _ = _problem(0, m=40, k=8, frames=0)
    C, scale2 = np.eye(8), np.sum(J**2, axis=0)
    r = rng.normal(size=40)
    ridges = np.array([1e-4, 1e-2, 1.0, 30.0])
    ours = log_evidence(J, r, C, scale2, np.zeros(8), ridges)
    direct = []
    for ridge in ridges:
        cov = np.eye(40) + J @ np.diag(1.0 / (ridge * scale2)) @ J.T
        sigma2 = r @ np.linalg.solve(cov, r) / 40
        direct.append(multivariate_normal(np.zeros(40), sigma2 * cov).logpdf(r))
    assert np.ptp(np.array(direct) - ours) < 1e-9 * np.abs(direct).max()
    assert np.ptp(ours) > 1.0  # the ridges differ


@pytest.mark.parametrize("ridge", [1e-6, 1e-4, 1e-2])
def test_the_chosen_ridge_predicts_new_data_nearly_as_well_as_the_best(ridge):
    """A truth drawn from the prior of ``ridge`` (coordinates ~ N(0, sigma^2 / (ridge s_i^2)),
    free directions anything), measured with noise sigma: the evidence's ridge is within a
    factor 10 of the truth's, and the exact expected error of its estimate on new samples
    (the same distribution of rows) is within 5 % of the best ridge's on the grid."""
    sigma = 1e-4
    rng, J, C, scale2 = _problem(1)
    k, s = C.shape
    truth = np.concatenate([rng.normal(size=k) * sigma / np.sqrt(ridge * scale2),
                            rng.normal(size=s - k)])  # fmt: skip
    coordinates = np.zeros(k)  # the linearisation point: the nominal
    r = -J @ truth + rng.normal(scale=sigma, size=J.shape[0])
    chosen = ridge_by_evidence(J, r, C, scale2, coordinates)
    assert ridge / 10 <= chosen <= ridge * 10

    def expected_error(w_ridge: float) -> float:
        """E |J_new (z - truth)|^2 per sample, rows of J_new like J's: (z - truth)^T (J^T J /
        m) (z - truth) plus the noise, with z the ridge's estimate."""
        w = w_ridge * scale2
        A = J.T @ J + C.T @ (w[:, None] * C)
        z = -np.linalg.solve(A, J.T @ r + C.T @ (w * coordinates))
        e = z - truth
        return float(e @ (J.T @ J / J.shape[0]) @ e) + sigma**2

    errors = np.array([expected_error(g) for g in GRID])
    assert expected_error(chosen) <= 1.05 * errors.min()
    assert errors.max() > 1.5 * errors.min()  # the choice matters on this grid


def test_nothing_to_pull_or_too_few_data_is_no_ridge():
    """No coordinate the data see, or fewer residuals than free directions: ridge 0."""
    rng, J, C, scale2 = _problem(2, m=20, k=10, frames=2)
    r = rng.normal(size=20)
    assert ridge_by_evidence(J, r, C, np.zeros(10), np.zeros(10)) == 0.0
    assert ridge_by_evidence(J[:1], r[:1], C, scale2, np.zeros(10)) == 0.0
    assert ridge_by_evidence(J, r, C, scale2, np.zeros(10)) > 0.0
