"""Figures of an excitation design: trajectory against its limits, predicted precision, postures.

Conventions of :mod:`workbench.viz.plots`: each function draws its own
:class:`~matplotlib.figure.Figure`, writes one PNG atomically (1000 x 700
px) and returns its path; time t (K,) in s, per-sample arrays (K, n) in the
order of ``names``; angles in rad, torques in N m.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from numpy.typing import ArrayLike

from workbench.viz.plots import DPI, FIGSIZE, _save

QUANTITIES = (
    ("q", "position", "rad"),
    ("dq", "velocity", "rad/s"),
    ("ddq", "acceleration", "rad/s$^2$"),
    ("tau", "torque", "N m"),
)


def plot_limits(
    path: str | os.PathLike,
    t: ArrayLike,
    series: dict[str, ArrayLike],
    lower: dict[str, ArrayLike],
    upper: dict[str, ArrayLike],
    names: Sequence[str],
    *,
    title: str = "Excitation trajectory against its limits",
) -> Path:
    """Four panels (q, dq, ddq, tau), each joint as a fraction of its limit.

    ``series[key]`` (K, n) for key in q, dq, ddq, tau; ``lower``/``upper``
    (n,) the limits. Values are drawn as ``(x - c) / h`` with c, h the
    middle and half of [lower, upper], so every limit is at +-1 (dashed).
    """
    t = np.asarray(t, dtype=float)
    fig = Figure(figsize=FIGSIZE, layout="constrained")
    axes = fig.subplots(2, 2, sharex=True).ravel()
    for ax, (key, label, unit) in zip(axes, QUANTITIES, strict=True):
        if key not in series:
            ax.set_visible(False)
            continue
        x = np.asarray(series[key], dtype=float)
        lo, hi = np.asarray(lower[key], dtype=float), np.asarray(upper[key], dtype=float)
        centre, half = 0.5 * (hi + lo), 0.5 * (hi - lo)
        for j, name in enumerate(names):
            ax.plot(t, (x[:, j] - centre[j]) / half[j], linewidth=0.9, label=name)
        for bound in (-1.0, 1.0):
            ax.axhline(bound, color="black", linestyle="--", linewidth=0.8)
        peak = np.max(np.abs(x - centre) / half)
        ax.set_title(f"{label} / limit [{unit}], peak {peak:.3f}")
        ax.set_ylim(-1.15, 1.15)
        ax.grid(True, alpha=0.3)
    axes[0].legend(loc="upper right", fontsize="x-small", ncol=2)
    fig.supxlabel("time [s]")
    fig.suptitle(title)
    return _save(fig, path)


def plot_quantity(
    path: str | os.PathLike,
    t: ArrayLike,
    x: ArrayLike,
    lower: ArrayLike,
    upper: ArrayLike,
    names: Sequence[str],
    *,
    title: str,
    ylabel: str,
) -> Path:
    """One panel per joint of x (K, n) against t with its limits [lower, upper] (n,) dashed."""
    t, x = np.asarray(t, dtype=float), np.asarray(x, dtype=float)
    n = x.shape[1]
    cols = 2 if n > 3 else 1
    rows = int(np.ceil(n / cols))
    fig = Figure(figsize=FIGSIZE, layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols, sharex=True)).ravel()
    for j, ax in enumerate(axes):
        if j >= n:
            ax.set_visible(False)
            continue
        ax.plot(t, x[:, j], color=f"C{j}")
        for bound in (lower[j], upper[j]):
            if np.isfinite(bound):
                ax.axhline(bound, color="black", linestyle="--", linewidth=0.8)
        ax.set_title(names[j], fontsize="small")
        ax.grid(True, alpha=0.3)
    fig.supxlabel("time [s]")
    fig.supylabel(ylabel)
    fig.suptitle(title)
    return _save(fig, path)


def plot_precision(
    path: str | os.PathLike,
    names: Sequence[str],
    designed: ArrayLike,
    initial: ArrayLike,
    *,
    ylabel: str = "predicted relative std [%]",
    title: str = "Predicted precision: designed vs initial (random) experiment",
    missing_note: str = "nominal value 0: no relative std (see summary.json predicted_std)",
) -> Path:
    """Bars of a per-parameter precision measure (log scale) for the designed and initial runs.

    Parameters without a value (NaN: a relative std of a nominal 0) are
    marked "*" and the footnote says why.
    """
    designed, initial = np.asarray(designed, dtype=float), np.asarray(initial, dtype=float)
    fig = Figure(figsize=FIGSIZE, layout="constrained")
    ax = fig.subplots()
    x = np.arange(len(names))
    ax.bar(x - 0.2, np.where(np.isfinite(initial), initial, np.nan), 0.4, label="initial")
    ax.bar(x + 0.2, np.where(np.isfinite(designed), designed, np.nan), 0.4, label="designed")
    ax.set_yscale("log")
    missing = ~np.isfinite(designed)
    short = [
        name.split(" ")[0] + ("*" if gone else "")
        for name, gone in zip(names, missing, strict=True)
    ]
    if missing.any():
        fig.supxlabel(f"* {missing_note}", fontsize="x-small")
    ax.set_xticks(x, short, rotation=90, fontsize="x-small")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend()
    return _save(fig, path)


def plot_postures(
    path: str | os.PathLike,
    q: ArrayLike,
    lower: ArrayLike,
    upper: ArrayLike,
    names: Sequence[str],
    *,
    title: str = "Selected calibration postures (fraction of each joint's range)",
) -> Path:
    """Each selected posture (N, n) as a line over the joints, normalised to [0, 1] of the range."""
    q = np.asarray(q, dtype=float)
    lo, hi = np.asarray(lower, dtype=float), np.asarray(upper, dtype=float)
    fig = Figure(figsize=FIGSIZE, layout="constrained")
    ax = fig.subplots()
    x = np.arange(q.shape[1])
    for k in range(q.shape[0]):
        ax.plot(x, (q[k] - lo) / (hi - lo), marker="o", linewidth=0.8, alpha=0.7)
    ax.set_xticks(x, names, rotation=30, ha="right")
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("position in range")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    return _save(fig, path)


__all__ = ["DPI", "plot_limits", "plot_postures", "plot_precision", "plot_quantity"]
