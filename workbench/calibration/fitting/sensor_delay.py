"""Torques measured late: the sensor delay between logged torques and positions.

Convention: the torques lag the positions by ``d`` seconds (``d > 0``: a
torque sample stamped t was produced by the motion at ``t - d``), so

    tau_measured(t) = tau_model(t - d),   i.e.   tau_model(t) = tau_measured(t + d).

The torque equations compare the model at the sample times t with the
measured torques at ``t + d``, shifted at the raw sample rate before the
anti-aliasing filter and decimation (so ``d`` need not be a whole number of
samples) by a band-limited (Fourier) fractional delay of each segment: the
line through its end samples is taken off (and added back shifted exactly),
and the rest extended by point reflection about both ends, so that the
periodic signal the Fourier transform sees is continuous with its slope (the
torques at ``t + d`` beyond a segment's end are extrapolated so). The
The
Fourier shift passes every frequency with gain 1: unlike linear
interpolation, it does not average the torque noise of neighbouring samples,
which would reward any non-zero ``d`` with a smaller residual. ``d`` is
fitted by a bounded 1-D search on the training rows
(:mod:`workbench.calibration.fitting.drive_shapes`).
"""

from __future__ import annotations

import numpy as np

from workbench.lie import Array
from workbench.recordings.log import Log


class FractionalDelay:
    """The measured torques of ``log`` at ``t + delay`` for any delay (module docstring): each
    segment's spectrum computed once, every delay one phase ramp and inverse transform."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.parts = []
        for start, stop in log.spans():
            tau = log.tau[start:stop]
            m = tau.shape[0]
            if m < 3:
                self.parts.append((start, stop, None))
                continue
            dt = float(np.median(np.diff(log.t[start:stop])))
            k = np.arange(m, dtype=float)[:, None]
            slope = (tau[-1] - tau[0]) / (m - 1)
            rest = tau - tau[0] - slope * k  # zero at both ends
            odd = np.concatenate([rest, -rest[-2:0:-1]])  # period 2 m - 2
            frequency = np.fft.rfftfreq(odd.shape[0], dt)
            spectrum = np.fft.rfft(odd, axis=0)
            self.parts.append((start, stop, (dt, k, tau[0], slope, frequency, spectrum)))

    def __call__(self, delay: float) -> Array:
        log = self.log
        if delay == 0.0:
            return log.tau
        out = np.empty_like(log.tau)
        for start, stop, part in self.parts:
            if part is None:
                out[start:stop] = log.tau[start:stop]
                continue
            dt, k, first, slope, frequency, spectrum = part
            phase = np.exp(2j * np.pi * frequency * delay)[:, None]
            period = 2 * (stop - start) - 2
            shifted = np.fft.irfft(spectrum * phase, period, axis=0)[: stop - start]
            out[start:stop] = shifted + first + slope * (k + delay / dt)
        return out


def delayed_torques(log: Log, delay: float) -> Array:
    """The measured torques (N, n) at ``t + delay`` of every sample (module docstring)."""
    return log.tau if delay == 0.0 else FractionalDelay(log)(delay)


def delay_bound(log: Log, periods: float = 5.0) -> float:
    """The search bound (s): ``periods`` sample periods of the torque equations (after
    decimation), i.e. ``periods * decimation`` raw periods."""
    dt = float(np.median(np.diff(log.t))) if len(log) > 1 else 1.0
    return periods * max(log.decimation, 1) * dt
