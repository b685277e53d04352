"""Per-joint held-out figures: each joint's error relative to its own efforts, and their mean.

The pooled held-out relative RMS (``heldout_relative_rms``: every joint's
squared errors over every joint's squared efforts) weighs joints by the size of
their efforts and, on a robot with prismatic and revolute joints, adds newtons
to newton-metres. :func:`per_joint_figures` gives what a user compares joint by
joint: each joint's normalised held-out error ``|e_j| / |tau_j|`` (RMS over its
held-out samples), their unweighted mean, for the calibrated and the nominal
model, the joints predicted worse than zero (a normalised error above 1: the
model's torque is further from the measurement than no torque at all) and
whether the pooled figure mixes N and N m.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def per_joint_figures(summary: dict[str, Any]) -> dict[str, Any] | None:
    """``summary.json``'s ``heldout_per_joint`` entry (module docstring) of a torque
    calibration's summary; None for a kind without per-joint torques."""
    held = summary.get("heldout", {})
    calibrated = held.get("calibrated", {}).get("relative_rms_per_joint")
    if not calibrated:
        return None
    nominal = held.get("nominal", {}).get("relative_rms_per_joint", {})
    efforts = {u.get("effort") for u in summary.get("units", {}).get("joints", {}).values()}

    def mean(values: dict[str, float]) -> float | None:
        finite = [v for v in values.values() if v is not None and np.isfinite(v)]
        return float(np.mean(finite)) if finite else None

    return {
        "calibrated": calibrated,
        "nominal": nominal,
        "mean": {"calibrated": mean(calibrated), "nominal": mean(nominal)},
        "worse_than_zero": [j for j, v in calibrated.items() if v is not None and v > 1.0],
        "pooled_mixes_units": len(efforts - {None}) > 1,
    }


def summary_line(figures: dict[str, Any]) -> str:
    """'per-joint mean 0.12 (nominal 0.20); predicted worse than zero: a, b' for the command
    line's summary."""
    mean = figures["mean"]
    text = f"per-joint mean {_short(mean['nominal'])} (nominal) -> {_short(mean['calibrated'])}"
    if figures["worse_than_zero"]:
        text += f"; predicted worse than zero: {', '.join(figures['worse_than_zero'])}"
    return text


def _short(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4g}"
