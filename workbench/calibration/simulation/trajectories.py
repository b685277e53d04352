"""Exciting joint trajectories for simulated calibration logs.

A sum of sines per joint (a common exciting trajectory),
``q_i(t) = c_i + sum_k a_ik sin(2 pi f_k t + phase_ik)``, centred in the
joint range and scaled to stay within 80 % of it (ranges wider than 2 pi are
clipped to [-pi, pi]) and below 90 % of the joint's velocity limit; dq and
ddq are its exact derivatives.
"""

from __future__ import annotations

import numpy as np

from workbench.chain import Chain
from workbench.lie import Array


def exciting_trajectory(
    chain: Chain,
    samples: int,
    dt: float = 0.01,
    harmonics: int = 5,
    seed: int = 0,
    times: Array | None = None,
) -> tuple[Array, Array, Array, Array]:
    """t, q, dq, ddq (module docstring) with ``samples`` samples every ``dt`` s.

    ``times`` evaluates the same trajectory (the one of ``samples`` and
    ``dt``) at other instants instead, e.g. the stamps of a jittery clock.
    """
    rng = np.random.default_rng(seed)
    t = dt * np.arange(samples)
    lower = np.maximum(chain.lower, -np.pi)
    upper = np.minimum(chain.upper, np.pi)
    centre, half = (upper + lower) / 2, 0.8 * (upper - lower) / 2
    duration = max(t[-1], dt)
    freq = (1.0 + np.arange(harmonics)) * max(0.1, 2.0 / duration)  # Hz
    amp = rng.uniform(-1.0, 1.0, size=(chain.n, harmonics)) / (1.0 + np.arange(harmonics))
    amp *= half[:, None] / np.abs(amp).sum(axis=1, keepdims=True)
    phase = rng.uniform(0.0, 2 * np.pi, size=(chain.n, harmonics))
    w = 2 * np.pi * freq
    peak_speed = np.abs(amp) @ w  # bound of |dq_i|
    limit = np.where(np.isfinite(chain.velocity_limit), 0.9 * chain.velocity_limit, np.inf)
    amp *= np.minimum(1.0, limit / peak_speed)[:, None]
    t = t if times is None else np.asarray(times, dtype=float)
    arg = t[:, None, None] * w + phase  # (N, n, K)
    q = centre + np.einsum("nk,snk->sn", amp, np.sin(arg))
    dq = np.einsum("nk,snk->sn", amp * w, np.cos(arg))
    ddq = -np.einsum("nk,snk->sn", amp * w**2, np.sin(arg))
    return t, q, dq, ddq
