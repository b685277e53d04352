"""Outer searches of the drive terms' shapes: Stribeck speeds, sensor delay, load torques.

The torque model is linear in every drive parameter once three kinds of
shape are fixed (:mod:`workbench.identification.drives`): the Stribeck speeds
``vs_j`` [rad/s] of the ``stribeck`` term, the delay ``d`` [s] of the
``sensor_delay`` term (:mod:`workbench.calibration.fitting.sensor_delay`) and the
load torques of the ``load_friction`` term. They are fitted on the
*training* rows only (so that held-out folds judge them like
every other parameter) by minimising the criterion of the linear fit:

    S(vs, d) = sum_rows w_j^2 (X(vs) theta - tau(d))^2,   theta by least squares,

with Gautier's per-joint weights ``w_j = 1 / sigma_j`` from the ordinary
least-squares fit at the starting shapes, held fixed during the search (the
linear parameters are then fitted by :func:`workbench.calibration.fitting.dynamic.fit_equations`
as usual, robust losses and physical consistency included). The searches:

* ``d``: a grid of :data:`DELAY_GRID` points over ``[-D, D]``, ``D`` five
  sample periods of the torque equations
  (:func:`~workbench.calibration.fitting.sensor_delay.delay_bound`),
  then golden-section search between the best point's neighbours;
* ``vs_j``: per joint on a log scale, a grid of :data:`STRIBECK_GRID` speeds
  from ``max(2 min_speed_j, 0.005 v_j)`` to ``0.5 v_j`` (``v_j`` the 99th
  percentile of the joint's logged speed), then golden section in
  ``log vs`` between the best point's neighbours; the joints in turn
  (coordinate descent), :data:`SWEEPS` sweeps;
* load torques first, by alternation (:data:`LOAD_PASSES` times, at the
  starting ``vs`` and ``d = 0``): the weighted least-squares fit of every
  linear parameter with the current load columns (first: the nominal
  model's rigid-body torques), completed to standard parameters from the
  nominal (``x = x0 + B^+ (beta - B x0)``), gives the rigid-body torques
  ``tau_load`` of the next columns ``|tau_load_j| s(dq_j)``;
* then ``d``, the sweeps of ``vs``, ``d`` again.

Each trial shape changes only its own columns of the equations (one
decimated column per joint for ``vs_j``, the decimated torques for ``d``),
so a trial costs one projection on a fixed QR factor.

Standard deviations: from the profile curvature of S at the optimum (the
linear parameters re-fitted at each trial), ``var = 2 s^2 / S''`` with
``s^2 = S / (m - r)`` the weighted residual variance (``m`` rows, ``r``
linear parameters); for ``vs`` in ``log vs`` and reported as
``vs * std(log vs)``. The linear parameters' standard deviations are
conditional on the shapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from workbench import inertia
from workbench.calibration.fitting.sensor_delay import FractionalDelay, delay_bound
from workbench.dynamics.inverse_dynamics import inverse_dynamics
from workbench.errors import WorkbenchError
from workbench.identification.drives import STRIBECK_EXPONENT, Drives, stribeck_shape
from workbench.identification.least_squares import DynamicFit, joint_sigma
from workbench.identification.term_names import FURTHER_TERMS
from workbench.identification.torque_model import BaseParameters, TorqueModel
from workbench.lie import Array
from workbench.recordings import signals
from workbench.recordings.log import Log

SHAPED = ("stribeck", "sensor_delay", "load_friction")  # terms fitted by outer searches
DELAY_GRID = 21
STRIBECK_GRID = 16
SWEEPS = 2
GOLDEN_ITERATIONS = {"delay": 20, "stribeck": 14}  # brackets shrink by 0.618 per iteration
LOAD_PASSES = 2
_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def has_shapes(drives: Drives) -> bool:
    """Whether ``drives`` has a term whose shape an outer search fits."""
    return any(t in drives.terms for t in SHAPED)


def refuse_further(drives: Drives, where: str, why: str) -> None:
    """Refuse the further drive terms (Stribeck, load, temperature, delay) where they are not
    fitted: ``where`` names the log or kind, ``why`` says what takes the classic terms only."""
    further = [t for t in drives.terms if t in FURTHER_TERMS]
    if further:
        raise WorkbenchError(
            f"{where}: the torque-model term(s) {', '.join(further)} are fitted by the dynamic "
            f"identification of a log in memory only; {why} takes the classic terms"
        )


def shape_note(shapes: Shapes | None) -> str:
    """The shapes' standard deviations as a sentence for the drive file ('' for None)."""
    parts = []
    if shapes is None:
        return ""
    if shapes.stribeck_std is not None:
        stds = ", ".join("n/a" if not np.isfinite(s) else f"{s:.3g}" for s in shapes.stribeck_std)
        parts.append(f"Stribeck speed std [{stds}] rad/s")
    if shapes.delayed:
        std = "n/a" if shapes.delay_std is None else f"{1e3 * shapes.delay_std:.3g}"
        parts.append(f"delay std {std} ms")
    return "\n" + "; ".join(parts) + " (profile curvature, drive_shapes)." if parts else ""


@dataclass(frozen=True)
class Shapes:
    """Fitted shapes and their standard deviations (module docstring)."""

    stribeck_speed: Array | None  # (n,) rad/s
    stribeck_std: Array | None  # (n,) rad/s
    delay: float  # s
    delay_std: float | None  # s
    delayed: bool  # whether the delay was searched (the sensor_delay term)
    load: Array | None = None  # (M, n) decimated load-friction columns (None: nominal load)


class ShapeSearch:
    """The outer searches on one torque model's equations of ``log`` (module docstring)."""

    def __init__(
        self,
        model: TorqueModel,
        base: BaseParameters,
        log: Log,
        equations: Any,
        payload: Array,
        x0: Array,
    ) -> None:
        """``equations``: the :class:`~workbench.calibration.fitting.dynamic.TorqueEquations` of
        ``log`` with the model's starting shapes (the nominal load torques); ``payload``
        (N, n) the torques of the log's known payload; ``x0`` the nominal standard
        parameters (the completion's start)."""
        self.model, self.base, self.log, self.equations = model, base, log, equations
        drives = model.drives
        self.n = model.chain.n
        self.stribeck = "stribeck" in drives.terms
        self.delayed = "sensor_delay" in drives.terms
        self.loaded = "load_friction" in drives.terms
        self.bound = delay_bound(log)
        self.x0 = x0
        self._payload = payload
        self._tau: dict[float, Array] = {}
        self._shift = FractionalDelay(log) if self.delayed else None
        self._column: dict[tuple[int, float], Array] = {}
        self.shapes: dict[bytes, Shapes] = {}
        self.sign = drives.smooth_sign(log.dq)
        if self.stribeck:  # an excluded torque channel's joint has no fst column (-1)
            self.position = self._positions("fst", required=log.torque_channels())
            speed = np.percentile(np.abs(log.dq), 99.0, axis=0)
            floor = 0.0 if log.min_speed is None else 2.0 * log.min_speed
            low = np.maximum(np.maximum(floor, 0.005 * speed), 1e-6)  # a joint at rest too
            high = np.maximum(0.5 * speed, 2.0 * low)
            self.grid = np.geomspace(low, high, STRIBECK_GRID, axis=1)  # (n, G)
        if self.loaded:  # a joint the nominal model loads with nothing has no fl column
            self.load_position = self._positions("fl", required=False)
            self.completion = np.linalg.pinv(base.matrix)

    def _positions(self, prefix: str, required: Array | bool) -> Array:
        """Per joint, the base column of its parameter ``prefix<j>`` (-1 where not kept);
        ``required`` (n,) bool or one for all: the joints where its absence is an error."""
        names, position = self.model.names, []
        required = np.broadcast_to(required, (self.n,))
        for j in range(self.n):
            found = np.flatnonzero(self.base.independent == names.index(f"{prefix}{j + 1}"))
            if found.size == 0 and required[j]:
                raise WorkbenchError(
                    f"the parameter {prefix}{j + 1} is not identifiable here (its column is a "
                    "combination of others)"
                )
            position.append(int(found[0]) if found.size else -1)
        return np.array(position)

    # ------------------------------------------------------------- equations
    def _decimated(self, values: Array) -> Array:
        log = self.log
        Z, _ = signals.decimate_segments(
            lambda a, b: values[a:b], log.spans(), log.decimation, log.border
        )
        return Z

    def tau(self, delay: float) -> Array:
        """The decimated torques (M, n) measured ``delay`` later."""
        if delay not in self._tau:
            shifted = self.log.tau if delay == 0.0 else self._shift(delay)
            self._tau[delay] = self._decimated(shifted - self._payload)
        return self._tau[delay]

    def column(self, j: int, speeds: Array) -> Array:
        """Joint j's decimated Stribeck columns (M, k) for the speeds (k,)."""
        missing = [v for v in speeds if (j, float(v)) not in self._column]
        if missing:
            dq = self.log.dq[:, j : j + 1]
            values = stribeck_shape(dq, np.array(missing)) * self.sign[:, j : j + 1]
            for v, z in zip(missing, self._decimated(values).T, strict=True):
                self._column[(j, float(v))] = z
        return np.stack([self._column[(j, float(v))] for v in speeds], axis=1)

    def load_columns(self, beta: Array) -> Array:
        """The decimated load-friction columns (M, n), ``|tau_load| s(dq)``, with the rigid-body
        torques of the model whose base parameters are ``beta`` (completed from the nominal)."""
        x = self.x0 + self.completion @ (beta - self.base.matrix @ self.x0)
        phi, _ = self.model.split(x)
        chain = replace(self.model.chain, inertias=inertia.matrix_from_phi(phi))
        log = self.log
        load = inverse_dynamics(chain, log.q, log.dq, log.ddq) + self._payload
        return self._decimated(np.abs(load) * self.sign)

    def X(self, speeds: Array | None, load: Array | None = None) -> Array:
        """The base regressor (M, n, r) with the Stribeck columns of ``speeds`` and the
        load-friction columns ``load`` (None: as built)."""
        if speeds is None and load is None:
            return self.equations.X
        X = self.equations.X.copy()
        if speeds is not None:
            for j in np.flatnonzero(self.position >= 0):
                X[:, :, self.position[j]] = 0.0
                X[:, j, self.position[j]] = self.column(j, speeds[j : j + 1])[:, 0]
        if load is not None:
            for j in np.flatnonzero(self.load_position >= 0):
                X[:, :, self.load_position[j]] = 0.0
                X[:, j, self.load_position[j]] = load[:, j]
        return X

    def equations_of(self, shapes: Shapes) -> Any:
        """The torque equations with the ``shapes``."""
        tau = self.tau(shapes.delay) if self.delayed else self.equations.tau
        return replace(self.equations, X=self.X(shapes.stribeck_speed, shapes.load), tau=tau)

    # ---------------------------------------------------------------- search
    def search(self, rows: np.ndarray | None) -> Shapes:
        """The shapes minimising the training criterion on ``rows`` (None: all)."""
        rows = np.arange(len(self.equations)) if rows is None else np.asarray(rows)
        key = rows.tobytes()
        if key in self.shapes:
            return self.shapes[key]
        sample, joint = np.nonzero(self.equations.fit[rows])
        taken = rows[sample]
        speeds = np.sqrt(self.grid[:, 0] * self.grid[:, -1]) if self.stribeck else None
        delay, load = 0.0, None

        def stacked(X: Array) -> Array:
            return X[taken, joint]

        X0, y0 = stacked(self.X(speeds)), self.tau(0.0)[taken, joint]
        r = X0.shape[1]
        theta = np.linalg.lstsq(X0, y0, rcond=None)[0]
        residual2 = np.bincount(joint, (X0 @ theta - y0) ** 2, minlength=self.n)
        w = 1.0 / joint_sigma(residual2, np.bincount(joint, minlength=self.n), r)[joint]

        def basis(A: Array) -> Array:
            A = A * w[:, None]
            norms = np.linalg.norm(A, axis=0)
            return np.linalg.qr(A / np.where(norms > 0, norms, 1.0))[0]

        def residual(Q: Array, y: Array) -> Array:
            return y - Q @ (Q.T @ y)

        def delay_criterion(Q: Array) -> Callable[[float], float]:
            def f(d: float) -> float:
                e = residual(Q, self.tau(d)[taken, joint] * w)
                return float(e @ e)

            return f

        def stribeck_criterion(j: int) -> Callable[[float], float]:
            others = np.delete(np.arange(r), self.position[j])
            Q = basis(stacked(self.X(speeds, load))[:, others])
            yp = residual(Q, self.tau(delay)[taken, joint] * w)
            mine = joint == j

            def f(log_v: float) -> float:
                c = np.zeros(len(joint))
                c[mine] = self.column(j, np.array([math.exp(log_v)]))[taken[mine], 0]
                cp = residual(Q, c * w)
                cc = float(cp @ cp)
                return float(yp @ yp) - (float(cp @ yp) ** 2 / cc if cc > 0 else 0.0)

            return f

        def delay_step() -> float:
            nonlocal delay
            f = delay_criterion(basis(stacked(self.X(speeds, load))))
            grid = np.linspace(-self.bound, self.bound, DELAY_GRID)
            delay, value = _minimize(f, grid, GOLDEN_ITERATIONS["delay"])
            return value

        def shape_steps() -> float:
            nonlocal speeds
            best = delay_step() if self.delayed else math.inf
            if self.stribeck:
                for _ in range(SWEEPS):
                    for j in np.flatnonzero(self.position >= 0):
                        f = stribeck_criterion(j)
                        log_v, best = _minimize(
                            f, np.log(self.grid[j]), GOLDEN_ITERATIONS["stribeck"]
                        )
                        speeds = speeds.copy()
                        speeds[j] = math.exp(log_v)
                if self.delayed:
                    best = delay_step()
            return best

        if self.loaded:  # alternate: the load of the model fitted with the previous load
            for _ in range(LOAD_PASSES):
                A, y = stacked(self.X(speeds, load)) * w[:, None], self.tau(delay)[taken, joint]
                load = self.load_columns(np.linalg.lstsq(A, y * w, rcond=None)[0])
        best = shape_steps() if self.stribeck or self.delayed else math.inf
        s2 = best / max(len(joint) - r, 1)
        stribeck_std = delay_std = None
        if self.stribeck:
            stribeck_std = np.full(self.n, np.nan)  # nan: no fst column (an excluded channel)
            for j in np.flatnonzero(self.position >= 0):
                step = 0.05 * math.log(self.grid[j, 1] / self.grid[j, 0])
                std = _profile_std(stribeck_criterion(j), math.log(speeds[j]), step, s2)
                stribeck_std[j] = np.nan if std is None else speeds[j] * std
        if self.delayed:
            f = delay_criterion(basis(stacked(self.X(speeds, load))))
            delay_std = _profile_std(f, delay, 0.05 * self.bound / DELAY_GRID, s2)
        shapes = Shapes(speeds, stribeck_std, float(delay), delay_std, self.delayed, load)
        self.shapes[key] = shapes
        return shapes

    def drives(self, shapes: Shapes) -> Drives:
        """The model's drives with the ``shapes``."""
        return replace(
            self.model.drives,
            stribeck_speed=shapes.stribeck_speed,
            delay=shapes.delay,
        )


def _minimize(f: Callable[[float], float], grid: Array, iterations: int) -> tuple[float, float]:
    """The minimum of f over the grid, refined by golden section between the best point's
    neighbours."""
    values = [f(float(x)) for x in grid]
    k = int(np.argmin(values))
    a, b = float(grid[max(k - 1, 0)]), float(grid[min(k + 1, len(grid) - 1)])
    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    fc, fd = f(c), f(d)
    for _ in range(iterations):
        if fc < fd:
            b, d, fd = d, c, fc
            c = b - _GOLDEN * (b - a)
            fc = f(c)
        else:
            a, c, fc = c, d, fd
            d = a + _GOLDEN * (b - a)
            fd = f(d)
    x, value = (c, fc) if fc < fd else (d, fd)
    if values[k] <= value:
        return float(grid[k]), float(values[k])
    return x, value


def _profile_std(f: Callable[[float], float], x: float, h: float, s2: float) -> float | None:
    """sqrt(2 s^2 / f''(x)) from central differences (None where f is not convex there)."""
    curvature = (f(x + h) - 2.0 * f(x) + f(x - h)) / h**2
    return math.sqrt(2.0 * s2 / curvature) if curvature > 0 else None


def shaped_fit(
    search: ShapeSearch,
    rows: np.ndarray | None,
    fit: Callable[[TorqueModel, Any], DynamicFit],
) -> tuple[DynamicFit, Shapes]:
    """Search the shapes on ``rows``, then ``fit(model, equations)`` with them."""
    shapes = search.search(rows)
    drives = search.drives(shapes)
    return fit(TorqueModel(search.model.chain, drives), search.equations_of(shapes)), shapes


def shape_summary(
    shapes: Shapes | None, joints: tuple[str, ...], kept: Array | None = None
) -> dict[str, Any]:
    """``{"drive_shapes": ...}`` for summary.json (empty for None); ``kept`` (n,) bool: the
    joints whose torque channels entered (default all), the only ones given a Stribeck speed."""
    if shapes is None:
        return {}
    out: dict[str, Any] = {}
    if shapes.stribeck_speed is not None:
        kept = np.ones(len(joints), dtype=bool) if kept is None else kept
        given = [j for j, k in enumerate(kept) if k]
        out["stribeck"] = {
            "exponent": STRIBECK_EXPONENT,
            "speed_rad_s": {joints[j]: float(shapes.stribeck_speed[j]) for j in given},
            "speed_std_rad_s": {joints[j]: _number(shapes.stribeck_std[j]) for j in given},
        }
    if shapes.delayed:
        out["sensor_delay"] = {
            "delay_ms": 1e3 * shapes.delay,
            "delay_std_ms": None if shapes.delay_std is None else 1e3 * shapes.delay_std,
            "convention": "torques lag positions by delay_ms: tau_measured(t) = tau_model(t - d)",
        }
    if shapes.load is not None:
        out["load_friction"] = {
            "load": f"rigid-body torque of the model fitted on the same rows, {LOAD_PASSES} "
            "alternations from the nominal model's (fl |tau_load| s(dq))",
        }
    out["std_note"] = (
        "standard deviations of the shapes from the profile curvature of the weighted training "
        "criterion; the linear parameters' are conditional on the shapes"
    )
    return {"drive_shapes": out}


def shape_parameters(
    shapes: Shapes | None, kept: Array | None = None
) -> list[tuple[str, float, float]]:
    """Rows of parameters.csv for the shapes: ``vs<j>`` (rad/s, of the ``kept`` (n,) bool joints
    whose torque channels entered, default all) and ``delay_ms``, with their relative standard
    deviations in percent (inf when not defined); none for None."""
    rows = []
    if shapes is None:
        return rows
    if shapes.stribeck_speed is not None:
        pairs = zip(shapes.stribeck_speed, shapes.stribeck_std, strict=True)
        for j, (v, s) in enumerate(pairs):
            if kept is None or kept[j]:
                rows.append((f"vs{j + 1}", float(v), _percent(s, v)))
    if shapes.delayed:
        rows.append(("delay_ms", 1e3 * shapes.delay, _percent(shapes.delay_std, shapes.delay)))
    return rows


def _number(value: float | None) -> float | None:
    return None if value is None or not np.isfinite(value) else float(value)


def _percent(std: float | None, value: float) -> float:
    if std is None or value == 0:
        return math.inf
    return float(100.0 * std / abs(value))
