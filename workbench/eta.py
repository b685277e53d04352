"""Joint-twist perturbations eta: which directions change a twist, and eta between chains.

eta has one se(3) block (omega, v) per joint in joint order, then one for
the tool frame, all in the base frame at q = 0 (Kwon, eq. 6, and
``docs/conventions.md``): ``chain.with_eta(eta)`` moves joint frame i to
``exp([eta_i]) M_i`` (so ``A_i = Ad_{exp(eta_i)} A_bar_i``) and the tool
frame to ``exp([eta_tool]) M_tool``. To first order a twist changes by
``dA_i = -ad_{A_i} d eta_i`` (Kwon, eq. 8), so two directions per revolute
joint (four per prismatic one) change nothing. Calibrations relinearise at
every iteration, so a calibrated model is a composition of small updates;
the single eta from the nominal to it is :func:`eta_between`.
"""

from __future__ import annotations

import numpy as np

from workbench import lie
from workbench.chain import Chain
from workbench.lie import Array


def twist_null_directions(chain: Chain) -> list[Array]:
    """Per joint, an orthonormal basis (6, k) of the eta directions with ``ad_{A_i} eta = 0``.

    They leave the joint twist unchanged ([Kwon] eq. 8: dA = -ad_A d eta):
    k = 2 for a revolute joint (the twist itself and a translation along the
    axis), k = 4 for a prismatic one (rotations about the axis direction and
    all translations).
    """
    bases = []
    for A in chain.twists:
        _, s, Vt = np.linalg.svd(lie.ad(A))
        bases.append(Vt[s <= 1e-9 * max(1.0, s[0])].T)
    return bases


def identifiable_eta_basis(chain: Chain) -> Array:
    """Orthonormal basis (6(n+1), m) of the eta directions that change some twist.

    Block diagonal: per joint the complement of :func:`twist_null_directions`,
    and all six tool-frame directions. ``eta = basis @ z`` parameterises a
    calibration without the directions the torques cannot see.
    """
    return twist_changing_basis(chain.twists)


def twist_changing_basis(twists: Array) -> Array:
    """:func:`identifiable_eta_basis` of the joints with twists ``twists`` (n, 6)."""
    blocks = []
    for A in twists:
        _, s, Vt = np.linalg.svd(lie.ad(A))
        blocks.append(Vt[s > 1e-9 * max(1.0, s[0])].T)
    blocks.append(np.eye(6))
    rows = 6 * (len(twists) + 1)
    cols = sum(b.shape[1] for b in blocks)
    basis = np.zeros((rows, cols))
    c = 0
    for j, b in enumerate(blocks):
        basis[6 * j : 6 * j + 6, c : c + b.shape[1]] = b
        c += b.shape[1]
    return basis


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
