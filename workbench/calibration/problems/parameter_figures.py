"""Parameters as reports state them: relative standard deviations and the joint twists' eta.

Relative standard deviations are in percent of the value: 0 for a parameter
that was not estimated (fixed by the gauge or the candidate), inf for a
value of 0; eta is the twist error of each joint then the tool, (omega, v)
in rad and m (:mod:`workbench.eta`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench.chain import Chain
from workbench.lie import Array


def relative_std(std: float, value: float) -> float:
    """Relative std in percent: 0 for a fixed parameter (std 0), inf for a value of 0."""
    if std == 0:
        return 0.0
    return float(100.0 * std / abs(value)) if value != 0 else float("inf")


def relative_stds(std: Array, values: Array) -> list[float]:
    """:func:`relative_std` of each value."""
    return [relative_std(float(s), float(v)) for s, v in zip(std, values, strict=True)]


MEANINGFUL_PERCENT = 1e-9  # relative standard deviations below this are rounding, not data


def std_figure(percent: float) -> float | str:
    """A relative std (percent) as reports show it: ``"0 (fixed)"`` for a parameter that was
    not estimated (std 0: fixed by the gauge or the candidate), ``"<1e-9"`` below numerical
    meaning, ``"inf"`` for a value of 0, else the number."""
    if percent == 0:
        return "0 (fixed)"
    if not np.isfinite(percent):
        return "inf"
    return "<1e-9" if percent < MEANINGFUL_PERCENT else float(percent)


def eta_entries(eta: Array, std: Array, null: Array, chain: Chain) -> dict[str, Any]:
    """The ``eta``, ``eta_std`` and ``non_identifiable_directions`` entries of a twist summary."""
    names = [*chain.joint_names, f"tool:{chain.tool_name}"]
    return {
        "eta_order": "per joint then tool: (omega_x, omega_y, omega_z, v_x, v_y, v_z)",
        "eta": {name: eta[6 * k : 6 * k + 6].tolist() for k, name in enumerate(names)},
        "eta_std": {name: std[6 * k : 6 * k + 6].tolist() for k, name in enumerate(names)},
        "non_identifiable_directions": null.T.tolist(),
    }
