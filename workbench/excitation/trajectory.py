"""Periodic excitation trajectories: finite Fourier series, rest constraints, exact derivatives.

Each joint i follows a finite Fourier series of period ``T`` (angular
frequency ``w = 2 pi / T``) with ``L`` harmonics (Swevers et al. 1997):

    q_i(t)   = c_i0 + sum_{l=1..L} a_il sin(l w t) + b_il cos(l w t),
    dq_i(t)  = sum_l l w (a_il cos(l w t) - b_il sin(l w t)),
    ddq_i(t) = -sum_l (l w)^2 (a_il sin(l w t) + b_il cos(l w t)),

with the coefficients of joint i in one vector ``c_i = [c_i0, a_i1..a_iL,
b_i1..b_iL]`` (2L + 1,), so that ``q_i(t) = phi_q(t) . c_i`` and likewise
``phi_v``, ``phi_a``: the trajectory is *linear* in its coefficients and
its derivatives with respect to them are the basis rows themselves.

Rest at the start and end (``dq = ddq = 0`` at t = 0, hence at t = T by
periodicity) and, optionally, a given start posture ``q(0) = q_start`` are
linear equalities ``E c_i = e_i``:

    sum_l l a_il = 0,   sum_l l^2 b_il = 0,   (c_i0 + sum_l b_il = q_start_i).

They are eliminated: ``c_i = c_p,i + P z_i`` with ``P`` (2L + 1, m) an
orthonormal basis of the null space of E and ``c_p,i`` the minimum-norm
particular solution; ``z`` (n, m) are the decision variables of the design
(``theta = z.ravel()``, joint-major). Samples are taken at ``t_k = k T / K``,
k = 0..K-1 (collocation points, uniform over one period).

Limits between collocation points (:func:`margin_factor`). ``f = q_i - c``
for any constant c, ``dq_i`` and ``ddq_i`` are trigonometric polynomials
of degree L. Where ``|f|`` peaks (at t*), ``f'(t*) = 0``; the nearest
collocation point is at most ``h / 2 = T / (2K)`` away, so by Taylor's
theorem ``|f(t_k)| >= |f(t*)| - (h/2)^2 / 2 max|f''|`` and Bernstein's
inequality ``max|f''| <= (L w)^2 max|f|`` gives

    max_t |f(t)| <= max_k |f(t_k)| / kappa,   kappa = 1 - (pi L / K)^2 / 2.

Requiring ``|f(t_k)| <= kappa * limit`` at the collocation points therefore
keeps position (about the middle of its range), velocity and acceleration
within their limits at *every* t. Torques are no trigonometric polynomial;
they are constrained at the collocation points with the same factor and
checked on a fine grid afterwards (:mod:`workbench.excitation.design`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from workbench.errors import WorkbenchError
from workbench.lie import Array


@dataclass(frozen=True)
class FourierSpace:
    """The trajectories of ``n`` joints with a given period, harmonics and constraints.

    ``start`` (n,): the posture at t = 0 (None: free, chosen by the design).
    ``rest``: dq = ddq = 0 at t = 0 (and T).
    """

    n: int
    period: float
    harmonics: int
    rest: bool = True
    start: Array | None = None

    def __post_init__(self) -> None:
        if not (self.period > 0 and np.isfinite(self.period)):
            raise WorkbenchError(f"trajectory period {self.period} must be a positive number")
        if self.harmonics < 1:
            raise WorkbenchError(f"trajectory harmonics {self.harmonics} must be at least 1")
        if self.rest and self.harmonics < 3:
            raise WorkbenchError(
                f"trajectory harmonics {self.harmonics}: rest at start and end needs at least 3"
            )
        if self.start is not None:
            start = np.asarray(self.start, dtype=float)
            if start.shape != (self.n,) or not np.all(np.isfinite(start)):
                raise WorkbenchError(f"trajectory start must be {self.n} finite joint values")
            object.__setattr__(self, "start", start)

    @property
    def omega(self) -> float:
        """Base angular frequency w = 2 pi / T (rad/s)."""
        return 2.0 * np.pi / self.period

    @property
    def coefficients_per_joint(self) -> int:
        return 2 * self.harmonics + 1

    def _constraints(self) -> tuple[Array, Array]:
        """E (k, 2L+1) and e (n, k) of the equalities E c_i = e_i (module docstring)."""
        L = self.harmonics
        rows, rhs = [], []
        if self.rest:
            phi = self.basis(np.zeros(1))
            rows += [phi[1][0], phi[2][0]]
            rhs += [np.zeros(self.n), np.zeros(self.n)]
        if self.start is not None:
            rows.append(self.basis(np.zeros(1))[0][0])
            rhs.append(self.start)
        if not rows:
            return np.zeros((0, 2 * L + 1)), np.zeros((self.n, 0))
        return np.array(rows), np.array(rhs).T

    @property
    def null_space(self) -> tuple[Array, Array]:
        """(P (2L+1, m) orthonormal null space of E, c_p (n, 2L+1) particular coefficients)."""
        E, e = self._constraints()
        if E.shape[0] == 0:
            return np.eye(self.coefficients_per_joint), np.zeros((self.n, 2 * self.harmonics + 1))
        _, s, Vt = np.linalg.svd(E)
        rank = int(np.sum(s > 1e-12 * s[0]))
        P = Vt[rank:].T
        particular = e @ np.linalg.pinv(E).T  # (n, 2L+1)
        return P, particular

    @property
    def per_joint(self) -> int:
        """Free parameters per joint, m."""
        return self.null_space[0].shape[1]

    @property
    def size(self) -> int:
        """Length of theta (n m)."""
        return self.n * self.per_joint

    def basis(self, t: ArrayLike) -> tuple[Array, Array, Array]:
        """phi_q, phi_v, phi_a (K, 2L+1): the coefficient rows of q, dq, ddq at times t (K,)."""
        t = np.asarray(t, dtype=float).reshape(-1)
        w = self.omega * np.arange(1, self.harmonics + 1)  # (L,)
        arg = t[:, None] * w
        s, c = np.sin(arg), np.cos(arg)
        one, zero = np.ones((t.size, 1)), np.zeros((t.size, 1))
        phi_q = np.hstack([one, s, c])
        phi_v = np.hstack([zero, w * c, -w * s])
        phi_a = np.hstack([zero, -(w**2) * s, -(w**2) * c])
        return phi_q, phi_v, phi_a

    def reduced_basis(self, t: ArrayLike) -> tuple[tuple[Array, Array, Array], Array]:
        """(B_q, B_v, B_a) (K, m) with ``q[:, i] = q_p[:, i] + B_q z_i``, and the affine part
        (3, K, n) of q, dq, ddq (from c_p)."""
        P, particular = self.null_space
        phis = self.basis(t)
        B = tuple(phi @ P for phi in phis)
        offset = np.stack([phi @ particular.T for phi in phis])
        return B, offset  # type: ignore[return-value]

    def coefficients(self, theta: ArrayLike) -> Array:
        """c (n, 2L+1) of the decision vector theta (n m,)."""
        P, particular = self.null_space
        z = np.asarray(theta, dtype=float).reshape(self.n, P.shape[1])
        return particular + z @ P.T

    def parameters(self, coefficients: ArrayLike) -> Array:
        """theta (n m,) of coefficients that satisfy the constraints (orthogonal projection)."""
        P, particular = self.null_space
        c = np.asarray(coefficients, dtype=float).reshape(self.n, -1)
        return ((c - particular) @ P).ravel()

    def trajectory(self, theta: ArrayLike) -> FourierTrajectory:
        return FourierTrajectory(self.period, self.harmonics, self.coefficients(theta))

    def collocation_times(self, points: int) -> Array:
        """t_k = k T / K, k = 0..K-1 (K = ``points``)."""
        return self.period * np.arange(points) / points


@dataclass(frozen=True)
class FourierTrajectory:
    """q(t) of every joint as a finite Fourier series (module docstring); coefficients (n, 2L+1)."""

    period: float
    harmonics: int
    coefficients: Array

    @property
    def n(self) -> int:
        return self.coefficients.shape[0]

    def evaluate(self, t: ArrayLike) -> tuple[Array, Array, Array]:
        """q, dq, ddq (K, n) at times t (K,) (any t: the series is periodic)."""
        space = FourierSpace(self.n, self.period, self.harmonics, rest=False)
        phi_q, phi_v, phi_a = space.basis(t)
        c = self.coefficients
        return phi_q @ c.T, phi_v @ c.T, phi_a @ c.T

    def sampled(self, rate: float, periods: int = 1) -> tuple[Array, Array, Array, Array]:
        """t, q, dq, ddq at ``rate`` Hz over ``periods`` periods, both ends included."""
        samples = round(periods * self.period * rate)
        t = np.arange(samples + 1) / rate
        return (t, *self.evaluate(t))


def margin_factor(harmonics: int, points: int) -> float:
    """kappa = 1 - (pi L / K)^2 / 2 (module docstring); raises if K is too small for L."""
    ratio = np.pi * harmonics / points
    kappa = 1.0 - 0.5 * ratio**2
    if kappa < 0.5:
        raise WorkbenchError(
            f"{points} collocation points are too few for {harmonics} harmonics: use at least "
            f"{int(np.ceil(np.pi * harmonics))} (4 per harmonic or more is typical)"
        )
    return float(kappa)
