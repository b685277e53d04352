"""Physically consistent identification with a prior toward the nominal model.

Least squares gives base parameters ``beta`` with covariance ``C``; behind
them stand standard parameters ``x`` (``beta = B x``), and B has a null
space: directions of x that the log cannot see (a link's mass on its joint
axis, the split of a regrouped sum between links). A model is physically
consistent when every link's pseudo-inertia ``J_i(x)`` (linear in x) is
positive definite (a mass distribution exists; [Wensing]) and its rotor
inertias and friction coefficients are non-negative. :func:`consistent_fit`
solves the convex problem

    min  f(x) = 1/2 (B x - beta)^T C^{-1} (B x - beta) + eps/2 |(x - x0) / s|^2
                + lambda sum_i d(J_i(x) | J0_i)
    s.t. J_i(x) - delta 1 positive definite (all links),  x_k > 0 (rotor inertias, friction),

with ``d(J | J0) = tr(J0^{-1} J) - log det (J0^{-1} J) - 4`` the log-det (Bregman)
divergence of the pseudo-inertia from the nominal one [LeeWensingPark]: zero at
the nominal link, growing with every relative change of its mass, first moments and
second moments, infinite at the boundary of the consistent set, and invariant to
the frame and the units. The data term is in chi-square units (one standard
deviation of one base parameter costs 1/2), and ``lambda = PRIOR_WEIGHT``:
directions the log determines keep the least-squares values (within their
standard deviations), directions it does not see take the nominal link's
shape. On the Staubli TX40 recording (models/staubli_tx40) lambda = 10 moves
the base parameters by 0.84 to 0.97 standard deviations on average and predicts
the held-out folds better than the least-squares fit; lambda from 0.01 to 1
leaves the unseen mass of link 2 at 0.3 of its nominal. ``J0_i`` is the
nominal link's pseudo-inertia with its eigenvalues raised to at least 1e-3 of its
largest (:func:`nominal_pseudo_inertias`): a massless or flat nominal link gets a
definite prior. ``eps`` (1e-10 of the data's weakest curvature) decides among the
drive parameters the data leave equal (a rotor inertia regrouped with a link's
inertia); ``delta = 1e-9`` keeps the pseudo-inertias definite.

The solver is the barrier method for semidefinite constraints (Boyd and
Vandenberghe, *Convex Optimization*, §11.3 and §11.6): Newton's method on
``t f(x) - sum_i log det(J_i(x) - delta 1) - sum_k log x_k`` with a
backtracking line search that keeps every iterate strictly consistent,
``t`` multiplied by 10 after each centring, until the duality gap bound
``m / t`` (m = 4 n + k) is below ``tolerance (1 + |f|)``; a centring that
takes more than 100 Newton steps (a badly conditioned estimate) ends the
search with a warning and the last iterate, which is consistent. Gradient and
Hessian are exact: ``d/dx -log det J = -A^T vec(K)`` and ``d^2 = A^T (K (x)
K) A`` with ``K = J^{-1}`` and A the linear map from x to vec(J); the
divergence's trace term is linear. The problem is convex, so the result is
the global optimum.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from workbench import inertia
from workbench.errors import WorkbenchWarning
from workbench.identification.torque_model import BaseParameters, TorqueModel
from workbench.lie import Array

NON_NEGATIVE = ("Ia", "fv", "fs", "Iam", "fvm", "fsm")  # drive terms (offsets are signed)
DELTA = 1e-9  # smallest pseudo-inertia eigenvalue of a fitted link (kg m^2)
PRIOR_WEIGHT = 10.0  # of the divergence to the nominal pseudo-inertias, in chi-square units


def non_negative(model: TorqueModel) -> np.ndarray:
    """Boolean mask over x of the drive parameters that cannot be negative."""
    return np.array([name.rstrip("0123456789") in NON_NEGATIVE for name in model.names])


def is_consistent(model: TorqueModel, x: Array, margin: float = 0.0) -> bool:
    """Positive definite pseudo-inertias and non-negative rotor inertias and friction."""
    eigenvalues = np.linalg.eigvalsh(inertia.pseudo_inertia(model.link_phi(x)))
    return bool(np.all(eigenvalues > margin) and np.all(x[non_negative(model)] >= 0))


@dataclass(frozen=True)
class ConsistentFit:
    """The solution, the last barrier weight and the Newton steps taken."""

    x: Array
    objective: float  # f(x) of the module docstring
    gap_bound: float  # m / t: f(x) exceeds the optimum by at most this
    newton_steps: int


def pseudo_inertia_map(model: TorqueModel) -> Array:
    """A (n, 16, P): vec(J_i(x)) = A_i x for the links' pseudo-inertias."""
    links = np.stack([model.link_phi(e) for e in np.eye(model.size)])  # (P, n, 10)
    J = inertia.pseudo_inertia(links)  # (P, n, 4, 4)
    return np.moveaxis(J.reshape(model.size, -1, 16), 0, -1)


def nominal_pseudo_inertias(model: TorqueModel, x0: Array) -> Array:
    """The prior's pseudo-inertias (n, 4, 4): the nominal links' ``J_i(x0)``, each eigenvalue
    raised to at least 1e-3 of the link's largest, 1e-6 of the robot's largest and 1e3 DELTA
    (a massless or flat nominal link still has a definite prior, a small one)."""
    values, vectors = np.linalg.eigh(inertia.pseudo_inertia(model.link_phi(x0)))
    floor = np.maximum(1e-3 * values.max(axis=-1, keepdims=True), 1e-6 * values.max())
    floor = np.maximum(floor, 1e3 * DELTA)
    return vectors @ (np.maximum(values, floor)[..., None] * np.swapaxes(vectors, -1, -2))


def consistent_fit(
    model: TorqueModel,
    base: BaseParameters,
    x0: Array,
    beta: Array,
    covariance: Array,
    prior_weight: float = PRIOR_WEIGHT,
    eps: float = 1e-10,
    tolerance: float = 1e-10,
) -> ConsistentFit:
    """The consistent x most likely under the estimate ``beta`` and the prior toward the
    nominal ``x0`` (module docstring)."""
    scale = np.maximum(np.abs(x0), 1e-3 * max(np.abs(x0).max(), 1.0))
    information = np.linalg.pinv(covariance)
    B = base.matrix * scale  # the problem in w = x / scale
    H = B.T @ information @ B
    H = (H + H.T) / 2
    curvature = np.linalg.eigvalsh(H)
    ridge = eps * curvature[curvature > 1e-12 * curvature[-1]].min()
    H += ridge * np.eye(model.size)
    w0 = x0 / scale
    g = B.T @ information @ beta + ridge * w0
    A = pseudo_inertia_map(model) * scale  # (n, 16, P) in w
    J0 = nominal_pseudo_inertias(model, x0)
    K0 = np.linalg.inv(J0)
    prior_gradient = prior_weight * (np.swapaxes(A, 1, 2) @ K0.reshape(-1, 16, 1)).sum(axis=0)[:, 0]
    prior_constant = prior_weight * (np.linalg.slogdet(J0)[1].sum() - 4 * A.shape[0])
    drive = np.flatnonzero(non_negative(model))
    m = 4 * A.shape[0] + drive.size

    def objective(w: Array, values: Array) -> float:
        """f in residual form (no cancellation between large terms); ``values`` the
        eigenvalues of the pseudo-inertias J_i(w)."""
        r = B @ w - beta
        divergence = prior_gradient @ w - prior_weight * np.log(values).sum() + prior_constant
        return float(r @ information @ r / 2 + ridge * (w - w0) @ (w - w0) / 2 + divergence)

    At = np.swapaxes(A, 1, 2)

    def point(w: Array) -> _Point | None:
        """w with f(w), the -log det terms and the pseudo-inertias' eigen-decomposition;
        None outside the domain."""
        if np.any(w[drive] <= 0):
            return None
        values, vectors = np.linalg.eigh((A @ w).reshape(-1, 4, 4))
        if np.any(values <= DELTA):
            return None
        barrier = -np.log(values - DELTA).sum() - np.log(w[drive]).sum()
        return _Point(w, objective(w, values), barrier, values, vectors)

    def log_det_derivatives(p: _Point, shift: float) -> tuple[Array, Array]:
        """Gradient and Hessian in w of -sum_i log det (J_i(w) - shift 1)."""
        V = p.vectors
        K = V @ (1.0 / (p.values - shift)[..., None] * np.swapaxes(V, -1, -2))
        gradient = -(At @ K.reshape(-1, 16, 1)).sum(axis=0)[:, 0]
        kron = (K[:, :, None, :, None] * K[:, None, :, None, :]).reshape(-1, 16, 16)
        return gradient, (At @ kron @ A).sum(axis=0)

    def derivatives(p: _Point) -> tuple[Array, Array, Array, Array]:
        """Gradient and Hessian of f, then of the barrier, at ``p``."""
        grad_d, hess_d = log_det_derivatives(p, 0.0)
        grad_f = H @ p.w - g + prior_gradient + prior_weight * grad_d
        hess_f = H + prior_weight * hess_d
        grad_b, hess_b = log_det_derivatives(p, DELTA)
        grad_b[drive] -= 1.0 / p.w[drive]
        hess_b[drive, drive] += 1.0 / p.w[drive] ** 2
        return grad_f, hess_f, grad_b, hess_b

    current = point(_strictly_feasible(model, x0, scale, J0, drive))
    t = m / max(abs(current.objective), 1.0)
    steps = 0
    while True:
        for _ in range(100):  # centring: damped Newton on t f + barrier
            steps += 1
            following = _newton_step(current, t, point, derivatives)
            if following is None:
                break
            current = following
        else:  # every iterate is strictly consistent: keep the last, say how far it may be
            warnings.warn(
                f"the physically consistent fit stopped after {steps} Newton steps without "
                f"centring (its objective may exceed the optimum by more than {m / t:.3g}); the "
                "model is consistent, its base parameters may be further from the data's",
                WorkbenchWarning,
                stacklevel=4,
            )
            break
        if m / t <= tolerance * max(1.0, abs(current.objective)):
            break
        t *= 10.0
    return ConsistentFit(scale * current.w, current.objective, m / t, steps)


@dataclass(frozen=True)
class _Point:
    """A strictly feasible iterate with what the Newton step and the line search need of it."""

    w: Array
    objective: float  # f(w)
    barrier: float  # -sum log det (J_i - delta 1) - sum log w_k
    values: Array  # (n, 4) eigenvalues of J_i
    vectors: Array  # (n, 4, 4) their eigenvectors


def _newton_step(current: _Point, t, point, derivatives) -> _Point | None:
    """One Newton step with backtracking (Armijo, staying strictly feasible) on t f + barrier.

    Returns None when ``current`` is centred (Newton decrement below 1e-9)
    or no step decreases the function beyond rounding; else the new point.
    """
    w = current.w
    grad_f, hess_f, grad_b, hess_b = derivatives(current)
    gradient = t * grad_f + grad_b
    step = -np.linalg.solve(t * hess_f + hess_b, gradient)
    decrement = float(-gradient @ step)
    if decrement / 2 <= 1e-9:
        return None
    value = t * current.objective + current.barrier
    size = 1.0
    while size > 1e-12:
        trial = point(w + size * step)
        if trial is not None:
            new = t * trial.objective + trial.barrier
            if new <= value - 0.25 * size * decrement:
                return trial if new < value - 1e-13 * max(1.0, abs(value)) else None
        size *= 0.5
    return None


def _strictly_feasible(
    model: TorqueModel, x0: Array, scale: Array, J0: Array, drive: np.ndarray
) -> Array:
    """A strictly consistent start: x0 with the prior's pseudo-inertias ``J0`` and the drive
    terms raised to at least 1e-3 of their scale."""
    x = x0.copy()
    x[model.link_phi(np.arange(model.size, dtype=float)).astype(np.int64)] = (
        inertia.phi_from_pseudo_inertia(J0)
    )
    x[drive] = np.maximum(x0[drive], 1e-3 * scale[drive])
    return x / scale
