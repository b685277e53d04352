"""Gautier's weighted least squares of base parameters: what in-memory and accumulated fits share.

Both fits (:func:`workbench.calibration.fitting.dynamic.fit_equations` on the
regressor's rows, :func:`workbench.calibration.fitting.normal_equations.fit_normal_equations`
on factors accumulated from a large log) scale the regressor's columns to unit
norm, refuse an underdetermined or rank-deficient problem
(:func:`check_determined`), weight joint j by ``1 / sigma_j`` with
``sigma_j^2 = |r_j|^2 / (m_j - b)`` (:func:`joint_sigma`; ``m_j`` rows of
joint j, ``b`` base parameters) and complete beta to standard parameters
(:func:`completed_fit`) [Gautier].

Least squares (:func:`fit_factors`) takes every step on the triangular
factor ``R_j`` of each joint's rows ``[X_j tau_j] = Q_j R_j`` ((r + 1) x
(r + 1)): one QR of the rows, then only small matrices. The column norms of
X are those of the stacked ``R_j``; the rank check, the unweighted fit, the
residual norms ``|X_j theta - tau_j| = |R_j [theta; -1]|``, the weighted fit,
its covariance and condition number all come from the stacked (weighted)
factors. Robust losses re-weight every row and fit the rows themselves.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from scipy.linalg import solve_triangular

from workbench import inertia
from workbench.chain import Chain
from workbench.errors import WorkbenchError
from workbench.identification.consistency import PRIOR_WEIGHT, consistent_fit, is_consistent
from workbench.identification.torque_model import BaseParameters, TorqueModel
from workbench.lie import Array


@dataclass(frozen=True)
class DynamicFit:
    """Identified base parameters, their statistics, and the completed model."""

    model: TorqueModel
    base: BaseParameters
    beta: Array  # (r,)
    covariance: Array  # (r, r)
    sigma: Array  # (n,) residual standard deviation per joint (N m)
    condition_number: float
    x: Array  # (P,) completed standard parameters (TorqueModel order)
    physically_consistent: bool
    iterations: int
    rows: int  # equations used
    shapes: Any = None  # fitted drive shapes (workbench.calibration.fitting.drive_shapes.Shapes)

    @property
    def std(self) -> Array:
        return np.sqrt(np.clip(np.diag(self.covariance), 0.0, None))

    @property
    def relative_std(self) -> Array:
        """100 std / |beta| (%); inf where beta is 0."""
        with np.errstate(divide="ignore"):
            return np.where(self.beta != 0, 100.0 * self.std / np.abs(self.beta), np.inf)

    @property
    def chain(self) -> Chain:
        """The model's chain with the completed inertias."""
        phi, _ = self.model.split(self.x)
        return replace(self.model.chain, inertias=inertia.matrix_from_phi(phi))

    @property
    def drive_values(self) -> Array:
        """Completed drive parameters, in ``model.drives.names`` order."""
        return self.model.split(self.x)[1]

    def value(self, name: str) -> float:
        """The base parameter whose name (regrouping expression) starts with ``name``."""
        for expression, value in zip(self.base.names, self.beta, strict=True):
            if expression.split(" ")[0] == name:
                return float(value)
        raise WorkbenchError(f"no base parameter led by '{name}'")


def check_determined(
    A: Array,
    rows: int,
    scale: Array,
    base: BaseParameters,
    joints: Sequence[str] | None = None,
) -> None:
    """Refuse fits with fewer equations than parameters or a rank-deficient regressor.

    ``A`` (k, r): the column-scaled regressor, or any matrix with its singular
    values and right singular vectors (its triangular factor); ``rows`` the
    equations behind it, ``scale`` (r,) the column norms; ``joints``: the
    chain's joint names, which the refusal gives beside the parameters (numbered
    from 1 by joint).
    """
    r = len(scale)
    if rows < r:
        raise WorkbenchError(
            f"underdetermined identification: {rows} torque equations for {r} base parameters; "
            "log more samples (or more motion)"
        )
    if np.any(scale == 0):
        zero = np.flatnonzero(scale == 0)
        names = [_with_joint(base.names[k], joints) for k in zero]
        # the temperature slopes fvT<j>, fsT<j> (workbench.identification.drives)
        slopes = any(re.match(r"f[vs]T\d", base.names[k]) for k in zero)
        cause = "joints that never move or accelerate" + (
            ", or a drive temperature that never changes" if slopes else ""
        )
        raise WorkbenchError(
            f"the log does not excite base parameter(s) {', '.join(names[:5])}: their regressor "
            f"columns are zero ({cause})"
        )
    _, s, Vt = np.linalg.svd(A, full_matrices=False)
    if s[-1] < 1e-10 * s[0]:
        worst = np.argsort(-np.abs(Vt[-1]))[:3]
        names = ", ".join(_with_joint(base.names[k], joints) for k in worst)
        raise WorkbenchError(
            f"rank-deficient identification (condition number {s[0] / max(s[-1], 1e-300):.2e}): "
            f"the log cannot separate {names}; log a more exciting trajectory (or leave "
            "those joints out of [model] joints)"
        )


def _with_joint(name: str, joints: Sequence[str] | None) -> str:
    """A base parameter's name with the joint its leading symbol is numbered by (fv8 -> fv8
    (joint 'wheel_left_joint')), when ``joints`` are given."""
    found = re.match(r"[A-Za-z]+(\d+)\b", name)
    if joints is None or found is None or not 1 <= int(found.group(1)) <= len(joints):
        return name
    return f"{name} (joint '{joints[int(found.group(1)) - 1]}')"


def joint_sigma(residual2: Array, counts: np.ndarray, r: int) -> Array:
    """sigma_j (n,) from each joint's squared residual norm and row count; zeros replaced by the
    smallest positive sigma so that every weight ``1 / sigma_j`` is finite."""
    dof = np.where(counts > r, counts - r, np.maximum(counts, 1))
    sigma = np.sqrt(residual2 / dof)
    return np.where(sigma > 0, sigma, sigma[sigma > 0].min() if np.any(sigma > 0) else 1.0)


def factor(A: Array) -> Array:
    """The square triangular factor R (c, c) of A (m, c): ``A^T A = R^T R`` (zero rows padded)."""
    c = A.shape[1]
    R = np.linalg.qr(A, mode="r") if A.shape[0] else np.zeros((0, c))
    if R.shape[0] < c:
        R = np.vstack([R, np.zeros((c - R.shape[0], c))])
    return R


def merge_factors(a: Array, b: Array) -> Array:
    """Factors of stacked rows, joint by joint: (..., c, c) twice -> (..., c, c)."""
    out = np.empty_like(a)
    for index in np.ndindex(a.shape[:-2]):
        out[index] = factor(np.vstack([a[index], b[index]]))
    return out


def joint_factors(X: Array, y: Array, joint: np.ndarray, n: int) -> Array:
    """Per joint the factor (n, r + 1, r + 1) of its rows of ``[X y]``.

    ``X`` (m, r) and ``y`` (m,) are the rows, ``joint`` (m,) the joint of each.
    """
    A = np.column_stack([X, y])
    return np.stack([factor(A[joint == j]) for j in range(n)])


def fit_factors(
    model: TorqueModel,
    base: BaseParameters,
    R: Array,
    counts: np.ndarray,
    *,
    x0: Array | None,
    weighted: bool,
    physical: bool,
    prior_weight: float = PRIOR_WEIGHT,
) -> DynamicFit:
    """Gautier's least squares from per-joint factors R (n, r + 1, r + 1) of ``[X_j tau_j]``
    over ``counts`` (n,) rows each, unscaled (module docstring); ``prior_weight`` that of the
    consistent completion's prior (:func:`completed_fit`)."""
    n, r = R.shape[0], R.shape[2] - 1
    scale = np.sqrt(np.sum(R[:, :, :r] ** 2, axis=(0, 1)))  # column norms of X
    rows = int(counts.sum())
    check_determined(factor(np.vstack(R[:, :, :r] / np.where(scale > 0, scale, 1.0))), rows,
                     scale, base, model.chain.joint_names)  # fmt: skip
    Rs = R.copy()
    Rs[:, :, :r] /= scale  # factors of [X_j / scale, tau_j]
    weights = np.ones(n)
    if weighted:
        theta, _ = _weighted_fit(Rs, weights)
        weights = 1.0 / joint_sigma(_residual2(Rs, theta), counts, r)
    theta, Rw = _weighted_fit(Rs, weights)
    residual2 = _residual2(Rs, theta)
    s2 = float(np.sum(residual2 * weights**2)) / max(rows - r, 1)
    covariance = s2 * np.linalg.inv(Rw.T @ Rw) / np.outer(scale, scale)
    singular = np.linalg.svd(Rw, compute_uv=False)
    return completed_fit(
        model, base, theta / scale, covariance, x0=x0, physical=physical,
        prior_weight=prior_weight, sigma=np.sqrt(residual2 / np.maximum(counts, 1)),
        condition_number=float(singular[0] / singular[-1]), iterations=1, rows=rows,
    )  # fmt: skip


def _weighted_fit(Rs: Array, weights: Array) -> tuple[Array, Array]:
    """Least-squares solution of the stacked system, joint j's rows times ``weights[j]``, and
    the triangular factor (r, r) of its weighted regressor."""
    r = Rs.shape[2] - 1
    W = factor(np.vstack(Rs * weights[:, None, None]))
    return solve_triangular(W[:r, :r], W[:r, r]), W[:r, :r]


def _residual2(Rs: Array, theta: Array) -> Array:
    """|X_j theta - tau_j|^2 per joint (n,) from the factors."""
    v = np.append(theta, -1.0)
    return np.sum((Rs @ v) ** 2, axis=1)


def completed_fit(
    model: TorqueModel,
    base: BaseParameters,
    beta: Array,
    covariance: Array,
    *,
    x0: Array | None,
    physical: bool,
    prior_weight: float = PRIOR_WEIGHT,
    **statistics,
) -> DynamicFit:
    """The fit completed to standard parameters.

    ``physical`` (the default of ``workbench calibrate``): the consistent model most likely
    under the estimate and the prior toward the nominal pseudo-inertias
    (:func:`workbench.identification.consistency.consistent_fit`; its base parameters stay
    within their standard deviations of ``beta`` where the data determine them). Otherwise
    ``x = x0 + B^+ (beta - B x0)``, the minimum-norm change of the nominal model, consistent or
    not. ``prior_weight``: lambda of the prior (:data:`~workbench.identification.consistency.
    PRIOR_WEIGHT` by default). ``statistics``: sigma, condition_number, iterations, rows of
    :class:`DynamicFit`."""
    x0 = model.values() if x0 is None else x0
    if physical:
        x = consistent_fit(model, base, x0, beta, covariance, prior_weight).x
        beta = base.matrix @ x
    else:
        x = x0 + np.linalg.pinv(base.matrix) @ (beta - base.matrix @ x0)
    return DynamicFit(
        model=model, base=base, beta=beta, covariance=covariance, x=x,
        physically_consistent=is_consistent(model, x), **statistics,
    )  # fmt: skip
