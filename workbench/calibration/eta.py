"""eta bookkeeping shared by the calibrations (seed 000 eq. 6-8, DESIGN.md "Conventions").

eta has one se(3) block (omega, v) per joint in joint order, then one for
the tool frame; ``chain.with_eta(eta)`` moves joint frame i to
``exp([eta_i]) M_i`` (so ``A_i = Ad_{exp(eta_i)} A_bar_i``) and the tool
frame to ``exp([eta_tool]) M_tool``. The calibrations relinearise at every
iteration, so the final model is a composition of small updates; the single
eta that maps the nominal chain to it is recovered by :func:`eta_between`.
"""

from __future__ import annotations

import numpy as np

from workbench import lie
from workbench.chain import Chain
from workbench.lie import Array


def eta_between(nominal: Chain, calibrated: Chain) -> Array:
    """The eta with ``nominal.with_eta(eta)`` equal to ``calibrated`` (frames at q = 0)."""
    frames_nominal = np.concatenate([nominal.joint_frames, nominal.tool_frame[None]])
    frames_calibrated = np.concatenate([calibrated.joint_frames, calibrated.tool_frame[None]])
    return lie.log_se3(frames_calibrated @ lie.inverse(frames_nominal)).ravel()


def twist_covariance(chain: Chain, cov_eta: Array) -> Array:
    """Covariance (n, 6, 6) of the twists A_i from that of eta: dA_i = -ad_{A_i} d eta_i (eq. 8)."""
    n = chain.n
    D = -lie.ad(chain.twists)  # (n, 6, 6)
    blocks = np.stack([cov_eta[6 * i : 6 * i + 6, 6 * i : 6 * i + 6] for i in range(n)])
    return D @ blocks @ np.swapaxes(D, -1, -2)
