"""Compiled per-sample building blocks of the recursive algorithms.

Everything here works on one sample at a time inside numba-compiled loops
over samples (:func:`workbench.runtime.run_batched` splits a batch across
threads). The
recursions are written in the *world frame* (the base frame): with the
chain in the zero-reference normal form of [Kwon] (all M_i = I, joint
twists A_i and inertias G_i given in the base frame at q = 0), link i sits
at ``T_i = T_parent exp([A_i] q_i)`` and

* ``S_i = Ad_{T_parent} A_i``          world twist of joint i,
* ``V_i = V_parent + S_i dq_i``        world spatial velocity,
* ``a_i = a_parent + S_i ddq_i + ad_{V_i} S_i dq_i``  (``a_base = (0, -g)``),
* ``f_i = I_i a_i - ad_{V_i}^T I_i V_i``  with ``I_i = Ad_{T_i}^{-T} G_i Ad_{T_i}^{-1}``,

which is [Kwon] eq. 1-5 written in the base frame instead of the body
frames (same torques ``tau_i = S_i^T F_i``, fewer transforms per joint).
Twists are (omega, v), wrenches (m, f). Spatial inertias are kept as
``(m, h, I_o)``: mass, first moment and rotational inertia about the frame
origin, so that ``I x = (I_o x_w + h x x_v, m x_v - h x x_w)``.

Work arrays have one extra row at index ``n`` for the base, so that a
parent index of -1 addresses the base through numba's negative indexing.

Compilation: the kernels are compiled on their first call and cached on
disk (:mod:`workbench.runtime`), which takes up to a minute once per
installation and then about a second per process;
:func:`workbench.warm_up.warm_up` compiles (or loads) every kernel of the
project on tiny models, so that timings that follow measure the computation
only, and ``python -m workbench.warm_up`` does the same from the shell, e.g.
right after ``pip install``.
"""

from __future__ import annotations

import numpy as np

from workbench.runtime import jit, leaf


@leaf
def cross(a, b, out):
    """out = a x b for 3-vectors (out must not alias a or b)."""
    out[0] = a[1] * b[2] - a[2] * b[1]
    out[1] = a[2] * b[0] - a[0] * b[2]
    out[2] = a[0] * b[1] - a[1] * b[0]


@leaf
def add_cross(a, b, out):
    """out += a x b for 3-vectors."""
    out[0] += a[1] * b[2] - a[2] * b[1]
    out[1] += a[2] * b[0] - a[0] * b[2]
    out[2] += a[0] * b[1] - a[1] * b[0]


@leaf
def dot3(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@leaf
def dot6(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3] + a[4] * b[4] + a[5] * b[5]


@leaf
def matvec3(M, x, out):
    """out = M x for a 3x3 matrix."""
    for r in range(3):
        out[r] = M[r, 0] * x[0] + M[r, 1] * x[1] + M[r, 2] * x[2]


@leaf
def ad_apply(V, x, out):
    """out = ad_V x = (w x x_w, w x x_v + v x x_w) (Lie bracket [V, x])."""
    cross(V[:3], x[:3], out[:3])
    cross(V[:3], x[3:], out[3:])
    add_cross(V[3:], x[:3], out[3:])


@leaf
def ad_transpose_apply(V, F, out):
    """out = ad_V^T F = (-(w x m) - v x f, -(w x f)) = ad*_F V ([Kwon] eq. 10)."""
    cross(F[:3], V[:3], out[:3])
    add_cross(F[3:], V[3:], out[:3])
    cross(F[3:], V[:3], out[3:])


@leaf
def inertia_apply(m, h, I, x, out):
    """out = G x for the spatial inertia (m, h, I_o): (I_o x_w + h x x_v, m x_v - h x x_w)."""
    matvec3(I, x[:3], out[:3])
    add_cross(h, x[3:], out[:3])
    cross(x[:3], h, out[3:])
    for r in range(3):
        out[3 + r] += m * x[3 + r]


@leaf
def world_inertia(m, h0, I0, R, p, h_out, I_out):
    """Move the inertia (m, h0, I0) given at q = 0 to the pose (R, p).

    ``h = R h0 + m p`` and ``I_o = R I0 R^T + 2 (p.r) 1 - r p^T - p r^T
    + m (|p|^2 1 - p p^T)`` with ``r = R h0`` (parallel axis theorem for a
    first moment about the old origin); this is [Kwon] eq. 29.
    """
    r0 = R[0, 0] * h0[0] + R[0, 1] * h0[1] + R[0, 2] * h0[2]
    r1 = R[1, 0] * h0[0] + R[1, 1] * h0[1] + R[1, 2] * h0[2]
    r2 = R[2, 0] * h0[0] + R[2, 1] * h0[1] + R[2, 2] * h0[2]
    h_out[0] = r0 + m * p[0]
    h_out[1] = r1 + m * p[1]
    h_out[2] = r2 + m * p[2]
    pr = p[0] * r0 + p[1] * r1 + p[2] * r2
    pp = p[0] * p[0] + p[1] * p[1] + p[2] * p[2]
    diag = 2.0 * pr + m * pp
    r = (r0, r1, r2)
    for a in range(3):
        # (R I0)[a, :]
        t0 = R[a, 0] * I0[0, 0] + R[a, 1] * I0[1, 0] + R[a, 2] * I0[2, 0]
        t1 = R[a, 0] * I0[0, 1] + R[a, 1] * I0[1, 1] + R[a, 2] * I0[2, 1]
        t2 = R[a, 0] * I0[0, 2] + R[a, 1] * I0[1, 2] + R[a, 2] * I0[2, 2]
        for b in range(a, 3):
            v = t0 * R[b, 0] + t1 * R[b, 1] + t2 * R[b, 2]
            v -= r[a] * p[b] + p[a] * r[b] + m * p[a] * p[b]
            if a == b:
                v += diag
            I_out[a, b] = v
            I_out[b, a] = v


@leaf
def joint_transform(A, theta, R_out, p_out):
    """exp([A] theta) for a unit revolute twist (|w| = 1) or a prismatic one (w = 0)."""
    w = A[:3]
    v = A[3:]
    if w[0] * w[0] + w[1] * w[1] + w[2] * w[2] < 0.5:
        for r in range(3):
            for c in range(3):
                R_out[r, c] = 1.0 if r == c else 0.0
            p_out[r] = v[r] * theta
        return
    s = np.sin(theta)
    c1 = 1.0 - np.cos(theta)
    c2 = theta - s
    # W = [w], W2 = [w]^2 = w w^T - 1
    W = ((0.0, -w[2], w[1]), (w[2], 0.0, -w[0]), (-w[1], w[0], 0.0))
    for r in range(3):
        for c in range(3):
            w2 = w[r] * w[c] - (1.0 if r == c else 0.0)
            R_out[r, c] = (1.0 if r == c else 0.0) + s * W[r][c] + c1 * w2
    for r in range(3):
        acc = theta * v[r]
        for c in range(3):
            w2 = w[r] * w[c] - (1.0 if r == c else 0.0)
            acc += (c1 * W[r][c] + c2 * w2) * v[c]
        p_out[r] = acc


@leaf
def compose(Ra, pa, Rb, pb, R_out, p_out):
    """(R_out, p_out) = (Ra, pa) (Rb, pb); outputs must not alias inputs."""
    for r in range(3):
        for c in range(3):
            R_out[r, c] = Ra[r, 0] * Rb[0, c] + Ra[r, 1] * Rb[1, c] + Ra[r, 2] * Rb[2, c]
        p_out[r] = Ra[r, 0] * pb[0] + Ra[r, 1] * pb[1] + Ra[r, 2] * pb[2] + pa[r]


@leaf
def Ad_apply(R, p, x, out):
    """out = Ad_T x = (R x_w, p x R x_w + R x_v) for T = (R, p)."""
    matvec3(R, x[:3], out[:3])
    matvec3(R, x[3:], out[3:])
    add_cross(p, out[:3], out[3:])


@leaf
def wrench_to_world(R, p, F, out):
    """out = Ad_{T^{-1}}^T F = (R m + p x R f, R f): a wrench given in frame T, in the world."""
    matvec3(R, F[:3], out[:3])
    matvec3(R, F[3:], out[3:])
    add_cross(p, out[3:], out[:3])


@jit
def init_base(gravity, R, P, V, A):
    """Base row (index -1): identity pose, zero velocity, acceleration (0, -g)."""
    for r in range(3):
        for c in range(3):
            R[-1, r, c] = 1.0 if r == c else 0.0
        P[-1, r] = 0.0
        A[-1, r] = 0.0
        A[-1, 3 + r] = -gravity[r]
    for r in range(6):
        V[-1, r] = 0.0


@leaf
def forward_pass(parents, twists, mass, h0, I0, q, dq, ddq, R, P, S, V, A, H, I, f, tmp, Re):
    """World-frame forward recursion for one sample (see the module docstring).

    Fills poses (R, P), joint twists S, velocities V, accelerations A (gravity
    included), world inertias (H, I) and the link wrenches f; rows 0..n-1.
    Scratch: ``tmp`` (3, 6) and ``Re`` (3, 3). The base row must be set by
    :func:`init_base`.
    """
    n = parents.shape[0]
    pe = tmp[2, :3]
    for i in range(n):
        k = parents[i]
        Ad_apply(R[k], P[k], twists[i], S[i])
        joint_transform(twists[i], q[i], Re, pe)
        compose(R[k], P[k], Re, pe, R[i], P[i])
        for r in range(6):
            V[i, r] = V[k, r] + S[i, r] * dq[i]
        ad_apply(V[i], S[i], tmp[0])
        for r in range(6):
            A[i, r] = A[k, r] + S[i, r] * ddq[i] + tmp[0, r] * dq[i]
        world_inertia(mass[i], h0[i], I0[i], R[i], P[i], H[i], I[i])
        # f = I a - ad_V^T (I V)
        inertia_apply(mass[i], H[i], I[i], V[i], tmp[0])
        ad_transpose_apply(V[i], tmp[0], tmp[1])
        inertia_apply(mass[i], H[i], I[i], A[i], f[i])
        for r in range(6):
            f[i, r] -= tmp[1, r]
