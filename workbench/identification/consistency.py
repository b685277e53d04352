"""Physically consistent identification: the consistent model closest to the estimate.

Least squares gives base parameters ``beta`` with covariance ``C``; behind
them stand standard parameters ``x`` (``beta = B x``). A model is physically
consistent when every link's pseudo-inertia ``J_i(x)`` (linear in x) is
positive definite (a mass distribution exists; Wensing, Kim and Slotine) and
its rotor inertias and friction coefficients are non-negative.
:func:`consistent_fit` solves the convex problem

    min  f(x) = 1/2 (B x - beta)^T C^{-1} (B x - beta) + eps/2 |(x - x0) / s|^2
    s.t. J_i(x) - delta 1 positive definite (all links),  x_k > 0 (rotor inertias, friction),

the model the data find most likely among the consistent ones. ``eps`` is
1e-10 of the data's weakest curvature, so it decides only among equally
likely models: the one closest to the nominal ``x0`` in units ``s`` of each
parameter's nominal size. ``delta = 1e-9`` keeps the pseudo-inertias
definite.

The solver is the barrier method for semidefinite constraints (Boyd and
Vandenberghe, *Convex Optimization*, §11.3 and §11.6): Newton's method on
``t f(x) - sum_i log det(J_i(x) - delta 1) - sum_k log x_k`` with a
backtracking line search that keeps every iterate strictly consistent,
``t`` multiplied by 10 after each centring, until the duality gap bound
``m / t`` (m = 4 n + k) is below ``tolerance (1 + |f|)``. Gradient and
Hessian are exact: ``d/dx -log det J = -A^T vec(K)`` and ``d^2 = A^T (K (x)
K) A`` with ``K = J^{-1}`` and A the linear map from x to vec(J). The
problem is convex, so the result is the global optimum, also on the
boundary of the consistent set (a link the data see only as a flat body).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench import inertia
from workbench.errors import WorkbenchError
from workbench.identification.torque_model import BaseParameters, TorqueModel
from workbench.lie import Array

NON_NEGATIVE = ("Ia", "fv", "fs", "Iam", "fvm", "fsm")  # drive terms (offsets are signed)
DELTA = 1e-9  # smallest pseudo-inertia eigenvalue of a fitted link (kg m^2)


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


def consistent_fit(
    model: TorqueModel,
    base: BaseParameters,
    x0: Array,
    beta: Array,
    covariance: Array,
    eps: float = 1e-10,
    tolerance: float = 1e-10,
) -> ConsistentFit:
    """The consistent x most likely under the estimate ``beta`` (module docstring)."""
    scale = np.maximum(np.abs(x0), 1e-3 * max(np.abs(x0).max(), 1.0))
    information = np.linalg.pinv(covariance)
    B = base.matrix * scale  # the problem in w = x / scale
    H = B.T @ information @ B
    H = (H + H.T) / 2
    curvature = np.linalg.eigvalsh(H)
    weakest = curvature[curvature > 1e-12 * curvature[-1]].min()
    H += eps * weakest * np.eye(model.size)
    g = B.T @ information @ beta + eps * weakest * (x0 / scale)
    w0 = x0 / scale
    A = pseudo_inertia_map(model) * scale  # (n, 16, P) in w
    drive = np.flatnonzero(non_negative(model))
    m = 4 * A.shape[0] + drive.size

    def objective(w: Array) -> float:
        """f in residual form (no cancellation between large terms)."""
        r = B @ w - beta
        return float(r @ information @ r / 2 + eps * weakest * (w - w0) @ (w - w0) / 2)

    At = np.swapaxes(A, 1, 2)
    shift = DELTA * np.eye(4)

    def point(w: Array) -> _Point | None:
        """w with f(w), the -log det terms and the pseudo-inertias' eigen-decomposition;
        None outside the domain."""
        if np.any(w[drive] <= 0):
            return None
        values, vectors = np.linalg.eigh((A @ w).reshape(-1, 4, 4) - shift)
        if np.any(values <= 0):
            return None
        barrier = -np.log(values).sum() - np.log(w[drive]).sum()
        return _Point(w, objective(w), barrier, values, vectors)

    def barrier_derivatives(p: _Point) -> tuple[Array, Array]:
        """Gradient and Hessian of the -log det terms at ``p`` (module docstring)."""
        K = p.vectors @ (1.0 / p.values[..., None] * np.swapaxes(p.vectors, -1, -2))  # J^-1
        gradient = -(At @ K.reshape(-1, 16, 1)).sum(axis=0)[:, 0]
        kron = (K[:, :, None, :, None] * K[:, None, :, None, :]).reshape(-1, 16, 16)
        hessian = (At @ kron @ A).sum(axis=0)
        gradient[drive] -= 1.0 / p.w[drive]
        hessian[drive, drive] += 1.0 / p.w[drive] ** 2
        return gradient, hessian

    current = point(_strictly_feasible(model, x0, scale, A, drive))
    t = m / max(abs(current.objective), 1.0)
    steps = 0
    while True:
        for _ in range(100):  # centring: damped Newton on t f + barrier
            steps += 1
            following = _newton_step(current, t, point, barrier_derivatives, H, g)
            if following is None:
                break
            current = following
        else:
            raise WorkbenchError("the physically consistent fit did not converge (centring)")
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
    values: Array  # (n, 4) eigenvalues of J_i - delta 1
    vectors: Array  # (n, 4, 4) their eigenvectors


def _newton_step(current: _Point, t, point, barrier_derivatives, H, g) -> _Point | None:
    """One Newton step with backtracking (Armijo, staying strictly feasible) on t f + barrier.

    Returns None when ``current`` is centred (Newton decrement below 1e-9)
    or no step decreases the function beyond rounding; else the new point.
    """
    w = current.w
    grad_b, hess_b = barrier_derivatives(current)
    gradient = t * (H @ w - g) + grad_b
    step = -np.linalg.solve(t * H + hess_b, gradient)
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
    model: TorqueModel, x0: Array, scale: Array, A: Array, drive: np.ndarray
) -> Array:
    """A strictly consistent start near x0: eigenvalues and drive terms raised as needed."""
    phi = model.link_phi(x0)
    J = inertia.pseudo_inertia(phi)
    values, vectors = np.linalg.eigh(J)
    floor = 1e-3 * np.maximum(values.max(axis=-1, keepdims=True), 1e3 * DELTA)
    J = vectors @ (np.maximum(values, floor)[..., None] * np.swapaxes(vectors, -1, -2))
    x = x0.copy()
    x[model.link_phi(np.arange(model.size, dtype=float)).astype(np.int64)] = (
        inertia.phi_from_pseudo_inertia(J)
    )
    x[drive] = np.maximum(x0[drive], 1e-3 * scale[drive])
    return x / scale
