"""The ridge toward the nominal chosen by the evidence: empirical Bayes on the linearised fit.

A calibration with a ridge minimises ``|r|^2 + sum_i w_i c_i^2`` with
``w_i = ridge * s_i^2`` (``c`` the joints' coordinates away from the nominal,
``s_i`` their data scales: :class:`~workbench.calibration.fitting.kinematic.
KinematicProblem`). Read as a Gaussian prior ``c ~ N(0, sigma^2 / w)`` with
the residuals ``N(0, sigma^2)``, the ridge is the ratio of the noise variance
to the prior's, and the data say which ratio they make most probable: the
ridge of largest marginal likelihood (the evidence, [MacKay1992]; type-II
maximum likelihood), the other parameters (device, marker and fixture frames)
under a flat prior, ``sigma^2`` profiled out.

On the problem linearised where the prior is centred (the nominal joints,
the other frames fitted: residuals ``r`` (m,), reduced Jacobian ``J`` (m, s)
of the identifiable steps ``z``, coordinates ``c + C z`` (k,), c = 0 there)
everything is closed-form. With ``A = J^T J + C^T W C`` and ``Q`` the
minimum of ``|r + J z|^2 + (c + C z)^T W (c + C z)``:

    log p(data | ridge) = -(m + k - s) / 2 log Q + 1/2 log det W - 1/2 log det A + const.

One factorisation of an (s, s) matrix per ridge of a log-spaced grid and no
fit (the linearisation is where every fit of the joints starts), nothing held
out, so that the ridge is chosen from the training samples alone (inside
every fold of the selection). Unlike the held-out score of a fold, the
evidence also weighs how far the model moves from the nominal against what
that buys, which is what carries to configurations the log did not visit
(other tool positions of MUKCa's sockets: ``BENCHMARKS.md``). Linearised at
the nominal rather than at the fit without a ridge, it does not trust a
model that the data alone push far (an over-fitted one) to judge the prior.
"""

from __future__ import annotations

import numpy as np

from workbench.lie import Array

GRID = np.logspace(-10.0, 0.0, 41)  # ridges tried: 1e-10 (the data alone) to 1 (the prior alone)


def log_evidence(
    J: Array, r: Array, C: Array, scale2: Array, coordinates: Array, ridges: Array = GRID
) -> Array:
    """The log marginal likelihood (up to a constant) of each ridge (module docstring).

    ``J`` (m, s): residual derivatives along the steps; ``r`` (m,): residuals;
    ``C`` (k, s): coordinate derivatives; ``scale2`` (k,): ``s_i^2`` (0: a coordinate the
    data do not see, which the prior leaves alone);
    ``coordinates`` (k,): ``c`` at the linearisation point.
    """
    m, s = J.shape
    k = int(np.sum(scale2 > 0))  # coordinates the prior holds (the data see them)
    JtJ, Jtr = J.T @ J, J.T @ r
    out = np.empty(len(ridges))
    for index, ridge in enumerate(ridges):
        w = ridge * scale2
        A = JtJ + C.T @ (w[:, None] * C)
        g = Jtr + C.T @ (w * coordinates)
        sign, logdet = np.linalg.slogdet(A)
        if sign <= 0:
            out[index] = -np.inf
            continue
        z = -np.linalg.solve(A, g)
        e, c = r + J @ z, coordinates + C @ z
        Q = float(e @ e + np.sum(w * c**2))
        out[index] = -0.5 * (m + k - s) * np.log(Q) + 0.5 * np.sum(np.log(w[w > 0])) - 0.5 * logdet
    return out


def ridge_by_evidence(
    J: Array, r: Array, C: Array, scale2: Array, coordinates: Array, ridges: Array = GRID
) -> float:
    """The ridge of ``ridges`` with the largest :func:`log_evidence`; 0 when there are no
    coordinates to pull, or the data do not determine the evidence (``m + k <= s``)."""
    m, s = J.shape
    k = int(np.sum(scale2 > 0))
    if k == 0 or m + k <= s:
        return 0.0
    evidence = log_evidence(J, r, C, scale2, coordinates, ridges)
    if not np.any(np.isfinite(evidence)):
        return 0.0
    return float(ridges[int(np.argmax(evidence))])
