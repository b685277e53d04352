"""Information matrices of torque experiments, design criteria and their analytic gradients.

Rows. At a sample k (state s_k = (q_k, dq_k, ddq_k)) the experiment measures
``tau_k = X_k(s_k) p + noise`` with independent per-joint noise ``sigma_j``;
the weighted rows are ``X_k = Sigma^{-1/2} W_k`` (n, p):

* dynamic kind (:class:`DynamicInformation`): ``W_k`` holds the base
  columns of the joint-torque model (:mod:`workbench.identification.torque_model`),
  i.e. the standard-parameter columns ``base.independent`` of ``W = [Y C]``,
  inertial columns ``Y`` and drive columns ``C``; p = the base parameters;
* twist kind (:class:`TwistInformation`): ``W_k = [d tau/d eta U, C
  (, Y_base)]``, the joint-twist directions ``U`` that the torques
  determine (:func:`identifiable_eta_directions`), the drive terms and,
  with ``inertial``, the inertial base parameters, which twist calibration
  fits alongside.

Information ``F = sum_k X_k^T X_k`` (p, p); ``F^{-1}`` is the covariance of
the least-squares estimate. Criteria (to *minimise*):

* ``"logdet"`` (D-optimality): ``J = -log det F``, ``dJ/dF = -F^{-1}``;
* ``"condition"``: ``J = log cond(X) = log(s_max / s_min)`` with s the
  singular values of the stacked X, ``dJ/dX = u_max v_max^T / s_max -
  u_min v_min^T / s_min`` (differentiable where both are simple; the
  singular values of X are used rather than the eigenvalues of F, which
  lose twice the digits).

Gradient. With ``C = dJ/dF`` (symmetric), ``dJ/dX_k = 2 X_k C =: G_k``, so
``dJ/dtheta = sum_k sum_{a,b} G_k[a,b] dX_k[a,b]/ds_k . ds_k/dtheta``, i.e.
``d log det F / d theta = tr(F^{-1} dF/d theta)``. The trajectory is linear
in theta (:mod:`workbench.excitation.trajectory`), so ``ds_k/dtheta`` are
the basis rows; what the information classes provide is the contraction
``g_k = sum_{a,b} G_k[a,b] dX_k[a,b]/ds_k`` (3n per sample), from exact state
derivatives of the rows:

* inertial column c (link l, unit standard parameter e): ``W[:, c]`` is the
  inverse dynamics of a chain whose only inertia is the unit parameter
  (tau is linear in the inertias), so ``dW[:, c]/ds`` is
  :func:`~workbench.dynamics.derivatives.rnea_derivatives` of that chain:
  exact, compiled, one batched call per column (:class:`TorqueColumns`);
* drive columns: closed forms (:func:`drive_column_derivatives`), Coulomb
  friction through ``tanh(3 dq / v_s)`` during the design (``sign`` has no
  derivative; ``v_s`` is the problem's ``friction_speed``);
* eta columns: CasADi algorithmic differentiation of an SX recursion,
  contracted with ``G`` (:mod:`workbench.excitation.twist_sx`).

Shapes: states (K, n); rows (K, n, p); contractions (K, n) per state part.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from workbench import inertia
from workbench.chain import Chain
from workbench.dynamics.derivatives import rnea_derivatives, twist_derivatives
from workbench.errors import WorkbenchError
from workbench.eta import identifiable_eta_basis
from workbench.excitation import twist_sx
from workbench.identification.drives import Drives
from workbench.identification.torque_model import TO_STANDARD, BaseParameters, TorqueModel
from workbench.lie import Array

CRITERIA = ("logdet", "condition")


# ----------------------------------------------------------------- columns
def drive_column_derivatives(drives: Drives, dq: Array, ddq: Array) -> tuple[Array, Array]:
    """dC/d dq and dC/d ddq (N, n, p, n) of :meth:`Drives.columns` (closed forms).

    Coulomb columns ``s(x) = tanh(3 x / v)`` have ``s' = 3 (1 - s^2) / v``;
    with ``sign`` (no ``min_speed``) the derivative is 0 (almost everywhere).
    """
    N, n = dq.shape
    p = len(drives.names)
    dv = np.zeros((N, n, p, n))
    da = np.zeros((N, n, p, n))
    per = [
        *(["Ia"] if "rotor_inertia" in drives.terms else []),
        *(["fv", "fs"] if "friction" in drives.terms else []),
        *(["off"] if "offset" in drives.terms else []),
    ]
    for j in range(n):
        for t, name in enumerate(per):
            c = j * len(per) + t
            if name == "Ia":
                da[:, j, c, j] = 1.0
            elif name == "fv":
                dv[:, j, c, j] = 1.0
            elif name == "fs":
                dv[:, j, c, j] = _sign_derivative(dq[:, j], _threshold(drives, j, 1.0))
    c = n * len(per)
    R = drives.transmission
    for k in drives.coupled:
        r = R[k] / R[k, k]
        off = np.outer(r, r)
        np.fill_diagonal(off, 0.0)
        da[:, :, c, :] = off
        dv[:, :, c + 1, :] = off
        ds = _sign_derivative(dq @ R[k], _threshold(drives, k, abs(R[k, k])))  # (N,)
        dv[:, :, c + 2, :] = ds[:, None, None] * np.outer(R[k] / abs(R[k, k]), R[k])
        c += 3
    return dv, da


def _threshold(drives: Drives, j: int, scale: float) -> float | None:
    return None if drives.min_speed is None else scale * float(drives.min_speed[j])


def _sign_derivative(x: Array, threshold: float | None) -> Array:
    if threshold is None:
        return np.zeros_like(x)
    s = np.tanh(3.0 * x / threshold)
    return 3.0 * (1.0 - s**2) / threshold


@dataclass(frozen=True, eq=False)
class TorqueColumns:
    """Columns ``select`` of the joint-torque model ``W`` and their exact state derivatives."""

    model: TorqueModel
    select: np.ndarray  # (c,) indices in the model's (interleaved standard) column order
    _units: list = field(init=False, repr=False)

    def __post_init__(self) -> None:
        chain = self.model.chain
        n = chain.n
        grouped = self.model.order[self.select]
        inertial = grouped < 10 * n
        link, param = np.divmod(grouped, 10)
        L = inertia.motion_matrix(chain.joint_frames)  # (n, 10, 10): joint frame -> base frame
        units = []
        for c in np.flatnonzero(inertial):
            phi = np.zeros((n, 10))
            phi[link[c]] = L[link[c]] @ np.eye(10)[TO_STANDARD[param[c]]]
            units.append((c, replace(chain, inertias=inertia.matrix_from_phi(phi))))
        drive = np.flatnonzero(~inertial)
        object.__setattr__(self, "_units", units)
        object.__setattr__(self, "_drive", (drive, grouped[drive] - 10 * n))

    @property
    def size(self) -> int:
        return int(self.select.size)

    def values(self, q: Array, dq: Array, ddq: Array) -> Array:
        """W[:, :, select] (K, n, c)."""
        return self.model.columns(q, dq, ddq, select=self.select)

    def derivatives(self, q: Array, dq: Array, ddq: Array) -> Array:
        """dW/ds (3, K, n, c, n): by q, dq, ddq (module docstring)."""
        K, n = q.shape
        out = np.zeros((3, K, n, self.size, n))
        for c, unit in self._units:
            dq_, dv_, da_ = rnea_derivatives(unit, q, dq, ddq)
            out[0, :, :, c] = dq_
            out[1, :, :, c] = dv_
            out[2, :, :, c] = da_
        columns, source = self._drive
        if columns.size:
            dv, da = drive_column_derivatives(self.model.drives, dq, ddq)
            out[1][:, :, columns] = dv[:, :, source]
            out[2][:, :, columns] = da[:, :, source]
        return out

    def contract(self, q: Array, dq: Array, ddq: Array, G: Array) -> Array:
        """sum_{a,c} G[k, a, c] dW[k, a, c]/ds[k, j]: (3, K, n) for G (K, n, c)."""
        return np.einsum("kac,skacj->skj", G, self.derivatives(q, dq, ddq))


# ------------------------------------------------------------- information
class Information:
    """Weighted rows of an experiment and their contracted state derivatives (module docstring)."""

    chain: Chain
    sigma: Array  # (n,) torque noise per joint (N m)
    names: tuple[str, ...]
    nominal: Array  # (p,) nominal parameter values (0 where unknown)

    @property
    def size(self) -> int:
        return len(self.names)

    def rows(self, q: Array, dq: Array, ddq: Array) -> Array:
        """X (K, n, p) = Sigma^{-1/2} W."""
        raise NotImplementedError

    def contract(self, q: Array, dq: Array, ddq: Array, G: Array) -> Array:
        """(3, K, n): sum_{a,b} G[k,a,b] dX[k,a,b]/ds[k,j] for s = q, dq, ddq."""
        raise NotImplementedError

    def matrix(self, q: Array, dq: Array, ddq: Array) -> Array:
        """F = sum_k X_k^T X_k (p, p)."""
        X = self.rows(q, dq, ddq).reshape(-1, self.size)
        return X.T @ X


@dataclass(frozen=True, eq=False)
class DynamicInformation(Information):
    """Base parameters of a torque model (module docstring)."""

    model: TorqueModel
    base: BaseParameters
    sigma: Array
    nominal_drives: Array | None = None  # (len(drives.names),) nominal drive values

    def __post_init__(self) -> None:
        object.__setattr__(self, "_columns", TorqueColumns(self.model, self.base.independent))

    @property
    def chain(self) -> Chain:
        return self.model.chain

    @property
    def names(self) -> tuple[str, ...]:
        return self.base.names

    @property
    def nominal(self) -> Array:
        return self.base.matrix @ self.model.values(self.nominal_drives)

    def rows(self, q: Array, dq: Array, ddq: Array) -> Array:
        return self._columns.values(q, dq, ddq) / self.sigma[None, :, None]

    def contract(self, q: Array, dq: Array, ddq: Array, G: Array) -> Array:
        return self._columns.contract(q, dq, ddq, G / self.sigma[None, :, None])


@dataclass(frozen=True, eq=False)
class TwistInformation(Information):
    """Joint-twist directions ``U`` (6(n+1), m) with drive terms (and inertial base parameters).

    ``linear`` holds the other fitted columns: the drive columns, or the base
    columns of the torque model when inertial parameters are fitted too.
    """

    chain: Chain
    directions: Array  # (6(n+1), m) eta directions (columns), tool rows zero
    direction_names: tuple[str, ...]
    linear: TorqueColumns
    linear_names: tuple[str, ...]
    linear_nominal: Array
    sigma: Array

    @property
    def names(self) -> tuple[str, ...]:
        return self.direction_names + self.linear_names

    @property
    def nominal(self) -> Array:
        return np.concatenate([np.zeros(len(self.direction_names)), self.linear_nominal])

    @property
    def eta_count(self) -> int:
        return self.directions.shape[1]

    def rows(self, q: Array, dq: Array, ddq: Array) -> Array:
        n = self.chain.n
        J = twist_derivatives(self.chain, q, dq, ddq).dtau_deta[:, :, : 6 * n]
        X = np.concatenate([J @ self.directions[: 6 * n], self.linear.values(q, dq, ddq)], axis=2)
        return X / self.sigma[None, :, None]

    def contract(self, q: Array, dq: Array, ddq: Array, G: Array) -> Array:
        n, m = self.chain.n, self.eta_count
        Gw = G / self.sigma[None, :, None]
        D = np.einsum("em,kam->kea", self.directions[: 6 * n], Gw[:, :, :m])  # (K, 6n, n)
        eta_part = twist_sx.contracted_gradient(self.chain, q, dq, ddq, D)  # (K, 3n)
        eta_part = eta_part.reshape(-1, 3, n).transpose(1, 0, 2)
        return eta_part + self.linear.contract(q, dq, ddq, Gw[:, :, m:])


def random_states(chain: Chain, samples: int, seed: int = 0) -> tuple[Array, Array, Array]:
    """States for structural identifiability: q uniform in the limits (within +-pi), dq, ddq
    standard normal (as :func:`~workbench.identification.torque_model.base_parameters`)."""
    rng = np.random.default_rng(seed)
    lower, upper = np.maximum(chain.lower, -np.pi), np.minimum(chain.upper, np.pi)
    q = rng.uniform(lower, upper, size=(samples, chain.n))
    dq, ddq = rng.normal(size=(2, samples, chain.n))
    return q, dq, ddq


def identifiable_eta_directions(
    chain: Chain, nuisance: TorqueColumns, samples: int = 200, rtol: float = 1e-6, seed: int = 0
) -> tuple[Array, tuple[str, ...]]:
    """The joint-eta directions that torques determine besides the ``nuisance`` columns.

    Candidates: the columns of :func:`~workbench.eta.identifiable_eta_basis`
    (per joint, the directions that change its twist; the tool frame is
    left out: without a tool wrench torques do not see it). At random
    states their columns ``d tau/d eta b`` are projected off the span of the
    nuisance columns (drive terms, inertial parameters), scaled to unit norm
    and kept, in joint order, when the part not spanned by the kept ones
    before them exceeds ``rtol`` (QR without pivoting, as for base
    parameters). Returns U (6(n+1), m) and names ``eta<joint>.<k>``.
    """
    n = chain.n
    basis = identifiable_eta_basis(chain)
    joint_columns = np.flatnonzero(np.any(basis[: 6 * n] != 0, axis=0))
    B = basis[:, joint_columns]
    owner = np.array([int(np.flatnonzero(B[:, c])[0]) // 6 for c in range(B.shape[1])])
    q, dq, ddq = random_states(chain, samples, seed)
    J = (twist_derivatives(chain, q, dq, ddq).dtau_deta[:, :, : 6 * n] @ B[: 6 * n]).reshape(
        -1, B.shape[1]
    )
    N = nuisance.values(q, dq, ddq).reshape(-1, nuisance.size)
    if N.shape[1]:
        Q, _ = np.linalg.qr(N / np.maximum(np.linalg.norm(N, axis=0), 1e-300))
        J = J - Q @ (Q.T @ J)
    norms = np.linalg.norm(J, axis=0)
    active = np.flatnonzero(norms > rtol * max(norms.max(), 1e-300))
    if active.size == 0:
        raise WorkbenchError(
            f"model '{chain.name}': joint torques determine no joint-twist direction"
        )
    R = np.linalg.qr(J[:, active] / norms[active], mode="r")
    kept = active[np.abs(np.diag(R)) > rtol]
    names, count = [], {}
    for c in kept:
        j = int(owner[c])
        count[j] = count.get(j, 0) + 1
        names.append(f"eta{j + 1}.{count[j]}")
    return B[:, kept], tuple(names)


# ---------------------------------------------------------------- criteria
def criterion(F: Array, kind: str) -> tuple[float, Array]:
    """J (to minimise) and dJ/dF (p, p) of the information F (module docstring)."""
    if kind == "logdet":
        L = _cholesky(F)
        value = -2.0 * float(np.sum(np.log(np.diag(L))))
        Linv = np.linalg.inv(L)
        return value, -(Linv.T @ Linv)
    if kind == "condition":
        values, vectors = np.linalg.eigh(F)
        lo, hi = values[0], values[-1]
        if not lo > 0:
            return np.inf, np.zeros_like(F)
        vlo, vhi = vectors[:, 0], vectors[:, -1]
        C = 0.5 * (np.outer(vhi, vhi) / hi - np.outer(vlo, vlo) / lo)
        return 0.5 * float(np.log(hi / lo)), C
    raise WorkbenchError(f"unknown criterion '{kind}'; choose from {', '.join(CRITERIA)}")


def _cholesky(F: Array) -> Array:
    try:
        return np.linalg.cholesky(F)
    except np.linalg.LinAlgError:
        # singular information: -log det = +inf; a tiny ridge keeps the gradient finite
        ridge = 1e-12 * max(float(np.trace(F)) / F.shape[0], 1e-300)
        return np.linalg.cholesky(F + ridge * np.eye(F.shape[0]))


def log_det(F: Array) -> float:
    """log det F (-inf when F is not positive definite)."""
    sign, value = np.linalg.slogdet(F)
    return float(value) if sign > 0 else -np.inf


def condition_number(F: Array) -> float:
    """cond(X) = sqrt(l_max / l_min) of F = X^T X."""
    values = np.linalg.eigvalsh(F)
    return float(np.sqrt(values[-1] / values[0])) if values[0] > 0 else np.inf


def criterion_value(X: Array, kind: str) -> tuple[float, Array]:
    """J and F of the rows X (K, n, p); the condition number from the singular values of X
    (relative accuracy eps cond(X), where the eigenvalues of F would give eps cond(X)^2)."""
    X2 = X.reshape(-1, X.shape[-1])
    F = X2.T @ X2
    if kind == "condition":
        s = np.linalg.svd(X2, compute_uv=False)
        return (float(np.log(s[0] / s[-1])) if s[-1] > 0 else np.inf), F
    return criterion(F, kind)[0], F


def criterion_gradient(
    information: Information, q: Array, dq: Array, ddq: Array, kind: str
) -> tuple[float, Array, Array]:
    """J, F and dJ/ds (3, K, n) at the states (K, n) (module docstring)."""
    X = information.rows(q, dq, ddq)
    X2 = X.reshape(-1, X.shape[-1])
    F = X2.T @ X2
    if kind == "condition":  # singular vectors of X: dJ/dX = u1 v1^T / s1 - up vp^T / sp
        U, s, Vt = np.linalg.svd(X2, full_matrices=False)
        value = float(np.log(s[0] / s[-1]))
        G = (np.outer(U[:, 0], Vt[0]) / s[0] - np.outer(U[:, -1], Vt[-1]) / s[-1]).reshape(X.shape)
    else:
        value, C = criterion(F, kind)
        G = 2.0 * X @ C  # (K, n, p)
    return value, F, information.contract(q, dq, ddq, G)
