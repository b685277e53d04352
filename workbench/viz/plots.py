"""The project's figures: joint trajectories, torques, power and energy, design, residuals.

Every function draws on its own :class:`matplotlib.figure.Figure` (no pyplot,
so no global state), writes one PNG atomically (a reader never sees a half
written file) and returns its path. Figures are ``FIGSIZE`` inches at ``DPI``
dots per inch: every PNG is exactly 1000 x 700 pixels (width x height).

Conventions: time ``t`` in seconds, shape (K,); per-sample arrays are
(K, n) with one column per joint or motor, in the order of ``names``;
angles in rad, torques in N m, power in W, energy in J.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from numpy.typing import ArrayLike, NDArray

from workbench.errors import WorkbenchError
from workbench.io import atomic_write

FIGSIZE = (10.0, 7.0)  # inches
DPI = 100  # -> 1000 x 700 px
# joint grids: figure fractions left, right, bottom, top (room for the super labels and
# title and for five-digit tick labels), and the gap between rows (inches)
GRID_MARGINS = (0.085, 0.985, 0.075, 0.915)
GRID_GAP = 0.42

Array = NDArray[np.float64]


def plot_joint_trajectories(
    path: str | os.PathLike,
    t: ArrayLike,
    q: ArrayLike,
    names: Sequence[str],
    *,
    title: str = "Joint angles",
    ylabel: str = "rad",
    limits: tuple[ArrayLike, ArrayLike] | None = None,
) -> Path:
    """One line per joint of q (K, n) against t (K,); limits (lower, upper) dashed."""
    t, q = _time_series(t, q, "q", names)
    fig, ax = _figure(title)
    lines = ax.plot(t, q)
    for line, name in zip(lines, names, strict=True):
        line.set_label(name)
    if limits is not None:
        lower = _row(limits[0], q.shape[1], "lower limits")
        upper = _row(limits[1], q.shape[1], "upper limits")
        for line, lo, hi in zip(lines, lower, upper, strict=True):
            for bound in (lo, hi):
                if np.isfinite(bound):
                    ax.axhline(bound, color=line.get_color(), linestyle="--", linewidth=0.8)
    _finish(ax, "time [s]", ylabel)
    return _save(fig, path)


def plot_torques(
    path: str | os.PathLike,
    t: ArrayLike,
    tau: ArrayLike,
    names: Sequence[str],
    *,
    limits: ArrayLike | None = None,
) -> Path:
    """Motor torques tau (K, m) against t; symmetric effort limits (m,) as dashed +-lines."""
    limits_pair = None
    if limits is not None:
        effort = np.abs(_row(limits, len(names), "effort limits"))
        limits_pair = (-effort, effort)
    return plot_joint_trajectories(
        path, t, tau, names, title="Motor torques", ylabel="N m", limits=limits_pair
    )


def plot_power_energy(path: str | os.PathLike, t: ArrayLike, tau: ArrayLike, dq: ArrayLike) -> Path:
    """Mechanical power tau * dq per motor and in total (top) and cumulative energies (bottom).

    tau and dq are (K, m), motor torques and the same motors' velocities. The
    bottom plot shows the trapezoid integrals of sum |tau * dq| (J, left axis)
    and of sum tau^2 (N^2 m^2 s, right axis, the usual effort cost).
    """
    t, tau = _time_series(t, tau, "tau")
    _, dq = _time_series(t, dq, "dq")
    if dq.shape != tau.shape:
        raise WorkbenchError(f"dq has shape {dq.shape}; expected the shape of tau {tau.shape}")
    power = tau * dq
    fig = Figure(figsize=FIGSIZE, layout="constrained")
    top, bottom = fig.subplots(2, 1, sharex=True)
    for j in range(power.shape[1]):
        top.plot(t, power[:, j], label=f"motor {j + 1}")
    top.plot(t, power.sum(axis=1), color="black", label="total")
    top.set_title("Mechanical power")
    _finish(top, None, "W")
    energy = _cumulative_trapezoid(t, np.abs(power).sum(axis=1))
    effort = _cumulative_trapezoid(t, (tau**2).sum(axis=1))
    bottom.plot(t, energy, color="C0", label="|power| energy")
    bottom.set_ylabel("J", color="C0")
    bottom.set_xlabel("time [s]")
    bottom.grid(True, alpha=0.3)
    right = bottom.twinx()
    right.plot(t, effort, color="C3", label="integral of tau^2")
    right.set_ylabel("N² m² s", color="C3")
    bottom.legend(
        bottom.get_lines() + right.get_lines(),
        [line.get_label() for line in bottom.get_lines() + right.get_lines()],
        loc="upper left",
    )
    bottom.set_title("Cumulative energy")
    return _save(fig, path)


def plot_design(
    path: str | os.PathLike, names: Sequence[str], before: ArrayLike, after: ArrayLike
) -> Path:
    """Grouped bars of the design variables (n,) before and after the optimisation."""
    before = _row(before, len(names), "design before", finite=True)
    after = _row(after, len(names), "design after", finite=True)
    fig, ax = _figure("Design variables")
    _grouped_bars(ax, names, {"before": before, "after": after})
    _finish(ax, None, "value")
    return _save(fig, path)


def plot_residuals(
    path: str | os.PathLike,
    before: ArrayLike,
    after: ArrayLike,
    labels: Sequence[str],
    *,
    unit: str = "",
) -> Path:
    """Residuals (N, m) before and after calibration: RMS per channel (top), histograms (bottom).

    NaN entries are channels without a value in that sample (a marker not seen, a fixture
    that does not hold it) and are left out."""
    before = _matrix(before, "residuals before", len(labels), missing=True)
    after = _matrix(after, "residuals after", len(labels), missing=True)
    suffix = f" [{unit}]" if unit else ""
    fig = Figure(figsize=FIGSIZE, layout="constrained")
    top, bottom = fig.subplots(2, 1)
    rms = {
        name: np.sqrt(np.nansum(r**2, axis=0) / _counts(r))
        for name, r in (("before", before), ("after", after))
    }
    _grouped_bars(top, labels, rms)
    if all(np.all(v > 0) for v in rms.values()):
        top.set_yscale("log")  # after calibration the bars are often orders smaller
    top.set_title("Held-out residual RMS per channel")
    _finish(top, None, "RMS" + suffix)
    before, after = before[np.isfinite(before)], after[np.isfinite(after)]
    values = np.concatenate([before, after])
    bins = np.linspace(values.min(), values.max(), 51) if np.ptp(values) > 0 else 10
    bottom.hist(before, bins=bins, alpha=0.6, label="before")
    bottom.hist(after, bins=bins, alpha=0.6, label="after")
    bottom.set_title("Residual distribution (all channels)")
    _finish(bottom, "residual" + suffix, "count")
    return _save(fig, path)


def plot_heldout_torques(
    path: str | os.PathLike,
    t: ArrayLike,
    measured: ArrayLike,
    calibrated: ArrayLike,
    nominal: ArrayLike,
    names: Sequence[str],
    ylabel: str = "torque [N m]",
) -> Path:
    """Measured, calibrated and nominal torques (K, n) per joint against t (K,): one panel each.

    Held-out samples from several folds are plotted in time order; gaps
    between folds show as straight segments.
    """
    t, measured = _time_series(t, measured, "measured torques", names)
    calibrated = _matrix(calibrated, "calibrated torques", len(names))
    nominal = _matrix(nominal, "nominal torques", len(names))
    fig, axes = joint_grid(len(names))
    for j, ax in enumerate(axes):
        ax.plot(t, measured[:, j], color="0.3", linewidth=0.8, label="measured")
        ax.plot(t, nominal[:, j], linewidth=0.8, linestyle="--", label="nominal")
        ax.plot(t, calibrated[:, j], linewidth=1.0, label="calibrated")
        ax.set_title(names[j], fontsize="small")
        ax.grid(True, alpha=0.3)
        if j == 0:
            ax.legend(loc="best", fontsize="x-small")
    fig.supxlabel("time [s]")
    fig.supylabel(ylabel)
    fig.suptitle("Held-out torques")
    return _save(fig, path)


# ---------------------------------------------------------------- helpers
def joint_grid(n: int) -> tuple[Figure, list[Axes]]:
    """A figure with one panel per joint (two columns, shared time axis): the n used axes.

    Fixed margins, not matplotlib's constrained layout: it measured every tick label of
    every panel twice per figure (0.4 s of a six-panel figure's 0.9 s); the gap
    between rows is GRID_GAP inches whatever their number, room for a panel's title
    above the tick labels of the panel over it, and the y tick labels have at most four
    digits (larger and smaller values get a power of ten above the panel) to fit the
    left margin."""
    cols = 2 if n > 1 else 1
    rows = -(-n // cols)
    fig = Figure(figsize=FIGSIZE)
    left, right, bottom, top = GRID_MARGINS
    height = (top - bottom) * FIGSIZE[1]  # inches for the rows and the gaps between them
    panel = (height - (rows - 1) * GRID_GAP) / rows
    fig.subplots_adjust(left=left, right=right, bottom=bottom, top=top,
                        hspace=GRID_GAP / panel, wspace=0.18)  # fmt: skip
    axes = np.atleast_1d(fig.subplots(rows, cols, sharex=True, squeeze=False)).ravel()
    for ax in axes:  # tick labels of at most four digits (a power of ten above the panel)
        ax.ticklabel_format(axis="y", style="sci", scilimits=(-3, 4))
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, list(axes[:n])


def _figure(title: str) -> tuple[Figure, Axes]:
    fig = Figure(figsize=FIGSIZE, layout="constrained")
    ax = fig.subplots()
    ax.set_title(title)
    return fig, ax


def _finish(ax: Axes, xlabel: str | None, ylabel: str) -> None:
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")


def _save(fig: Figure, path: str | os.PathLike) -> Path:
    return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=DPI))


def _grouped_bars(ax: Axes, names: Sequence[str], groups: dict[str, Array]) -> None:
    x = np.arange(len(names))
    width = 0.8 / len(groups)
    for k, (label, values) in enumerate(groups.items()):
        ax.bar(x + (k - (len(groups) - 1) / 2) * width, values, width, label=label)
    ax.set_xticks(x, names, rotation=30 if len(names) > 8 else 0, ha="right")


def _cumulative_trapezoid(t: Array, y: Array) -> Array:
    return np.concatenate([[0.0], np.cumsum(0.5 * (y[1:] + y[:-1]) * np.diff(t))])


def _time_series(
    t: ArrayLike, x: ArrayLike, what: str, names: Sequence[str] | None = None
) -> tuple[Array, Array]:
    t = np.asarray(t, dtype=float)
    if t.ndim != 1 or not np.isfinite(t).all():
        raise WorkbenchError(f"time t must be a finite (K,) array; got shape {t.shape}")
    x = _matrix(x, what, len(names) if names is not None else None)
    if x.shape[0] != t.shape[0]:
        raise WorkbenchError(f"{what} has {x.shape[0]} samples but t has {t.shape[0]}")
    return t, x


def _counts(x: Array) -> Array:
    """Finite entries per column, NaN for a column without any (it gets no bar)."""
    counts = np.isfinite(x).sum(axis=0).astype(float)
    counts[counts == 0] = np.nan
    return counts


def _matrix(x: ArrayLike, what: str, width: int | None, missing: bool = False) -> Array:
    """x as an (N, width) float array of finite values (``missing``: NaN allowed)."""
    x = np.asarray(x, dtype=float)
    if x.ndim != 2 or (width is not None and x.shape[1] != width):
        expected = f"(N, {width})" if width is not None else "(N, m)"
        raise WorkbenchError(f"{what} has shape {x.shape}; expected {expected}")
    if missing and not np.isinf(x).any() and np.isfinite(x).any():
        return x
    if not np.isfinite(x).all():
        sample, column = np.argwhere(~np.isfinite(x))[0]
        raise WorkbenchError(
            f"{what} contains {x[sample, column]} at sample {sample}, column {column}"
        )
    return x


def _row(x: ArrayLike, width: int, what: str, *, finite: bool = False) -> Array:
    """x as a (width,) float array; limits may be infinite, other values must be finite."""
    x = np.asarray(x, dtype=float)
    if x.shape != (width,):
        raise WorkbenchError(f"{what} has shape {x.shape}; expected ({width},)")
    if np.isnan(x).any() or (finite and not np.isfinite(x).all()):
        raise WorkbenchError(f"{what} contains NaN or inf: {x}")
    return x
