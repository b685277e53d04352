"""Levenberg-Marquardt on a manifold of models, in an identifiable subspace, with IRLS.

The calibrations linearise a model ``x`` (a Chain and friction, ...) at
``delta = 0``: ``r(x + delta) ~ r(x) + J delta``, where ``x + delta`` is
the model's own update (``retract``, e.g. ``Chain.with_eta``, [Kwon]
eq. 6, relinearised at every iteration). Only directions the data see are
moved: ``subspace(x, J)`` returns a matrix S (p, k) and the step is
``delta = S z``. The subspace is fixed in dimension k at the nominal model
(the numerically identifiable directions, see :func:`identifiable_subspace`).

Robust losses (Huber, soft-L1, scale ``f_scale``) enter through iteratively
reweighted least squares: weights ``w = rho'(r^2) `` from the residuals of the
current model (Holland & Welsch), recomputed at every iteration.

Parameter covariance after convergence: ``sigma^2 (J_S^T W J_S)^-1`` in z,
mapped to delta by S, with ``sigma^2 = sum w r^2 / (m - k)``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from workbench.calibration.problems.kind_names import LOSSES
from workbench.errors import WorkbenchError
from workbench.lie import Array


@dataclass(frozen=True)
class Subspace:
    """Identifiable directions: columns of ``basis`` (p, k); the rest is listed in ``null``
    (computed when first read: the iterations use the basis only)."""

    basis: Array  # (p, k)
    unseen: Callable[[], Array] = field(repr=False, compare=False)  # computes ``null``
    singular_values: Array  # of the column-scaled Jacobian, descending
    condition_number: float

    @cached_property
    def null(self) -> Array:
        """(p, p - k) unit directions the data do not see (at the nominal)."""
        return self.unseen()


def identifiable_subspace(
    J: Array, prior: Array, rank: int | None = None, rtol: float = 1e-8, preferred: int = 0
) -> Subspace:
    """SVD of ``J @ prior`` (columns scaled to unit norm): the directions it resolves.

    ``prior`` (p, m) spans the candidate directions (e.g. the eta directions
    that change a twist, ``identifiable_eta_basis``); singular values below
    ``rtol`` times the largest are not identifiable unless ``rank`` is given.
    The first ``preferred`` columns of ``prior`` are kept whole when the data
    resolve them, and the other directions only for what they add: what the
    two could both explain goes to the preferred ones (e.g. a camera frame
    absorbs a common motion of all joint axes, which it cannot be told apart
    from).
    """
    if preferred:
        return _preferred_subspace(J, prior, preferred, rank, rtol)
    Jp = J @ prior
    scale = np.linalg.norm(Jp, axis=0)
    scale = np.where(scale > 1e-10 * scale.max(), scale, 1.0)  # unseen columns stay ~0
    X = Jp / scale
    if X.shape[0] > X.shape[1]:  # same singular values and V, much faster for tall J
        X = np.linalg.qr(X, mode="r")
    s, Vt = _singular_values_and_directions(X)
    if Vt.shape[0] < Vt.shape[1]:  # fewer residuals than candidate directions
        Vt = np.vstack([Vt, orthogonal_complement(Vt.T).T])
        s = np.concatenate([s, np.zeros(Vt.shape[0] - s.shape[0])])
    if rank is None:
        rank = int(np.sum(s > rtol * s[0]))
    V = Vt.T / scale[:, None]
    basis, _ = np.linalg.qr(prior @ V[:, :rank])

    def unseen() -> Array:  # inside prior (small singular values) and outside prior
        inside = prior @ V[:, rank:]
        inside = inside / np.linalg.norm(inside, axis=0)
        return np.hstack([inside, orthogonal_complement(np.linalg.qr(prior)[0])])

    cond = float(s[0] / s[rank - 1]) if rank > 0 else np.inf
    return Subspace(basis, unseen, s, cond)


def _singular_values_and_directions(X: Array) -> tuple[Array, Array]:
    """``s`` and ``Vt`` of the thin SVD of X: LAPACK's divide and conquer (numpy), and where
    that does not converge, the QR iteration (``gesvd``, scipy). On this project's TX40 twist
    fit the first stopped with "SVD did not converge" on a finite matrix on a processor
    with AVX-512 kernels."""
    try:
        return np.linalg.svd(X, full_matrices=False)[1:]
    except np.linalg.LinAlgError:
        from scipy.linalg import svd

        return svd(X, full_matrices=False, lapack_driver="gesvd")[1:]


def _preferred_subspace(
    J: Array, prior: Array, preferred: int, rank: int | None, rtol: float
) -> Subspace:
    first = identifiable_subspace(J, prior[:, :preferred], rtol=rtol)
    if first.basis.shape[1] < preferred:  # the data do not resolve them all: no preference
        return identifiable_subspace(J, prior, rank, rtol)
    Q, _ = np.linalg.qr(J @ first.basis)
    rest = J - Q @ (Q.T @ J)  # what the preferred directions cannot explain
    rank = None if rank is None else rank - preferred
    second = identifiable_subspace(rest, prior[:, preferred:], rank, rtol)
    basis = np.hstack([first.basis, second.basis])
    X = J @ basis
    s = np.linalg.svd(X / np.linalg.norm(X, axis=0), compute_uv=False)
    unseen = lambda: orthogonal_complement(np.linalg.qr(basis)[0])  # noqa: E731
    return Subspace(basis, unseen, s, float(s[0] / s[-1]))


def orthogonal_complement(Q: Array) -> Array:
    """Orthonormal columns spanning the complement of the column space of ``Q``."""
    U, s, _ = np.linalg.svd(Q, full_matrices=True)
    return U[:, int(np.sum(s > 1e-9)) :]


def irls_weights(r: Array, loss: str, f_scale: float) -> Array:
    """IRLS weights rho'(z) of ``r / f_scale``: 1 (linear), min(1, 1/|z|) (Huber), (1+z^2)^-1/2."""
    if loss == "linear":
        return np.ones_like(r)
    z = np.abs(r) / f_scale
    if loss == "huber":
        return np.where(z <= 1.0, 1.0, 1.0 / np.maximum(z, 1.0))
    if loss == "soft_l1":
        return 1.0 / np.sqrt(1.0 + z**2)
    raise WorkbenchError(f"unknown loss '{loss}'; choose one of {', '.join(LOSSES)}")


def robust_cost(r: Array, loss: str, f_scale: float) -> float:
    """Sum of rho(r): r^2 / 2 (linear), Huber, or soft-L1, each scaled by f_scale^2."""
    if loss == "linear":  # numpy's pairwise sum, not a BLAS dot: BLAS threads wake slowly
        return 0.5 * float(np.sum(np.square(r)))  # on a busy machine and then spin
    z = np.abs(r) / f_scale
    if loss == "huber":
        rho = np.where(z <= 1.0, 0.5 * z**2, z - 0.5)
    else:
        rho = np.sqrt(1.0 + z**2) - 1.0
    return float(f_scale**2 * rho.sum())


@dataclass(frozen=True)
class Solution:
    """Result of :func:`levenberg_marquardt`."""

    model: Any
    residual: Array
    weights: Array
    S: Array  # subspace basis at the solution
    covariance: Array  # (p, p) of delta at the solution
    sigma: float  # residual standard deviation (weighted)
    iterations: int
    costs: tuple[float, ...]


Normal = Callable[[], tuple[Array, Array, Array]]  # () -> (S (p, k), A (k, k), g (k,))


def minimise(
    model: Any,
    r: Array,
    data: Any,
    trial: Callable[[Any], tuple[Array, Any]],
    linearise: Callable[[Any, Array, Any], tuple[Array, Normal]],
    retract: Callable[[Any, Array], Any],
    *,
    cost: Callable[[Array], float],
    max_iterations: int = 50,
    xtol: float = 1e-13,
    ftol: float = 1e-15,
    progress: bool = False,
    label: str = "lm",
) -> Solution:
    """The Levenberg-Marquardt iteration every calibration shares (module docstring).

    At the current model (residuals ``r`` and whatever ``data`` its
    evaluation returned), ``linearise(model, r, data) -> (w, normal)`` gives
    the IRLS weights and ``normal() -> (S, A, g)``: the subspace basis and
    the normal equations ``A = (J S)^T W (J S)``, ``g = (J S)^T W r``, in
    whatever way the problem forms them. The step ``delta = S z`` solves
    ``(A + lambda diag(A)) z = -g`` (Marquardt's damping, divided by 3 on
    success, doubled on failure, also when ``trial(model) -> (r, data)``
    raises WorkbenchError on the trial model, e.g. a closed chain that cannot
    be assembled). Stops when ``|S z| < xtol`` or the relative cost decrease
    is below ``ftol``; one line per iteration to stderr when ``progress``.
    """
    w, normal = linearise(model, r, data)
    current = cost(r)
    costs = [current]
    lam = 1e-6
    iteration = 0
    for iteration in range(1, max_iterations + 1):
        S, A, g = normal()
        diag = np.diag(A).copy()
        improved = False
        while lam < 1e16:
            try:
                z = -np.linalg.solve(A + lam * np.diag(diag), g)
            except np.linalg.LinAlgError:
                lam *= 10.0
                continue
            delta = S @ z
            candidate = retract(model, delta)
            try:
                r_new, data_new = trial(candidate)
            except WorkbenchError:  # a model the data cannot be evaluated on: too long a step
                lam *= 2.0
                continue
            cost_new = cost(r_new)
            if cost_new <= current:
                improved = True
                break
            lam *= 2.0
        if not improved:
            break
        decrease = current - cost_new
        model, r, current = candidate, r_new, cost_new
        w, normal = linearise(model, r, data_new)
        costs.append(current)
        lam = max(lam / 3.0, 1e-12)
        step = float(np.linalg.norm(delta))
        if progress:
            rms = float(np.sqrt(np.mean(np.square(r))))
            print(
                f"{label}: iteration {iteration:3d}  cost {current:.6e}  rms {rms:.3e}  "
                f"step {step:.2e}  lambda {lam:.1e}",
                file=sys.stderr,
            )
        if step < xtol or decrease <= ftol * max(current, 1e-300):
            break
    S, A, _ = normal()
    dof = max(r.shape[0] - S.shape[1], 1)
    sigma2 = float(np.sum(w * np.square(r))) / dof
    cov_z = sigma2 * np.linalg.pinv(A)
    return Solution(
        model=model,
        residual=r,
        weights=w,
        S=S,
        covariance=S @ cov_z @ S.T,
        sigma=float(np.sqrt(sigma2)),
        iterations=iteration,
        costs=tuple(costs),
    )


def levenberg_marquardt(
    model: Any,
    evaluate: Callable[[Any], tuple[Array, Array]],
    retract: Callable[[Any, Array], Any],
    subspace: Callable[[Any, Array], Array],
    *,
    loss: str = "linear",
    f_scale: float = 1.0,
    max_iterations: int = 50,
    xtol: float = 1e-13,
    ftol: float = 1e-15,
    progress: bool = False,
    label: str = "lm",
) -> Solution:
    """:func:`minimise` with a dense Jacobian: ``evaluate(model) -> (r (m,), J (m, p))``
    with J = d r / d delta at delta = 0, ``subspace(model, J) -> S (p, k)``."""

    def linearise(m: Any, r: Array, J: Array) -> tuple[Array, Normal]:
        w = irls_weights(r, loss, f_scale)

        def normal() -> tuple[Array, Array, Array]:
            S = subspace(m, J)
            JS = J @ S
            return S, JS.T @ (w[:, None] * JS), JS.T @ (w * r)

        return w, normal

    r, J = evaluate(model)
    return minimise(
        model, r, J, evaluate, linearise, retract, cost=lambda r: robust_cost(r, loss, f_scale),
        max_iterations=max_iterations, xtol=xtol, ftol=ftol, progress=progress, label=label,
    )  # fmt: skip
