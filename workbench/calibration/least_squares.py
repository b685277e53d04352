"""Gautier's weighted least squares of base parameters: what in-memory and accumulated fits share.

Both fits (:func:`workbench.calibration.dynamic.fit_equations` on the
regressor's rows, :func:`workbench.calibration.normal_equations.fit_normal_equations`
on their triangular factors) scale the regressor's columns to unit norm,
refuse an underdetermined or rank-deficient problem (:func:`check_determined`),
weight joint j by ``1 / sigma_j`` with ``sigma_j^2 = |r_j|^2 / (m_j - b)``
(:func:`joint_sigma`; ``m_j`` rows of joint j, ``b`` base parameters) and
complete beta to standard parameters (:func:`completed_fit`) [Gautier].
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from workbench import inertia
from workbench.calibration.consistency import consistent_fit, is_consistent
from workbench.calibration.torque_model import BaseParameters, TorqueModel
from workbench.chain import Chain
from workbench.errors import WorkbenchError
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


def check_determined(A: Array, rows: int, scale: Array, base: BaseParameters) -> None:
    """Refuse fits with fewer equations than parameters or a rank-deficient regressor.

    ``A`` (k, r): the column-scaled regressor, or any matrix with its singular
    values and right singular vectors (its triangular factor); ``rows`` the
    equations behind it, ``scale`` (r,) the column norms.
    """
    r = len(scale)
    if rows < r:
        raise WorkbenchError(
            f"underdetermined identification: {rows} torque equations for {r} base parameters; "
            "log more samples (or more motion)"
        )
    if np.any(scale == 0):
        names = [base.names[k] for k in np.flatnonzero(scale == 0)]
        raise WorkbenchError(
            f"the log does not excite base parameter(s) {', '.join(names[:5])}: their regressor "
            "columns are zero (joints that never move or accelerate)"
        )
    _, s, Vt = np.linalg.svd(A, full_matrices=False)
    if s[-1] < 1e-10 * s[0]:
        worst = np.argsort(-np.abs(Vt[-1]))[:3]
        names = ", ".join(base.names[k] for k in worst)
        raise WorkbenchError(
            f"rank-deficient identification (condition number {s[0] / max(s[-1], 1e-300):.2e}): "
            f"the log cannot separate {names}; log a more exciting trajectory"
        )


def joint_sigma(residual2: Array, counts: np.ndarray, r: int) -> Array:
    """sigma_j (n,) from each joint's squared residual norm and row count; zeros replaced by the
    smallest positive sigma so that every weight ``1 / sigma_j`` is finite."""
    dof = np.where(counts > r, counts - r, np.maximum(counts, 1))
    sigma = np.sqrt(residual2 / dof)
    return np.where(sigma > 0, sigma, sigma[sigma > 0].min() if np.any(sigma > 0) else 1.0)


def completed_fit(
    model: TorqueModel,
    base: BaseParameters,
    beta: Array,
    covariance: Array,
    *,
    x0: Array | None,
    physical: bool,
    **statistics,
) -> DynamicFit:
    """The fit with standard parameters ``x = x0 + B^+ (beta - B x0)`` (minimum-norm change of
    the nominal model), or, with ``physical`` and an inconsistent completion, the consistent
    model closest to the estimate (:func:`workbench.calibration.consistency.consistent_fit`).
    ``statistics``: sigma, condition_number, iterations, rows of :class:`DynamicFit`."""
    x0 = model.values() if x0 is None else x0
    x = x0 + np.linalg.pinv(base.matrix) @ (beta - base.matrix @ x0)
    consistent = is_consistent(model, x)
    if physical and not consistent:
        x = consistent_fit(model, base, x0, beta, covariance).x
        beta = base.matrix @ x
        consistent = is_consistent(model, x)
    return DynamicFit(
        model=model, base=base, beta=beta, covariance=covariance, x=x,
        physically_consistent=consistent, **statistics,
    )  # fmt: skip
