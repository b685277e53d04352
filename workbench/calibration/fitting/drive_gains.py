"""Drive gains and dynamic parameters identified together, from logs with a known payload.

Efforts are often logged in the drives' units (motor currents, or torques
through an unknown torque constant and gear ratio): joint j's torque is
``tau_j = k_j e_j`` with an unknown gain ``k_j`` per joint (N m per logged
unit; N for a prismatic joint). With the base-parameter model
``tau = W beta`` (:mod:`workbench.identification.torque_model`, drive terms
included), the logged efforts satisfy ``k_j e_j = W_j beta``: homogeneous in
(k, beta), so no log of the robot alone fixes their scale. A known payload
(the log's ``payload``: a body of known phi carried by a link, as in
``[model.payload]``) adds known torques ``tau_p = Y_p phi_p`` to the robot's:

    e_j k_j - W_j beta = Y_pj phi_p,

linear in the unknowns (k, beta) with a right-hand side that is not zero
where the payload is carried: the global identification of drive gains and
dynamic parameters of Gautier and Briot (2014), "Global identification of
joint drive gains and dynamic parameters of robots", ASME J. Dyn. Sys. Meas.
Control 136(5). The rows of every log are stacked: logs without a payload
(right-hand side 0) and logs with one, e.g. one log split at the moment the
payload was attached.

Rows are the torque equations of :func:`workbench.calibration.fitting.dynamic.torque_equations`
(parallel decimation, filter borders dropped, joint rows slower than the log's
``min_speed`` left out), with the logged efforts (not yet multiplied by a gain)
and the payload's torques through the same decimation filter, segment by
segment: a log split at gaps in its clock has its efforts at the very samples
of its regressor rows.

With coupled drives (a differential wrist), the gains may sit on the motors'
efforts, before the torque matrix ``T`` that maps them to the joints:
``tau = T diag(k) T^-1 e`` for the joint-side efforts ``e`` a log holds, still
linear in (k, beta); :func:`identify_drive_gains` fits that and the per-joint
gains and keeps the better fit. The fit is
Gautier's weighted least squares (:func:`workbench.identification.least_squares.joint_sigma`:
one weight ``1 / sigma_j`` per joint from an ordinary least-squares fit), with
the covariance ``s^2 (A_w^T A_w)^{-1}`` of the weighted residual variance
``s^2``; standard deviations are its diagonal's square roots.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from workbench.calibration.fitting.dynamic import torque_equations
from workbench.chain import PRISMATIC, Chain
from workbench.errors import WorkbenchError
from workbench.identification.drives import DEFAULT_TERMS, Drives
from workbench.identification.least_squares import check_determined, joint_sigma
from workbench.identification.torque_model import BaseParameters, TorqueModel, base_parameters
from workbench.lie import Array
from workbench.recordings import signals
from workbench.recordings.log import Log


@dataclass(frozen=True)
class DriveGainFit:
    """Drive gains (n,) and base parameters (r,) with their standard deviations."""

    model: TorqueModel
    base: BaseParameters
    gains: Array  # (n,) N m (N) per logged unit: tau_j = gains[j] * e_j
    beta: Array  # (r,) base parameters, in base.names order
    covariance: Array  # (n + r, n + r) of (gains, beta)
    sigma: Array  # (n,) residual standard deviation per joint, N m (N)
    condition_number: float
    rows: int  # equations used
    torque_matrix: Array | None = None  # (n, n) joint from motor; None: gains on the joints

    @property
    def side(self) -> str:
        """Where the gains sit: "joint" (on each joint's logged effort) or "motor" (on each
        motor's, before :attr:`torque_matrix`)."""
        return "joint" if self.torque_matrix is None else "motor"

    @property
    def effort_matrix(self) -> Array:
        """(n, n) joint torques from logged (joint-side) efforts: ``diag(k)``, or
        ``T diag(k) T^-1`` for motor-side gains behind the torque matrix T."""
        if self.torque_matrix is None:
            return np.diag(self.gains)
        T = self.torque_matrix
        return T @ np.diag(self.gains) @ np.linalg.inv(T)

    @property
    def std(self) -> Array:
        """Standard deviations (n + r,) of (gains, beta)."""
        return np.sqrt(np.clip(np.diag(self.covariance), 0.0, None))

    @property
    def gains_std(self) -> Array:
        return self.std[: self.gains.size]

    @property
    def beta_std(self) -> Array:
        return self.std[self.gains.size :]

    def scaled(self, log: Log) -> Log:
        """``log`` with its efforts multiplied by the gains: joint torques in N m (N)."""
        return replace(log, tau=log.tau @ self.effort_matrix.T)

    def summary(self) -> dict[str, object]:
        """JSON-ready gains with standard deviations, by joint, and the fit's statistics."""
        joints = self.model.chain.joint_names
        return {
            "gains": dict(zip(joints, self.gains.tolist(), strict=True)),
            "gains_std": dict(zip(joints, self.gains_std.tolist(), strict=True)),
            "base_parameters": dict(zip(self.base.names, self.beta.tolist(), strict=True)),
            "base_parameters_std": self.beta_std.tolist(),
            "sigma_per_joint": dict(zip(joints, self.sigma.tolist(), strict=True)),
            "side": self.side,
            "condition_number": self.condition_number,
            "rows_fitted": self.rows,
        }

    def scale_text(self) -> str:
        """The ``[torques] scale`` line of a log description with these gains (joint order of
        the model, motor order for motor-side gains; multiply by the scale the logs were read
        with, if it was not 1)."""
        chain = self.model.chain
        units = ["N" if k == PRISMATIC else "N m" for k in chain.joint_kinds]
        listing = ", ".join(f"{g:.6g}" for g in self.gains)
        notes = ", ".join(
            f"{name} {g:.4g} +- {s:.2g} {u}"
            for name, g, s, u in zip(chain.joint_names, self.gains, self.gains_std, units,
                                     strict=True)
        )  # fmt: skip
        side = "" if self.torque_matrix is None else (
            " (motor side: each motor's gain, before the torque matrix R^T of [transmission])"
        )  # fmt: skip
        return f"scale = [{listing}]  # per logged unit{side}: {notes}"


@dataclass(frozen=True)
class GainEquations:
    """Decimated rows of one log: efforts E (M, n), base regressor X (M, n, r), payload
    torques P (M, n) and the fit mask (M, n)."""

    efforts: Array
    X: Array
    payload: Array
    fit: np.ndarray


def gain_equations(model: TorqueModel, base: BaseParameters, log: Log) -> GainEquations:
    """The rows of ``e_j k_j - W_j beta = tau_payload_j`` of one log (module docstring)."""
    equations = torque_equations(model, base, log)  # tau: efforts minus the payload's torques
    efforts, _ = signals.decimate_segments(
        lambda start, stop: log.tau[start:stop], log.spans(), log.decimation, log.border
    )  # the same samples as the equations', segment by segment
    return GainEquations(efforts, equations.X, efforts - equations.tau, equations.fit)


def identify_drive_gains(
    chain: Chain,
    logs: Sequence[Log],
    drives: Drives | None = None,
    weighted: bool = True,
    max_iterations: int = 20,
) -> DriveGainFit:
    """Drive gains and base parameters from ``logs``, at least one with a known payload.

    ``drives`` defaults to viscous and Coulomb friction with the first log's
    transmission and speed threshold; its parameters are identified with the
    base parameters, in joint-side units (N m, N m s/rad, ...). The linear
    solution (module docstring) starts Gauss-Newton iterations on the same
    model written for the logged efforts, ``e_j = (W_j beta + tau_payload_j) / k_j``:
    noise in the efforts then sits in the measurement, not in the regressor
    where it would bias the gains towards 0 (by about 1 % with 1 % torque noise
    at 100 Hz, 10 times their standard deviation).

    With coupled drives (the first log's transmission R has off-diagonal
    terms, e.g. a differential wrist), a gain may sit on each joint's effort
    (torques logged joint side) or on each motor's, before the torque matrix
    ``R^T`` (motor side, the log description's default torque matrix):
    ``tau = R^T diag(k) R^-T e``. Both are fitted and the one with the smaller
    residuals (geometric mean over joints) is kept (:attr:`DriveGainFit.side`).
    """
    if not logs:
        raise WorkbenchError("drive gains need at least one log")
    if all(log.payload is None for log in logs):
        raise WorkbenchError(
            f"{', '.join(log.source for log in logs)}: drive gains need a log with a known "
            "payload ([model.payload]): without one, efforts fix the gains and the dynamic "
            "parameters only up to a common scale"
        )
    first = logs[0]
    drives = drives or Drives(chain.n, DEFAULT_TERMS, first.transmission, first.min_speed)
    model = TorqueModel(chain, drives)
    base = base_parameters(model)
    parts = [gain_equations(model, base, log) for log in logs]
    stacked = GainEquations(
        *(
            np.concatenate([getattr(p, f) for p in parts])
            for f in ("efforts", "X", "payload", "fit")
        )
    )
    R = first.transmission
    if R is None or np.count_nonzero(R - np.diag(np.diag(R))) == 0:
        return _identify(model, base, stacked, None, weighted, max_iterations)
    fits = [_identify(model, base, stacked, T, weighted, max_iterations) for T in (None, R.T)]
    return min(fits, key=lambda fit: float(np.sum(np.log(fit.sigma))))


def _identify(model, base, equations: GainEquations, T, weighted, max_iterations) -> DriveGainFit:
    """:func:`identify_drive_gains` with the gains on the joints' efforts (``T`` None) or on
    the motors' behind the torque matrix ``T`` (joint from motor)."""
    n = model.chain.n
    T = np.eye(n) if T is None else np.asarray(T, dtype=float)
    T_inv = np.linalg.inv(T)
    use = equations.fit
    sample, joint = np.nonzero(use)
    E_all, X_all, P_all = equations.efforts, equations.X, equations.payload
    E, X, P = E_all[use], X_all[use], P_all[use]
    motor = E_all @ T_inv.T  # (M, n) motor efforts m = T^-1 e
    A = np.concatenate([T[joint] * motor[sample], -X], axis=1)  # k_i T_ji m_i - X_j beta = P_j
    names = (*(f"k{j + 1}" for j in range(n)), *base.names)
    scale = np.linalg.norm(A, axis=0)
    gram = _gram(A / np.where(scale > 0, scale, 1.0), np.ones(E.size))
    w, V = np.linalg.eigh(gram)  # a factor with A's singular values and right singular vectors:
    factor = np.sqrt(np.clip(w, 0.0, None))[:, None] * V.T
    check_determined(factor, E.size, scale, BaseParameters(base.independent, base.matrix, names))
    z = _weighted_lstsq(A, P, np.ones(E.size))  # the linear solution, ordinary least squares
    gain, beta = z[:n], z[n:]
    model_of = _OutputError(E, X_all, P_all, T, T_inv, sample, joint)
    weights = np.ones(E.size)
    if weighted:  # Gautier: 1 / sigma_j, of the efforts' residuals
        _, residual = model_of(gain, beta)
        residual2 = np.bincount(joint, residual**2, minlength=n)
        sigma = joint_sigma(residual2, np.bincount(joint, minlength=n), z.size)
        weights = 1.0 / sigma[joint]
    for _ in range(max_iterations):  # Gauss-Newton on e = T diag(1 / k) T^-1 (X beta + P)
        J, residual = model_of(gain, beta)
        step = _weighted_lstsq(J, residual, weights)
        gain = 1.0 / (1.0 / gain + step[:n])
        beta = beta + step[n:]
        if np.linalg.norm(step[:n] * gain) + np.linalg.norm(step[n:]) <= 1e-10 * (
            1.0 + np.linalg.norm(beta)
        ):
            break
    J, residual = model_of(gain, beta)
    scale = np.linalg.norm(J, axis=0)
    information = _gram(J / scale, weights)
    eigenvalues = np.linalg.eigvalsh(information)  # ascending: singular values of Jw squared
    s2 = float(np.sum((residual * weights) ** 2)) / max(E.size - z.size, 1)
    D = np.ones(z.size)
    D[:n] = -(gain**2)  # d k / d g
    covariance = s2 * np.linalg.inv(information) * np.outer(D / scale, D / scale)
    K = T @ np.diag(gain) @ T_inv  # joint torques from logged efforts
    torque_error = (E_all @ K.T)[use] - (X @ beta + P)  # equation error, N m (N)
    counts = np.maximum(np.bincount(joint, minlength=n), 1)
    sigma = np.sqrt(np.bincount(joint, torque_error**2, minlength=n) / counts)
    condition = float(np.sqrt(eigenvalues[-1] / eigenvalues[0]))
    matrix = None if np.array_equal(T, np.eye(n)) else T
    return DriveGainFit(model, base, gain, beta, covariance, sigma, condition, E.size, matrix)


@dataclass(frozen=True)
class _OutputError:
    """The logged efforts' model ``e = T diag(g) T^-1 (X beta + P)`` at the fitted rows
    (``sample``, ``joint``): called with (k, beta), its Jacobian (m, n + r) in (g = 1 / k, beta)
    and the residuals (m,), measured minus modelled."""

    E: Array  # (m,) fitted rows' efforts
    X: Array  # (M, n, r) every sample's regressor
    P: Array  # (M, n)
    T: Array
    T_inv: Array
    sample: np.ndarray
    joint: np.ndarray

    def __call__(self, gain: Array, beta: Array) -> tuple[Array, Array]:
        torque = (self.X @ beta + self.P)[self.sample]  # (m, n): each row's sample
        Tj = self.T[self.joint]  # (m, n): row j of T
        J_gain = Tj * (torque @ self.T_inv.T)  # d e / d g_i = T_ji (T^-1 tau)_i
        mixing = (Tj / gain) @ self.T_inv  # (m, n): row j of T diag(g) T^-1
        J_beta = np.zeros((self.sample.size, self.X.shape[2]))
        for i in np.flatnonzero(np.any(mixing != 0.0, axis=0)):  # joints, not samples
            J_beta += mixing[:, i, None] * self.X[self.sample, i]
        predicted = np.einsum("mi,mi->m", mixing, torque)
        return np.concatenate([J_gain, J_beta], axis=1), self.E - predicted


def _weighted_lstsq(A: Array, y: Array, weights: Array) -> Array:
    """Least squares of ``A z = y`` with row weights, by the normal equations of the columns
    scaled to unit norm (``check_determined`` has refused a rank-deficient A)."""
    scale = np.linalg.norm(A, axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    As = A / scale
    return np.linalg.solve(_gram(As, weights), As.T @ (y * weights**2)) / scale


def _gram(A: Array, weights: Array) -> Array:
    """``A_w^T A_w`` of the rows of A weighted by ``weights``."""
    Aw = A * weights[:, None]
    return Aw.T @ Aw


def with_payload(log: Log, start: int, payload: tuple[int, Array]) -> tuple[Log, Log]:
    """One log split at sample ``start`` where ``payload`` (link, phi in its joint frame) was
    attached: (the robot alone, the robot with the payload), for :func:`identify_drive_gains`."""
    if not 0 < start < len(log):
        raise WorkbenchError(f"{log.source}: the payload sample {start} is not inside the log")
    rows = np.arange(len(log))
    return (
        replace(log.subset(rows < start), payload=None),
        replace(log.subset(rows >= start), payload=payload),
    )
