"""Loop-closure residuals: linear functions of the relative pose of two frames.

With ``X = T_B^{-1} T_A`` the pose of frame A in frame B (rotation
``R = R_B^T R_A``, translation ``p = R_B^T (p_A - p_B)``), a closure of each
type holds when its residual vanishes:

============  ====  =====================================================
type          rows  residual
============  ====  =====================================================
``point``       3   ``p``: the origins coincide (a ball joint)
``rotation``    3   ``vee(R - R^T) / 2``: equal orientations
``weld``        6   ``point`` and ``rotation`` (a rigid joint)
``revolute``    5   ``p`` and ``(R[0, 2], R[1, 2])``: coincident origins,
                    parallel z axes (a hinge about z)
``planar``      2   ``(p[0], p[1])``: the origins coincide in the plane
                    normal to z_B (the closure of a planar loop)
============  ====  =====================================================

Every residual is *linear* in the entries of X, so derivatives of X along
any directions (:mod:`workbench.closed_chains.loops`) are derivatives of the
residual. ``vee(R - R^T) / 2`` is ``sin(angle) axis`` of the relative
rotation and also vanishes at a half turn (likewise antiparallel z axes for
``revolute``): :func:`misalignment` measures how far a solution is from the
intended branch. Rows that a mechanism keeps at zero identically (the
out-of-plane rows of a ``revolute`` closure of a planar loop) are
redundant, not wrong: the solvers use least squares.
"""

from __future__ import annotations

import numpy as np

from workbench.lie import Array

ROWS = {"point": 3, "rotation": 3, "weld": 6, "revolute": 5, "planar": 2}


def residual(kind: str, X: Array) -> Array:
    """Residual (..., rows) of a ``kind`` closure from relative poses X (..., 4, 4)."""
    R, p = X[..., :3, :3], X[..., :3, 3]
    rotation = np.stack([R[..., 2, 1] - R[..., 1, 2], R[..., 0, 2] - R[..., 2, 0],
                         R[..., 1, 0] - R[..., 0, 1]], axis=-1) / 2  # fmt: skip
    if kind == "point":
        return p
    if kind == "rotation":
        return rotation
    if kind == "weld":
        return np.concatenate([p, rotation], axis=-1)
    if kind == "revolute":
        return np.concatenate([p, R[..., 0:1, 2], R[..., 1:2, 2]], axis=-1)
    if kind == "planar":
        return p[..., :2]
    raise ValueError(kind)


def misalignment(kind: str, X: Array) -> Array:
    """Angle (...) between the frames (rotation, weld) or their z axes (revolute); else 0."""
    R = X[..., :3, :3]
    if kind in ("rotation", "weld"):
        return np.arccos(np.clip((np.trace(R, axis1=-2, axis2=-1) - 1.0) / 2.0, -1.0, 1.0))
    if kind == "revolute":
        return np.arccos(np.clip(R[..., 2, 2], -1.0, 1.0))
    return np.zeros(X.shape[:-2])
