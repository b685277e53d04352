"""Figures of a payload identification: torques the payload explains, and its parameters.

Conventions of :mod:`workbench.viz.plots`: each function draws its own
:class:`~matplotlib.figure.Figure`, writes one PNG atomically (1000 x 700
px) and returns its path; time t (K,) in s, per-sample arrays (K, n) in the
order of ``names``; torques in N m.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from workbench.viz.plots import _save, joint_grid


def plot_payload_torques(
    path: str | os.PathLike,
    t: ArrayLike,
    payload_measured: ArrayLike,
    payload_fitted: ArrayLike,
    names: Sequence[str],
) -> Path:
    """Per joint: the measured torques minus the robot's own (what the payload causes), and the
    torques of the identified payload (K, n) against t (K,)."""
    t = np.asarray(t, dtype=float)
    measured = np.asarray(payload_measured, dtype=float)
    fitted = np.asarray(payload_fitted, dtype=float)
    fig, axes = joint_grid(len(names))
    for j, ax in enumerate(axes):
        ax.plot(t, measured[:, j], color="0.5", linewidth=0.7, label="measured - robot")
        ax.plot(t, fitted[:, j], color="C3", linewidth=1.0, label="identified payload")
        ax.set_title(names[j], fontsize="small")
        ax.grid(True, alpha=0.3)
        if j == 0:
            ax.legend(loc="best", fontsize="x-small")
    fig.supxlabel("time [s]")
    fig.supylabel("torque [N m]")
    fig.suptitle("Joint torques of the payload")
    return _save(fig, path)
