"""Inertial-parameter identification from torque logs (base parameters, friction).

Model: ``tau = Y(q, dq, ddq) phi + F_v dq + F_c sign(dq)`` with the regressor
``Y = workbench.inertia.torque_regressor`` ((N, n, 10 n), phi in the base
frame at q = 0, project order [m, h, I_xx, I_yy, I_zz, I_xy, I_xz, I_yz]) and
diagonal viscous / Coulomb friction.

Base parameters (Gautier's numerical method): QR with column pivoting of the
stacked regressor at random states, ``Y P = Q [R11 R12]``; the first r
pivoted columns are independent and ``Y_dep = Y_ind K`` with ``K = R11^-1
R12``, so ``Y phi = Y_ind beta`` with ``beta = phi_ind + K phi_dep``.

Completion: the full phi written to a URDF is the minimum-norm change of the
nominal phi whose base parameters equal the estimate, ``phi = phi_0 +
B^+ (beta - B phi_0)`` with ``beta = B phi``; it reproduces the identified
torques exactly. With ``physical=True`` the remaining null-space freedom is
used to make every link's pseudo-inertia ``[[tr(I)/2 1 - I, h], [h^T, m]]``
positive definite (closest such completion, SLSQP); when noise has moved
the estimate outside the set of consistent models, the estimate itself is
replaced by the consistent model closest in the least-squares metric (the
base parameters then differ from the unconstrained ones by what the data
allow).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.linalg import qr
from scipy.optimize import minimize

from workbench import inertia
from workbench.calibration.logs import Log
from workbench.calibration.solver import irls_weights
from workbench.chain import Chain
from workbench.errors import WorkbenchError
from workbench.lie import Array


@dataclass(frozen=True)
class BaseParameters:
    """Structure of the base parameters: ``beta = matrix @ phi`` (r, 10 n)."""

    independent: np.ndarray  # (r,) phi indices of the base columns
    matrix: Array  # (r, 10 n)


def base_parameters(
    chain: Chain, samples: int = 200, rtol: float = 1e-8, seed: int = 0
) -> BaseParameters:
    """Base parameters of ``chain`` from random states (module docstring)."""
    rng = np.random.default_rng(seed)
    lower, upper = np.maximum(chain.lower, -np.pi), np.minimum(chain.upper, np.pi)
    q = rng.uniform(lower, upper, size=(samples, chain.n))
    dq, ddq = rng.normal(size=(2, samples, chain.n))
    Y = inertia.torque_regressor(chain, q, dq, ddq).reshape(-1, 10 * chain.n)
    _, R, perm = qr(Y, mode="economic", pivoting=True)
    d = np.abs(np.diag(R))
    r = int(np.sum(d > rtol * d[0]))
    K = np.linalg.solve(R[:r, :r], R[:r, r:])
    matrix = np.zeros((r, Y.shape[1]))
    matrix[:, perm[:r]] = np.eye(r)
    matrix[:, perm[r:]] = K
    return BaseParameters(perm[:r], matrix)


def friction_columns(dq: Array) -> Array:
    """(N, n, 2 n): d tau / d [F_v, F_c] for diagonal viscous and Coulomb friction."""
    N, n = dq.shape
    X = np.zeros((N, n, 2 * n))
    idx = np.arange(n)
    X[:, idx, idx] = dq
    X[:, idx, n + idx] = np.sign(dq)
    return X


def pseudo_inertia(phi: Array) -> Array:
    """Pseudo-inertia matrices (..., 4, 4): [[tr(I)/2 1 - I, h], [h^T, m]] (Wensing et al.)."""
    I = inertia.rotational_inertia(phi)
    J = np.zeros((*phi.shape[:-1], 4, 4))
    J[..., :3, :3] = 0.5 * np.trace(I, axis1=-2, axis2=-1)[..., None, None] * np.eye(3) - I
    J[..., :3, 3] = J[..., 3, :3] = phi[..., 1:4]
    J[..., 3, 3] = phi[..., 0]
    return J


def smallest_eigenvalues(phi: Array) -> tuple[Array, Array]:
    """Each link's smallest pseudo-inertia eigenvalue (n,) and its gradient (n, 10 n).

    The pseudo-inertia is linear in phi, so d lambda_min / d phi_k = v^T J(e_k) v
    with v the unit eigenvector (a simple eigenvalue assumed, as SLSQP does).
    """
    links = phi.reshape(-1, 10)
    values, vectors = np.linalg.eigh(pseudo_inertia(links))
    v = vectors[..., 0]  # (n, 4)
    basis = pseudo_inertia(np.eye(10))  # (10, 4, 4): J(e_k)
    local = np.einsum("na,kab,nb->nk", v, basis, v)  # (n, 10)
    n = len(links)
    gradient = np.zeros((n, 10 * n))
    for i in range(n):
        gradient[i, 10 * i : 10 * i + 10] = local[i]
    return values[:, 0], gradient


def is_physically_consistent(phi: Array, margin: float = 0.0) -> bool:
    """Whether every link's pseudo-inertia has eigenvalues above ``margin``."""
    return bool(np.all(np.linalg.eigvalsh(pseudo_inertia(phi.reshape(-1, 10))) > margin))


def complete_phi(
    phi0: Array, base: BaseParameters, beta: Array, physical: bool = False
) -> tuple[Array, bool]:
    """Full phi (n, 10) with base parameters ``beta`` closest to ``phi0``; and its consistency."""
    B = base.matrix
    flat0 = phi0.ravel()
    phi = flat0 + np.linalg.pinv(B) @ (beta - B @ flat0)
    if not physical or is_physically_consistent(phi, 1e-9):
        return phi.reshape(phi0.shape), is_physically_consistent(phi)
    _, s, Vt = np.linalg.svd(B)
    N = Vt[int(np.sum(s > 1e-10 * s[0])) :].T  # null space of B

    def min_eig(w: Array) -> Array:
        return smallest_eigenvalues(phi + N @ w)[0] - 1e-9

    def min_eig_jacobian(w: Array) -> Array:
        return smallest_eigenvalues(phi + N @ w)[1] @ N

    result = minimize(
        lambda w: float((N @ w + phi - flat0) @ (N @ w + phi - flat0)),
        np.zeros(N.shape[1]),
        constraints=[{"type": "ineq", "fun": min_eig, "jac": min_eig_jacobian}],
        method="SLSQP",
        options={"maxiter": 500, "ftol": 1e-14},
    )
    phi = phi + N @ result.x
    return phi.reshape(phi0.shape), is_physically_consistent(phi)


def _constrained_fit(
    phi0: Array, base: BaseParameters, theta: Array, information: Array
) -> tuple[Array, Array]:
    """The closest physically consistent model to the least-squares estimate.

    Minimises ``(t - theta)^T information (t - theta)`` (the weighted
    least-squares cost up to a constant) over ``t = [B phi, friction]``
    subject to positive definite pseudo-inertias (SLSQP from the
    minimum-norm completion). Returns phi (n, 10) and t.
    """
    B = base.matrix
    r = B.shape[0]
    flat0 = phi0.ravel()
    start = np.concatenate([flat0 + np.linalg.pinv(B) @ (theta[:r] - B @ flat0), theta[r:]])
    lift = np.zeros((theta.size, start.size))  # t = lift @ [phi, friction]
    lift[:r, : B.shape[1]] = B
    lift[r:, B.shape[1] :] = np.eye(theta.size - r)
    H = lift.T @ information @ lift
    g = lift.T @ information @ theta
    scale = float(np.abs(H).max())

    def cost(x: Array) -> tuple[float, Array]:
        return float(x @ H @ x - 2 * g @ x) / scale, (2 * H @ x - 2 * g) / scale

    def min_eig(x: Array) -> Array:
        return smallest_eigenvalues(x[: B.shape[1]])[0] - 1e-9

    def min_eig_jacobian(x: Array) -> Array:
        gradient = np.zeros((B.shape[1] // 10, x.size))
        gradient[:, : B.shape[1]] = smallest_eigenvalues(x[: B.shape[1]])[1]
        return gradient

    result = minimize(
        cost, start, jac=True, method="SLSQP",
        constraints=[{"type": "ineq", "fun": min_eig, "jac": min_eig_jacobian}],
        options={"maxiter": 1000, "ftol": 1e-15},
    )  # fmt: skip
    x = result.x
    return x[: B.shape[1]].reshape(phi0.shape), lift @ x


@dataclass(frozen=True)
class DynamicFit:
    """Identified base parameters, friction, completed phi and the calibrated chain."""

    chain: Chain
    base: BaseParameters
    beta: Array  # (r,)
    friction: Array  # (2 n,) viscous then Coulomb
    covariance: Array  # (r + 2 n, r + 2 n) of [beta, friction]
    sigma: float
    condition_number: float
    physically_consistent: bool
    iterations: int


def dynamic_columns(chain: Chain, base: BaseParameters, log: Log) -> Array:
    """Stacked columns (N n, r + 2 n): base regressor then friction."""
    Y = inertia.torque_regressor(chain, log.q, log.dq, log.ddq)
    X = np.concatenate([Y[..., base.independent], friction_columns(log.dq)], axis=2)
    return X.reshape(-1, X.shape[2])


def predict_torques(fit: DynamicFit, log: Log) -> Array:
    """Torques (N, n) of the identified model: Y_base beta + friction."""
    X = dynamic_columns(fit.chain, fit.base, log)
    return (X @ np.concatenate([fit.beta, fit.friction])).reshape(len(log), -1)


def calibrate_dynamic(
    chain: Chain,
    log: Log,
    *,
    loss: str = "linear",
    f_scale: float = 1.0,
    physical: bool = False,
    max_iterations: int = 30,
) -> DynamicFit:
    """Weighted least squares (IRLS for robust losses) of base parameters and friction."""
    if log.tau is None:
        raise WorkbenchError(f"{log.source}: dynamic calibration needs tau_<joint> columns")
    base = base_parameters(chain)
    X = dynamic_columns(chain, base, log)
    y = log.tau.ravel()
    scale = np.linalg.norm(X, axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    Xs = X / scale
    w = np.ones_like(y)
    x = np.zeros(X.shape[1])
    iterations = 0
    while iterations < max_iterations:
        iterations += 1
        sw = np.sqrt(w)
        x_new = np.linalg.lstsq(Xs * sw[:, None], y * sw, rcond=None)[0]
        converged = np.linalg.norm(x_new - x) <= 1e-12 * (1 + np.linalg.norm(x_new))
        x = x_new
        w = irls_weights(Xs @ x - y, loss, f_scale)
        if loss == "linear" or converged:
            break
    r = Xs @ x - y
    dof = max(y.shape[0] - X.shape[1], 1)
    sigma2 = float((w * r) @ r) / dof
    A = Xs.T @ (w[:, None] * Xs)
    cov = sigma2 * np.linalg.inv(A) / np.outer(scale, scale)
    s = np.linalg.svd(Xs, compute_uv=False)
    theta = x / scale
    nb = base.independent.shape[0]
    phi, consistent = complete_phi(chain.phi, base, theta[:nb], physical)
    if physical and not consistent:  # no consistent completion: constrain the estimate itself
        phi, theta = _constrained_fit(chain.phi, base, theta, X.T @ (w[:, None] * X))
        consistent = is_physically_consistent(phi)
    calibrated = replace(chain, inertias=inertia.matrix_from_phi(phi))
    return DynamicFit(
        chain=calibrated,
        base=base,
        beta=theta[:nb],
        friction=theta[nb:],
        covariance=cov,
        sigma=float(np.sqrt(sigma2)),
        condition_number=float(s[0] / s[-1]),
        physically_consistent=consistent,
        iterations=iterations,
    )
