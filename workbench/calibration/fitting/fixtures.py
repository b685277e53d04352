"""Fixture residuals: a marker resting at an unknown world point or on an unknown plane.

A fixture (:class:`workbench.calibration.log.Fixture`) says that in some
samples the origin ``p_i`` of a marker, predicted by the kinematic model in
the world (device) frame, is at one point ``c`` or on one plane ``n . x =
d``. Its state (F, 4): ``(c, 0)`` for a point, ``(n, d)`` (|n| = 1) for a
plane. Residuals, all in m:

    point:     p_i - c                       (3 per sample)
    plane:     n . p_i - d                   (1 per sample)
    distance:  w (|c_a - c_b| - L)           (1 per known distance L)

with ``w = sqrt(N_a + N_b)``, the distance weighing as much as the
positions of the two fixtures' samples together (it is a manufactured
dimension, known far better than one sample). Steps (3 per fixture): ``c +=
delta``; ``n <- exp([t]) n`` with ``t = a t_1 + b t_2`` in the tangent
basis of n (:func:`tangent_basis`) and ``d += delta_d``; so ``d r / d(a, b) =
t_k . (n x p)`` and ``d r / d delta_d = -1``.

Gauge. Without a measured marker nothing ties the robot to the world: moving
the robot (all joint twists ``Ad_G A``, marker placements ``G M``) together
with every fixture (``c <- G c``; ``n <- R n``, ``d <- d + n . t``) by any
``G = (R, t)`` leaves every distance, spread and plane residual as it was (6
directions: :func:`gauge_steps`); and without a known distance, scaling the
robot and the fixtures together (:func:`scale_steps`) changes nothing but
the size of the residuals, so the fit would shrink the robot: both are held
(:meth:`workbench.calibration.kinematic.KinematicProblem.free`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from workbench import lie
from workbench.lie import Array

STEP = 3  # step entries per fixture


def distance_weight(count_a: int, count_b: int) -> float:
    """The weight w of a distance residual between fixtures with these sample counts."""
    return float(np.sqrt(count_a + count_b))


def tangent_basis(n: Array) -> Array:
    """Two unit vectors (2, 3) orthogonal to the unit vector n and to each other."""
    helper = np.eye(3)[int(np.argmin(np.abs(n)))]
    t1 = lie.cross(n, helper)
    t1 /= np.linalg.norm(t1)
    return np.stack([t1, lie.cross(n, t1)])


def start_states(kinds: Sequence[str], points: Sequence[Array]) -> Array:
    """States (F, 4) that fit each fixture's predicted points (N_f, 3) best: the centroid, or
    the least-squares plane (normal pointing away from the origin)."""
    states = np.zeros((len(kinds), 4))
    for f, (kind, p) in enumerate(zip(kinds, points, strict=True)):
        centre = p.mean(axis=0)
        if kind == "point":
            states[f, :3] = centre
            continue
        n = np.linalg.svd(p - centre, full_matrices=True)[2][-1]
        if n @ centre < 0:
            n = -n
        states[f] = [*n, n @ centre]
    return states


def retract(kinds: Sequence[str], states: Array, step: Array) -> Array:
    """The states moved by ``step`` (3 F,) (module docstring)."""
    out = states.copy()
    for f, kind in enumerate(kinds):
        s = step[STEP * f : STEP * f + STEP]
        if kind == "point":
            out[f, :3] += s
            continue
        n = states[f, :3]
        t = s[:2] @ tangent_basis(n)
        angle = np.linalg.norm(t)
        if angle > 0:  # Rodrigues on the unit normal
            k = t / angle
            n = (
                n * np.cos(angle)
                + lie.cross(k, n) * np.sin(angle)
                + k * (k @ n) * (1 - np.cos(angle))
            )
        out[f] = [*(n / np.linalg.norm(n)), states[f, 3] + s[2]]
    return out


def residual_rows(
    kinds: Sequence[str],
    states: Array,
    points: Sequence[Array],
    jacobians: Sequence[Array] | None,
    distances: Sequence[tuple[int, int, float]],
    width: int,
) -> tuple[Array, Array | None]:
    """Residuals (m,) and, with ``jacobians``, their rows (m, width + 3 F).

    ``points[f]`` (N_f, 3) are fixture f's predicted marker origins and
    ``jacobians[f]`` (N_f, 3, width) their derivatives with respect to the
    model's other parameters; ``distances`` holds (fixture a, fixture b, L).
    """
    F = len(kinds)
    total = width + STEP * F
    r_parts: list[Array] = []
    J_parts: list[Array] = []
    for f, (kind, p) in enumerate(zip(kinds, points, strict=True)):
        col = width + STEP * f
        if kind == "point":
            r_parts.append((p - states[f, :3]).ravel())
            if jacobians is not None:
                J = np.zeros((p.shape[0], 3, total))
                J[:, :, :width] = jacobians[f]
                J[:, :, col : col + 3] = -np.eye(3)
                J_parts.append(J.reshape(-1, total))
            continue
        n, d = states[f, :3], states[f, 3]
        r_parts.append(p @ n - d)
        if jacobians is not None:
            J = np.zeros((p.shape[0], total))
            J[:, :width] = np.einsum("k,nkp->np", n, jacobians[f])
            J[:, col : col + 2] = lie.cross(n, p) @ tangent_basis(n).T
            J[:, col + 2] = -1.0
            J_parts.append(J)
    for a, b, length in distances:
        w = distance_weight(points[a].shape[0], points[b].shape[0])
        gap = states[a, :3] - states[b, :3]
        norm = np.linalg.norm(gap)
        r_parts.append(np.array([w * (norm - length)]))
        if jacobians is not None:
            J = np.zeros((1, total))
            u = gap / norm if norm > 0 else np.zeros(3)
            J[0, width + STEP * a : width + STEP * a + 3] = w * u
            J[0, width + STEP * b : width + STEP * b + 3] = -w * u
            J_parts.append(J)
    r = np.concatenate(r_parts) if r_parts else np.zeros(0)
    if jacobians is None:
        return r, None
    return r, (np.concatenate(J_parts) if J_parts else np.zeros((0, total)))


def gauge_steps(kinds: Sequence[str], states: Array, xi: Array) -> Array:
    """The fixture steps (3 F,) of moving the world by the twist ``xi`` = (omega, v)."""
    w, v = xi[:3], xi[3:]
    out = np.zeros(STEP * len(kinds))
    for f, kind in enumerate(kinds):
        if kind == "point":
            out[STEP * f : STEP * f + 3] = lie.cross(w, states[f, :3]) + v
        else:
            n = states[f, :3]
            out[STEP * f : STEP * f + 2] = tangent_basis(n) @ w
            out[STEP * f + 2] = n @ v
    return out


def scale_steps(kinds: Sequence[str], states: Array) -> Array:
    """The fixture steps (3 F,) of scaling the world about its origin (d scale = 1)."""
    out = np.zeros(STEP * len(kinds))
    for f, kind in enumerate(kinds):
        if kind == "point":
            out[STEP * f : STEP * f + 3] = states[f, :3]
        else:
            out[STEP * f + 2] = states[f, 3]
    return out


PLANE_SPAN = 0.005  # m: a plane's samples spread less in their second direction span no plane


def plane_span(points: Array) -> Array:
    """RMS spread (2,) in m of points (N, 3) about their centroid along their two largest
    principal directions: a plane fixture's samples fix its normal only where both exceed
    :data:`PLANE_SPAN` (on a line they leave one direction of it free, at a point two)."""
    centred = points - points.mean(axis=0)
    return np.linalg.svd(centred, compute_uv=False)[:2] / np.sqrt(len(points))


def spread(points: Array) -> float:
    """Mean distance (m) of points (N, 3) to their centroid (a point fixture's spread)."""
    return float(np.mean(np.linalg.norm(points - points.mean(axis=0), axis=1)))
