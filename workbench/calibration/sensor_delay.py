"""Torques measured late: the sensor delay between logged torques and positions.

Convention: the torques lag the positions by ``d`` seconds (``d > 0``: a
torque sample stamped t was produced by the motion at ``t - d``), so

    tau_measured(t) = tau_model(t - d),   i.e.   tau_model(t) = tau_measured(t + d).

The torque equations compare the model at the sample times t with the
measured torques at ``t + d``, linearly interpolated at the raw sample rate
before the anti-aliasing filter and decimation (so ``d`` need not be a whole
number of samples); near each segment's ends ``t + d`` is clamped to the
segment (those samples fall within the filters' dropped borders when ``|d|``
is below the border's duration). ``d`` is fitted by a bounded 1-D search on
the training rows (:mod:`workbench.calibration.drive_shapes`).
"""

from __future__ import annotations

import numpy as np

from workbench.calibration.samples import Log
from workbench.lie import Array


def delayed_torques(log: Log, delay: float) -> Array:
    """The measured torques (N, n) at ``t + delay`` of every sample (module docstring)."""
    if delay == 0.0:
        return log.tau
    out = np.empty_like(log.tau)
    for start, stop in log.spans():
        t = log.t[start:stop]
        shifted = np.clip(t + delay, t[0], t[-1])
        for j in range(log.tau.shape[1]):
            out[start:stop, j] = np.interp(shifted, t, log.tau[start:stop, j])
    return out


def delay_bound(log: Log, periods: float = 5.0) -> float:
    """The search bound (s): ``periods`` sample periods of the torque equations (after
    decimation), i.e. ``periods * decimation`` raw periods."""
    dt = float(np.median(np.diff(log.t))) if len(log) > 1 else 1.0
    return periods * max(log.decimation, 1) * dt
