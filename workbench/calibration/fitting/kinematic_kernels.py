"""Compiled residuals, Jacobian rows and least-squares factors of the kinematic calibration.

One kernel, :func:`marker_rows`, walks the samples of one marker (one call
per marker and chunk of samples, threads via
:func:`workbench.runtime.run_batched`): forward kinematics along
the marker's path, the residual rows (3 position, then 3 weighted rotation
entries), and, for samples whose residual is finite, the Jacobian rows of
:mod:`workbench.calibration.fitting.kinematic`. With ``Y_a = X P_a`` (device frame
times the partial products along the path, ``Y_0 = X``) and the marker's
position ``p``, the spatial twist columns of the module docstring become,
for a point of the marker (``dp = [-[p], I] Ad_Y x``),

    B(Y) = [[p_Y - p] R_Y, R_Y]                      (3 x 6),
    joint at path position a:  B(Y_{a-1}) - B(Y_a),
    marker frame:              B(Y_K),
    device frame:              B(I) = [-[p], I],

and for the rotation residual ``r = log(R R_meas^T)`` the rows ``w J_l^{-1}(r)
[R_Y, 0]`` (differences as above, ``R_I = I`` for the device). Nothing of
size (samples x parameters) is formed: each row is projected on the
candidate directions P (6 rows per block, each block mapping into a range of
columns: 48 -> 34 columns for the iiwa's tool) and goes through a buffer into the upper-triangular
factor R of ``[J P | r]`` (Householder reflections that fold a block of rows
into R, LAPACK's ``dlarfg`` convention), so that ``R^T R = [J P | r]^T [J P
| r]``; a second factor of ``sqrt(w) [J P | r]`` is kept when IRLS weights
are given. The factors give the normal equations of Levenberg-Marquardt
and, through ``R_JP``, the singular values and right singular vectors of
``J P`` for the identifiable subspace, at the precision of a QR
factorisation (not of the squared normal equations, whose rounding would
hide the 1e-8 rank threshold). Per-chunk factors are merged by folding one
into the other.

``dense`` also writes the rows themselves (``J_out``), for
:meth:`~workbench.calibration.fitting.kinematic.KinematicProblem.evaluate`.
"""

from __future__ import annotations

import numpy as np

from workbench.dynamics.kernels import compose, joint_transform
from workbench.runtime import jit, leaf

# Rows buffered before they are folded into a factor; a multiple of 3 and 6.
BLOCK = 192

# lie._SMALL_ANGLE: Taylor series below this rotation angle.
_SMALL_ANGLE = 1e-2


@leaf
def _sin_over_t(t):
    if t < _SMALL_ANGLE:
        t2 = t * t
        return 1.0 - t2 / 6.0 + t2 * t2 / 120.0 - t2 * t2 * t2 / 5040.0
    return np.sin(t) / t


@leaf
def _one_minus_cos_over_t2(t):
    if t < _SMALL_ANGLE:
        t2 = t * t
        return 0.5 - t2 / 24.0 + t2 * t2 / 720.0 - t2 * t2 * t2 / 40320.0
    return (1.0 - np.cos(t)) / (t * t)


@leaf
def log_so3(R, out):
    """out = log(R) as :func:`workbench.lie.log_so3` (skew part away from pi, symmetric near)."""
    cos_t = (R[0, 0] + R[1, 1] + R[2, 2] - 1.0) / 2.0
    s0 = 0.5 * (R[2, 1] - R[1, 2])
    s1 = 0.5 * (R[0, 2] - R[2, 0])
    s2 = 0.5 * (R[1, 0] - R[0, 1])
    theta = np.arctan2(np.sqrt(s0 * s0 + s1 * s1 + s2 * s2), cos_t)
    if theta >= 3.0:
        # R + R^T = 2 cos(t) I + 2 (1 - cos t) u u^T: the largest column of the symmetric part
        col = 0
        best = R[0, 0] - cos_t
        for c in range(1, 3):
            if R[c, c] - cos_t > best:
                best = R[c, c] - cos_t
                col = c
        u0 = (R[0, col] + R[col, 0]) / 2.0 - (cos_t if col == 0 else 0.0)
        u1 = (R[1, col] + R[col, 1]) / 2.0 - (cos_t if col == 1 else 0.0)
        u2 = (R[2, col] + R[col, 2]) / 2.0 - (cos_t if col == 2 else 0.0)
        norm = np.sqrt(u0 * u0 + u1 * u1 + u2 * u2)
        sign = -1.0 if u0 * s0 + u1 * s1 + u2 * s2 < 0.0 else 1.0
        scale = sign * theta / norm
        out[0], out[1], out[2] = scale * u0, scale * u1, scale * u2
        return
    a = _sin_over_t(theta) if theta < 3.0 else 1.0  # NaN stays NaN
    out[0], out[1], out[2] = s0 / a, s1 / a, s2 / a


@leaf
def left_jacobian_inverse_so3(w, out):
    """out (3, 3) = I - [w]/2 + k [w]^2 as :func:`workbench.lie.left_jacobian_inverse_so3`."""
    t2 = w[0] * w[0] + w[1] * w[1] + w[2] * w[2]
    theta = np.sqrt(t2)
    if theta < _SMALL_ANGLE:
        k = 1.0 / 12.0 + t2 / 720.0 + t2 * t2 / 30240.0 + t2 * t2 * t2 / 1209600.0
    else:
        k = (1.0 - _sin_over_t(theta) / (2.0 * _one_minus_cos_over_t2(theta))) / t2
    W = ((0.0, -w[2], w[1]), (w[2], 0.0, -w[0]), (-w[1], w[0], 0.0))
    for r in range(3):
        for c in range(3):
            w2 = w[r] * w[c] - (t2 if r == c else 0.0)  # [w]^2 = w w^T - |w|^2 I
            out[r, c] = (1.0 if r == c else 0.0) - 0.5 * W[r][c] + k * w2


@jit
def fold_rows(R, Bt, rows):
    """Fold ``rows`` rows, the columns ``Bt[:, :rows]`` of Bt (c, BLOCK), into R (c, c).

    Householder reflection per column j on ``(R[j, j], Bt[j, :rows])``,
    applied to the columns after j; afterwards ``R^T R`` has grown by the
    rows' ``B^T B``. Bt is overwritten. The rows are stored transposed so
    that every inner loop runs over contiguous memory (4x faster than rows).
    """
    c = R.shape[0]
    for j in range(c):
        bj = Bt[j]
        sigma = _dot(bj, bj, rows)
        if sigma == 0.0:
            continue
        alpha = R[j, j]
        norm = np.sqrt(alpha * alpha + sigma)
        beta = -norm if alpha >= 0.0 else norm
        tau = (beta - alpha) / beta
        scale = 1.0 / (alpha - beta)
        for i in range(rows):
            bj[i] *= scale  # the Householder vector (1, bj)
        R[j, j] = beta
        for col in range(j + 1, c):
            bc = Bt[col]
            t = tau * (R[j, col] + _dot(bj, bc, rows))
            R[j, col] -= t
            for i in range(rows):
                bc[i] -= t * bj[i]


@leaf
def _dot(a, b, rows):
    """sum a[:rows] b[:rows] in four interleaved sums (no fastmath needed for speed)."""
    s0 = s1 = s2 = s3 = 0.0
    i = 0
    while i + 4 <= rows:
        s0 += a[i] * b[i]
        s1 += a[i + 1] * b[i + 1]
        s2 += a[i + 2] * b[i + 2]
        s3 += a[i + 3] * b[i + 3]
        i += 4
    while i < rows:
        s0 += a[i] * b[i]
        i += 1
    return (s0 + s1) + (s2 + s3)


@leaf
def _position_block(RY, pY, p, rows, row, col, sign):
    """rows[row:row+3, col:col+6] += sign * [[p_Y - p] R_Y, R_Y]."""
    d0, d1, d2 = pY[0] - p[0], pY[1] - p[1], pY[2] - p[2]
    for c in range(3):
        x0, x1, x2 = RY[0, c], RY[1, c], RY[2, c]
        rows[row, col + c] += sign * (d1 * x2 - d2 * x1)
        rows[row + 1, col + c] += sign * (d2 * x0 - d0 * x2)
        rows[row + 2, col + c] += sign * (d0 * x1 - d1 * x0)
        for r in range(3):
            rows[row + r, col + 3 + c] += sign * RY[r, c]


@leaf
def _rotation_block(Jinv, RY, rows, row, col, sign):
    """rows[row:row+3, col:col+3] += sign * Jinv R_Y (Jinv already holds the weight)."""
    for r in range(3):
        for c in range(3):
            rows[row + r, col + c] += sign * (
                Jinv[r, 0] * RY[0, c] + Jinv[r, 1] * RY[1, c] + Jinv[r, 2] * RY[2, c]
            )


@leaf
def _joint_motion(RY, pY, p, A, Jinv, has_position, has_rotation, out):
    """out = d r / d q_j: ``(p_Y - p) x R_Y w + R_Y v`` (position), then ``Jinv R_Y w``
    (rotation, Jinv already weighted), for the twist A = (w, v) of a joint at Y."""
    w0 = RY[0, 0] * A[0] + RY[0, 1] * A[1] + RY[0, 2] * A[2]
    w1 = RY[1, 0] * A[0] + RY[1, 1] * A[1] + RY[1, 2] * A[2]
    w2 = RY[2, 0] * A[0] + RY[2, 1] * A[1] + RY[2, 2] * A[2]
    row = 0
    if has_position:
        d0, d1, d2 = pY[0] - p[0], pY[1] - p[1], pY[2] - p[2]
        for r in range(3):
            out[r] = RY[r, 0] * A[3] + RY[r, 1] * A[4] + RY[r, 2] * A[5]
        out[0] += d1 * w2 - d2 * w1
        out[1] += d2 * w0 - d0 * w2
        out[2] += d0 * w1 - d1 * w0
        row = 3
    if has_rotation:
        for r in range(3):
            out[row + r] = Jinv[r, 0] * w0 + Jinv[r, 1] * w1 + Jinv[r, 2] * w2


@jit
def marker_rows(
    q, twists, path, placement, device, position, rotation, rotation_weight,
    device_col, marker_col, p, fold, dense, proj, lo, hi, sqrt_w, qdir, r_out, J_out, R, Rw,
    start, stop,
):  # fmt: skip
    """Residuals of one marker for samples ``start:stop`` and, optionally, their Jacobian rows.

    ``position`` (N, 3) / ``rotation`` (N, 3, 3) are the measurements
    (0 rows: not measured); ``r_out`` (N, k) gets the residual rows (k = 3
    or 6). Columns of J: 6 per joint, the device's 6 at ``device_col`` (< 0:
    known device), the marker's 6 at ``marker_col``, p in all. For samples
    with a finite residual, ``dense`` writes the rows of J to ``J_out`` (N,
    k, p) and ``fold`` folds the rows ``[J P | r]`` into R (c, c), and
    ``sqrt(w) [J P | r]`` into Rw when ``sqrt_w`` (N, k) has rows. P =
    ``proj`` (p, c - 1): the rows of 6-block b map into columns
    ``lo[b]:hi[b]`` (zero elsewhere; blocks may share columns, e.g. a joint
    offset moves several joints and markers); rows of P past the last whole
    6-block (e.g. one compliance per joint) map into every column.
    ``qdir`` (N, n, p), when it has rows, says how the joint positions ``q``
    move with each parameter in that sample (the joint compliance of
    :mod:`workbench.calibration.fitting.compliance`): the rows get ``(d r / d q)
    qdir[n]`` on top, with ``d r / d q_j`` the marker's motion by joint j's
    spatial twist ``Ad_{Y_a} A_j`` (j at path position a).
    """
    K = path.shape[0]
    moved = qdir.shape[0] > 0
    has_position = position.shape[0] > 0
    has_rotation = rotation.shape[0] > 0
    k = r_out.shape[1]
    c = R.shape[0]  # folded columns + 1
    blocks = lo.shape[0]
    weighted = sqrt_w.shape[0] > 0
    YR = np.empty((K + 1, 3, 3))
    Yp = np.empty((K + 1, 3))
    TR = np.empty((3, 3))
    Tp = np.empty(3)
    Re = np.empty((3, 3))
    pe = np.empty(3)
    D = np.empty((3, 3))
    rot = np.empty(3)
    Jinv = np.zeros((3, 3))
    res = np.empty(6)
    drdq = np.empty(6)
    rows = np.zeros((6, p + 1))
    Bt = np.empty((c, BLOCK))
    Bwt = np.empty((c if weighted else 0, BLOCK))
    filled = 0
    MR = placement[:3, :3]
    Mp = placement[:3, 3]
    for n in range(start, stop):
        for r in range(3):
            for cc in range(3):
                YR[0, r, cc] = device[r, cc]
            Yp[0, r] = device[r, 3]
        for a in range(K):
            j = path[a]
            joint_transform(twists[j], q[n, j], Re, pe)
            compose(YR[a], Yp[a], Re, pe, YR[a + 1], Yp[a + 1])
        compose(YR[K], Yp[K], MR, Mp, TR, Tp)
        row = 0
        if has_position:
            for r in range(3):
                res[r] = Tp[r] - position[n, r]
            row = 3
        if has_rotation:
            for r in range(3):
                for cc in range(3):
                    D[r, cc] = (
                        TR[r, 0] * rotation[n, cc, 0]
                        + TR[r, 1] * rotation[n, cc, 1]
                        + TR[r, 2] * rotation[n, cc, 2]
                    )
            log_so3(D, rot)
            for r in range(3):
                res[row + r] = rotation_weight * rot[r]
        finite = True
        for r in range(k):
            r_out[n, r] = res[r]
            if not np.isfinite(res[r]):
                finite = False
        if not finite or not (fold or dense):
            continue
        # ---- Jacobian rows [J | r]
        for r in range(k):
            for cc in range(p):
                rows[r, cc] = 0.0
            rows[r, p] = res[r]
        rrow = 3 if has_position else 0
        if has_rotation:
            left_jacobian_inverse_so3(rot, Jinv)
            for r in range(3):
                for cc in range(3):
                    Jinv[r, cc] *= rotation_weight
        for a in range(K + 1):
            # B(Y_a) enters joint a (path position a + 1) with +, joint a - 1 with -,
            # and the marker's columns for a = K
            if a < K:
                col = 6 * path[a]
                if has_position:
                    _position_block(YR[a], Yp[a], Tp, rows, 0, col, 1.0)
                if has_rotation:
                    _rotation_block(Jinv, YR[a], rows, rrow, col, 1.0)
            if a > 0:
                col = 6 * path[a - 1]
                if has_position:
                    _position_block(YR[a], Yp[a], Tp, rows, 0, col, -1.0)
                if has_rotation:
                    _rotation_block(Jinv, YR[a], rows, rrow, col, -1.0)
        if has_position:
            _position_block(YR[K], Yp[K], Tp, rows, 0, marker_col, 1.0)
        if has_rotation:
            _rotation_block(Jinv, YR[K], rows, rrow, marker_col, 1.0)
        if device_col >= 0:
            if has_position:
                for r in range(3):
                    rows[r, device_col + 3 + r] = 1.0
                # -[p] columns
                rows[0, device_col + 1] = Tp[2]
                rows[0, device_col + 2] = -Tp[1]
                rows[1, device_col + 0] = -Tp[2]
                rows[1, device_col + 2] = Tp[0]
                rows[2, device_col + 0] = Tp[1]
                rows[2, device_col + 1] = -Tp[0]
            if has_rotation:
                for r in range(3):
                    for cc in range(3):
                        rows[rrow + r, device_col + cc] = Jinv[r, cc]
        if moved:
            for a in range(K):
                _joint_motion(YR[a], Yp[a], Tp, twists[path[a]], Jinv, has_position,
                              has_rotation, drdq)  # fmt: skip
                j = path[a]
                for r in range(k):
                    for cc in range(p):
                        rows[r, cc] += drdq[r] * qdir[n, j, cc]
        if dense:
            for r in range(k):
                for cc in range(p):
                    J_out[n, r, cc] = rows[r, cc]
        if fold:
            if filled + k > BLOCK:
                fold_rows(R, Bt, filled)
                if weighted:
                    fold_rows(Rw, Bwt, filled)
                filled = 0
            for r in range(k):
                for t in range(c - 1):
                    Bt[t, filled + r] = 0.0
                for b in range(blocks):
                    for t in range(lo[b], hi[b]):
                        acc = 0.0
                        for i in range(6 * b, 6 * b + 6):
                            acc += rows[r, i] * proj[i, t]
                        Bt[t, filled + r] += acc
                for i in range(6 * blocks, p):
                    if rows[r, i] != 0.0:
                        for t in range(c - 1):
                            Bt[t, filled + r] += rows[r, i] * proj[i, t]
                Bt[c - 1, filled + r] = rows[r, p]
                if weighted:
                    w = sqrt_w[n, r]
                    for t in range(c):
                        Bwt[t, filled + r] = w * Bt[t, filled + r]
            filled += k
    if fold and filled > 0:
        fold_rows(R, Bt, filled)
        if weighted:
            fold_rows(Rw, Bwt, filled)


@jit
def marker_poses(q, twists, path, placement, device, T_out, start, stop):
    """T_out[n] = X prod_path exp([A_j] q_j) M for samples ``start:stop`` (T_out (N, 4, 4))."""
    K = path.shape[0]
    YR = np.empty((3, 3))
    Yp = np.empty(3)
    ZR = np.empty((3, 3))
    Zp = np.empty(3)
    Re = np.empty((3, 3))
    pe = np.empty(3)
    for n in range(start, stop):
        for r in range(3):
            for cc in range(3):
                YR[r, cc] = device[r, cc]
            Yp[r] = device[r, 3]
        for a in range(K):
            j = path[a]
            joint_transform(twists[j], q[n, j], Re, pe)
            compose(YR, Yp, Re, pe, ZR, Zp)
            YR[:, :] = ZR
            Yp[:] = Zp
        compose(YR, Yp, placement[:3, :3], placement[:3, 3], ZR, Zp)
        for r in range(3):
            for cc in range(3):
                T_out[n, r, cc] = ZR[r, cc]
            T_out[n, r, 3] = Zp[r]
            T_out[n, 3, r] = 0.0
        T_out[n, 3, 3] = 1.0
