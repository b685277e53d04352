"""Identification of inertial and drive parameters from joint torques.

Model: ``tau = W(q, dq, ddq) x`` in standard parameters with the chosen drive
terms (:mod:`workbench.identification.torque_model`), reduced to base
parameters ``beta`` so that ``tau = W_base beta`` has a unique solution.

Equations (:func:`torque_equations`): the base regressor and the torques at
every logged sample; with a log description, both go through the same
anti-aliasing filter before decimation ("parallel decimation", Gautier), the
filters' borders are dropped, joint rows slower than the log's
``min_speed`` stay out of the fit (not out of validation), the rows of joints
whose torque channel the log excludes (``[torques] exclude``) out of both, and the torques of
a known payload (the log's ``payload``) are taken off the measured ones.

Fit (:func:`fit_equations`): weighted least squares with one weight per
joint, ``1 / sigma_j``, where ``sigma_j^2 = |r_j|^2 / (m_j - b)`` comes from
an ordinary least-squares fit (Gautier's two-step WLS; ``m_j`` rows of joint
j, ``b`` base parameters); robust losses by IRLS on top. The covariance of
beta is ``s^2 (X_w^T X_w)^{-1}`` with ``s^2`` the weighted residual variance
(about 1), its relative standard deviations ``100 std / |beta|`` %.

Completion: the full standard parameters ``x`` behind beta. With
``physical=True`` (the default of :func:`calibrate_dynamic` and of ``workbench
calibrate``), the physically consistent model most likely under the estimate
and a prior toward the nominal pseudo-inertias in the directions the log does
not determine (:func:`workbench.identification.consistency.consistent_fit`);
without, the minimum-norm change of the nominal ``x0`` (the model's inertias
and nominal drive parameters): ``x = x0 + B^+ (beta - B x0)``, which
reproduces the identified torques exactly, consistent or not.

Logs too long for memory (a :class:`~workbench.recordings.chunked_logs.ChunkedLog`)
take the same steps on triangular factors accumulated chunk by chunk
(:mod:`workbench.calibration.fitting.normal_equations`): :func:`calibrate_dynamic` reads
them so and :func:`fit_equations` fits the accumulated equations.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from workbench.calibration.fitting.drive_shapes import (
    ShapeSearch,
    has_shapes,
    refuse_further,
    shaped_fit,
)
from workbench.calibration.fitting.normal_equations import (
    NormalEquations,
    accumulate,
    fit_normal_equations,
)
from workbench.calibration.fitting.sensor_delay import delayed_torques
from workbench.calibration.fitting.solver import irls_weights
from workbench.chain import Chain
from workbench.dynamics.inverse_dynamics import inverse_dynamics
from workbench.dynamics.regressor import regressor_columns
from workbench.errors import WorkbenchError
from workbench.identification.drives import DriveInputs, Drives
from workbench.identification.least_squares import (
    DynamicFit,
    check_determined,
    completed_fit,
    fit_factors,
    joint_factors,
    joint_sigma,
)
from workbench.identification.torque_model import BaseParameters, TorqueModel, base_parameters
from workbench.lie import Array
from workbench.recordings import signals
from workbench.recordings.chunked_logs import ChunkedLog
from workbench.recordings.log import Log


@dataclass(frozen=True)
class TorqueEquations:
    """Rows of ``tau = X beta``: sample times (M,), X (M, n, r), tau (M, n), fit mask (M, n)."""

    t: Array
    X: Array
    tau: Array
    fit: np.ndarray

    def __len__(self) -> int:
        return self.t.shape[0]


def torque_equations(model: TorqueModel, base: BaseParameters, log: Log) -> TorqueEquations:
    """The base regressor and torques of ``log`` after parallel decimation (module docstring);
    with the ``sensor_delay`` term the torques measured ``model.drives.delay`` later
    (:mod:`workbench.calibration.fitting.sensor_delay`)."""
    if log.tau is None:
        raise WorkbenchError(f"{log.source}: identification from torques needs joint torques")
    inputs = drive_inputs(model, log)
    measured = delayed_torques(log, model.drives.delay)

    def rows(start: int, stop: int) -> Array:
        s = slice(start, stop)
        X = model.columns(
            log.q[s], log.dq[s], log.ddq[s], select=base.independent, inputs=inputs.rows(s)
        )
        tau = measured[s] - payload_torques(model.chain, log, s)
        return np.concatenate([X, tau[:, :, None]], axis=2)

    Z, kept = signals.decimate_segments(rows, log.spans(), log.decimation, log.border)
    return TorqueEquations(log.t[kept], Z[:, :, :-1], Z[:, :, -1], fitted_rows(log, kept))


def fitted_rows(log: Log, kept: np.ndarray) -> np.ndarray:
    """Which joint rows (m, n) of the equations at samples ``kept`` are fitted: those of the
    joints whose torque channel is not excluded (:meth:`~workbench.recordings.log.Log.
    torque_channels`) and, with a ``min_speed``, at least as fast as it."""
    dq = log.dq[kept]
    fast = np.ones(dq.shape, dtype=bool) if log.min_speed is None else np.abs(dq) >= log.min_speed
    return fast & log.torque_channels()


def drive_inputs(model: TorqueModel, log: Log) -> DriveInputs:
    """What the model's drive terms read besides the motion, at every sample of ``log``:
    temperatures minus the log's mean per joint (``temperature``), and the rigid-body
    torques of the nominal model (``model.chain``) with the known payload
    (``load_friction``); :mod:`workbench.identification.drives`."""
    needed = model.drives.inputs_needed
    temperature = load = None
    if "temperature" in needed:
        if log.temperature is None:
            raise WorkbenchError(
                f"{log.source}: the torque-model term 'temperature' needs drive temperatures "
                "(a [temperature] section, or temperature / temperature_<joint> columns)"
            )
        temperature = log.temperature - np.mean(log.temperature, axis=0)
    if "load" in needed:
        everything = slice(0, len(log))
        load = inverse_dynamics(model.chain, log.q, log.dq, log.ddq)
        load = load + payload_torques(model.chain, log, everything)
    return DriveInputs(temperature, load)


def payload_torques(chain: Chain, log: Log, rows: slice) -> Array:
    """Joint torques (m, n) of the log's known payload at the samples ``rows`` (0 if none)."""
    if log.payload is None:
        return np.zeros_like(log.tau[rows])
    link, phi = log.payload
    Y = regressor_columns(
        chain, log.q[rows], log.dq[rows], log.ddq[rows], 10 * link + np.arange(10)
    )
    return Y @ phi


def _fitted_rows(
    equations: TorqueEquations, rows: np.ndarray | None
) -> tuple[Array, Array, np.ndarray]:
    """The equations ``rows`` (default all) fitted (``equations.fit``): X (m, r), tau (m,) and
    the joint (m,) of each."""
    rows = np.arange(len(equations)) if rows is None else np.asarray(rows)
    use = equations.fit[rows]
    return equations.X[rows][use], equations.tau[rows][use], np.nonzero(use)[1]


def equation_factors(
    equations: TorqueEquations, rows: np.ndarray | None = None
) -> tuple[Array, np.ndarray]:
    """Per joint the triangular factor (n, r + 1, r + 1) of ``[X_j tau_j]`` over the fitted
    equations ``rows`` (default all), and the rows (n,) of each joint."""
    X, y, joint = _fitted_rows(equations, rows)
    n = equations.tau.shape[1]
    return joint_factors(X, y, joint, n), np.bincount(joint, minlength=n)


def fit_equations(
    model: TorqueModel,
    base: BaseParameters,
    equations: TorqueEquations | NormalEquations,
    rows: np.ndarray | None = None,
    *,
    x0: Array | None = None,
    weighted: bool = True,
    loss: str = "linear",
    f_scale: float = 1.0,
    physical: bool = False,
    max_iterations: int = 30,
) -> DynamicFit:
    """Weighted least squares of beta on the samples ``rows`` (default all); module docstring.

    Accumulated equations (:class:`~workbench.calibration.fitting.normal_equations.NormalEquations`)
    are fitted on their validation blocks ``rows`` (default all), by least squares only.
    """
    if isinstance(equations, NormalEquations):  # accumulated from a large log
        return fit_normal_equations(
            model, base, equations, rows, x0=x0, weighted=weighted, loss=loss, physical=physical
        )
    if loss == "linear":  # one QR of the rows (least_squares module docstring)
        R, counts = equation_factors(equations, rows)
        return fit_factors(model, base, R, counts, x0=x0, weighted=weighted, physical=physical)
    X, y, joint = _fitted_rows(equations, rows)
    n, r = model.chain.n, X.shape[1]
    scale = np.linalg.norm(X, axis=0)
    check_determined(
        X / np.where(scale > 0, scale, 1.0), y.size, scale, base, model.chain.joint_names
    )
    Xs = X / scale
    weights = np.ones_like(y)
    if weighted:
        theta = np.linalg.lstsq(Xs, y, rcond=None)[0]
        residual2 = np.bincount(joint, (Xs @ theta - y) ** 2, minlength=n)
        weights = 1.0 / joint_sigma(residual2, np.bincount(joint, minlength=n), r)[joint]
    w, theta, iterations = np.ones_like(y), np.zeros(r), 0
    while iterations < max_iterations:
        iterations += 1
        sw = np.sqrt(w) * weights
        new = np.linalg.lstsq(Xs * sw[:, None], y * sw, rcond=None)[0]
        converged = np.linalg.norm(new - theta) <= 1e-12 * (1 + np.linalg.norm(new))
        theta = new
        w = irls_weights((Xs @ theta - y) * weights, loss, f_scale)
        if loss == "linear" or converged:
            break
    sw = np.sqrt(w) * weights
    Xw = Xs * sw[:, None]
    residual = (Xs @ theta - y) * sw
    s2 = float(residual @ residual) / max(y.size - r, 1)
    try:
        covariance = s2 * np.linalg.inv(Xw.T @ Xw) / np.outer(scale, scale)
    except np.linalg.LinAlgError:
        raise WorkbenchError(
            "the weighted torque equations are singular: a joint whose residuals dwarf the "
            "others' gets no weight; look for corrupted torque samples"
        ) from None
    singular = np.linalg.svd(Xw, compute_uv=False)
    sigma = np.sqrt(
        np.bincount(joint, (Xs @ theta - y) ** 2, minlength=n)
        / np.maximum(np.bincount(joint, minlength=n), 1)
    )
    return completed_fit(
        model, base, theta / scale, covariance, x0=x0, physical=physical, sigma=sigma,
        condition_number=float(singular[0] / singular[-1]), iterations=iterations,
        rows=int(y.size),
    )  # fmt: skip


def calibrate_dynamic(
    chain: Chain,
    log: Log | ChunkedLog,
    *,
    drives: Drives | None = None,
    drive_values: Array | None = None,
    loss: str = "linear",
    f_scale: float = 1.0,
    physical: bool = True,
    weighted: bool = True,
) -> DynamicFit:
    """Identify base parameters (and drive terms) of ``chain`` from all of ``log``.

    ``drives`` defaults to viscous and Coulomb friction; ``drive_values``
    are the nominal drive parameters (zero by default) that the completion
    starts from. A :class:`~workbench.recordings.chunked_logs.ChunkedLog` is
    read chunk by chunk into accumulated equations
    (:func:`workbench.calibration.fitting.normal_equations.accumulate`). Stribeck speeds and the
    sensor delay are fitted by the outer searches of
    :mod:`workbench.calibration.fitting.drive_shapes` (in-memory logs only).
    """
    drives = drives or Drives(chain.n)
    model = TorqueModel(chain, drives)
    base = base_parameters(model, channels=log.torque_channels())
    if isinstance(log, ChunkedLog):
        refuse_further(drives, log.source, "a log read chunk by chunk")
        equations = accumulate(model, base, log)
    else:
        equations = torque_equations(model, base, log)
    x0 = model.values(drive_values)

    def fit(model: TorqueModel, equations: TorqueEquations | NormalEquations) -> DynamicFit:
        return fit_equations(
            model, base, equations, x0=x0, weighted=weighted, loss=loss, f_scale=f_scale,
            physical=physical,
        )  # fmt: skip

    if not has_shapes(drives):
        return fit(model, equations)
    payload = payload_torques(chain, log, slice(0, len(log)))
    search = ShapeSearch(model, base, log, equations, payload, x0)
    result, shapes = shaped_fit(search, None, fit)
    return replace(result, shapes=shapes)
