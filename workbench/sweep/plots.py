"""The effort map of a sweep: the objective over the workspace and over the other axes.

``effort_map.png`` holds one panel per combination of the non-goal axes (up
to 12) showing the objective over the goal grid (azimuth x elevation for
pointing goals, the first two varied coordinates of a position grid, a
scatter for a goal list), colour on a log scale shared by all panels; goals
not solved are marked (x infeasible, + failed, square error). Each numeric
non-goal axis (a duration, a design parameter) adds a panel of the
objective against it, one line per goal (the median and the range over the
goals when there are more than 8).
"""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from workbench.io import atomic_write

MARKERS = {
    "infeasible": ("x", "tab:red"),
    "failed": ("+", "tab:orange"),
    "timeout": ("D", "tab:purple"),
    "error": ("s", "black"),
}
MAX_PANELS = 12


def _objective(row: dict[str, Any]) -> float:
    value = row.get("objective")
    if row.get("status") != "solved" or value is None or not math.isfinite(value):
        return math.nan
    return float(value)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def plot_effort_map(path: str | Path, sweep, rows: list[dict[str, Any]]) -> Path:
    """Write ``effort_map.png`` (module docstring); returns its path."""
    goal_x, goal_y = _goal_columns(sweep)
    others = list(sweep.axes)
    combos: list[tuple] = [()]
    if others:
        distinct = [list(dict.fromkeys(_key(r.get(k)) for r in rows)) for k in others]
        combos = list(itertools.product(*distinct))
    drawers = []
    shown = combos[:MAX_PANELS] if goal_x else []
    for combo in shown:
        pairs = list(zip(others, combo, strict=True))
        chosen = [r for r in rows if all(_key(r.get(k)) == v for k, v in pairs)]
        title = ", ".join(f"{k} = {json.loads(v)}" for k, v in zip(others, combo, strict=True))
        drawers.append(("map", chosen, title))
    numeric = [
        k for k in others
        if all(isinstance(r.get(k), int | float) and not isinstance(r.get(k), bool) for r in rows)
    ]  # fmt: skip
    for k in numeric:
        drawers.append(("axis", k, f"objective over {k}"))
    if not drawers:
        drawers.append(("list", rows, "objective per task"))
    values = np.array([_objective(r) for r in rows])
    finite = values[np.isfinite(values) & (values > 0)]
    norm = LogNorm(finite.min(), max(finite.max(), finite.min() * 1.0001)) if finite.size else None
    ncols = min(3, len(drawers))
    nrows = math.ceil(len(drawers) / ncols)
    fig = Figure(figsize=(5.2 * ncols, 4.4 * nrows), dpi=100, layout="constrained")
    mappable = None
    for k, (kind, data, title) in enumerate(drawers):
        ax = fig.add_subplot(nrows, ncols, k + 1)
        if kind == "map":
            mappable = _map(ax, data, goal_x, goal_y, norm, sweep.goal_kind) or mappable
        elif kind == "axis":
            _along(ax, rows, data, sweep)
        else:
            _per_task(ax, data)
        ax.set_title(title or "objective over the goals", fontsize=9)
    if mappable is not None:
        fig.colorbar(mappable, ax=fig.axes, label="objective (solved tasks), log scale")
    more = (
        f" (first {MAX_PANELS} of {len(combos)} combinations)"
        if len(combos) > len(shown) > 0
        else ""
    )
    fig.suptitle(f"Effort map: {Path(sweep.source).name}, {len(rows)} tasks{more}", fontsize=11)

    def write(tmp: Path) -> None:
        fig.savefig(tmp, format="png")

    return atomic_write(path, write)


def _goal_columns(sweep) -> tuple[str | None, str | None]:
    if sweep.goal_kind == "angles" or (sweep.goal_kind == "list" and sweep.task_kind == "pointing"):
        return "azimuth_deg", "elevation_deg"
    if sweep.goal_kind == "xyz":
        cols = list(sweep.grid_columns)
        return cols[0], (cols[1] if len(cols) > 1 else None)
    if sweep.goal_kind == "list":
        return "goal_x", "goal_y"
    return None, None


def _edges(centres: np.ndarray) -> np.ndarray:
    if centres.size == 1:
        return np.array([centres[0] - 0.5, centres[0] + 0.5])
    middle = (centres[1:] + centres[:-1]) / 2
    return np.concatenate([[2 * centres[0] - middle[0]], middle, [2 * centres[-1] - middle[-1]]])


def _map(ax, rows, cx: str, cy: str | None, norm, goal_kind: str):
    """Objective over the goal grid (pcolormesh) or the goal list (scatter); markers."""
    x = np.array([r[cx] for r in rows], dtype=float)
    y = np.zeros_like(x) if cy is None else np.array([r[cy] for r in rows], dtype=float)
    z = np.array([_objective(r) for r in rows])
    mappable = None
    if goal_kind in ("angles", "xyz"):
        xs, ys = np.unique(x), np.unique(y)
        grid = np.full((ys.size, xs.size), np.nan)
        grid[np.searchsorted(ys, y), np.searchsorted(xs, x)] = z
        mappable = ax.pcolormesh(
            _edges(xs), _edges(ys), np.ma.masked_invalid(grid), norm=norm, cmap="viridis"
        )
    else:
        ok = np.isfinite(z)
        if ok.any():
            mappable = ax.scatter(x[ok], y[ok], c=z[ok], norm=norm, cmap="viridis", s=60)
    for status, (marker, colour) in MARKERS.items():
        hit = np.array([r["status"] == status for r in rows])
        if hit.any():
            if marker == "s":  # hollow square
                ax.scatter(x[hit], y[hit], marker=marker, facecolors="none", edgecolors=colour,
                           s=50, label=status)  # fmt: skip
            else:  # unfilled markers (x, +) take their colour as c
                ax.scatter(x[hit], y[hit], marker=marker, c=colour, s=50, label=status)
    if any(r["status"] in MARKERS for r in rows):
        ax.legend(fontsize=7, loc="best")
    ax.set_xlabel(cx)
    ax.set_ylabel(cy or "")
    return mappable


def _along(ax, rows, key: str, sweep) -> None:
    """Objective against a numeric axis, one line per goal (or median and range)."""
    goal_cols = ("goal_x", "goal_y", "goal_z")
    others = [k for k in sweep.axes if k != key]
    lines: dict[str, list] = {}
    for r in rows:
        label = _key([r.get(c) for c in goal_cols] + [r.get(k) for k in others])
        lines.setdefault(label, []).append(r)
    xs = sorted({float(r[key]) for r in rows})
    if len(lines) <= 8:
        for group in lines.values():
            group = sorted(group, key=lambda r: float(r[key]))
            ax.plot([float(r[key]) for r in group], [_objective(r) for r in group], "o-", ms=3)
    else:
        table = np.array([[_objective(r) for r in rows if float(r[key]) == v] for v in xs],
                         dtype=object)  # fmt: skip
        med = [np.nanmedian(np.array(v, float)) if np.isfinite(np.array(v, float)).any()
               else np.nan for v in table]  # fmt: skip
        lo = [np.nanmin(np.array(v, float)) if np.isfinite(np.array(v, float)).any()
              else np.nan for v in table]  # fmt: skip
        hi = [np.nanmax(np.array(v, float)) if np.isfinite(np.array(v, float)).any()
              else np.nan for v in table]  # fmt: skip
        ax.fill_between(xs, lo, hi, alpha=0.3, label="range over goals")
        ax.plot(xs, med, "o-", label="median")
        ax.legend(fontsize=7)
    unsolved = [r for r in rows if r["status"] != "solved"]
    if unsolved:
        counts = {v: sum(float(r[key]) == v for r in unsolved) for v in xs}
        text = ", ".join(f"{v:g}: {c}" for v, c in counts.items() if c)
        ax.text(0.02, 0.98, f"not solved at {text}", transform=ax.transAxes, va="top", fontsize=7)
    ax.set_yscale("log")
    ax.set_xlabel(key)
    ax.set_ylabel("objective")
    ax.grid(True, alpha=0.3)


def _per_task(ax, rows) -> None:
    z = [_objective(r) for r in rows]
    ax.bar(range(len(rows)), np.nan_to_num(z), color="tab:blue")
    ax.set_xticks(range(len(rows)), [r["id"] for r in rows], rotation=90, fontsize=6)
    ax.set_ylabel("objective")
