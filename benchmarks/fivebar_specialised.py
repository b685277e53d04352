"""The project's former spherical five-bar code, specialised, kept as a benchmark peer.

Before the generic closed chains (workbench.closed_chains) the project had
this five-bar-only implementation of seed 000 §3; benchmarks/bench_fivebar.py
times the generic code against it on the same mechanism. :func:`from_closed_chain`
builds it from the shipped closed chain (dropping the massless link 5).

The spherical five-bar as a parallel robot (seed 000 §3).

Joint order is 1..5 everywhere: q = (q1, q2, q3, q4, q5) with the active
(motor) joints ``qa = (q1, q4)`` and the passive joints (q2, q3, q5). The
spanning tree cuts joint 5, so its Chain has the four joints (1, 2, 3, 4)
and link 3 hangs from joint 3; joint 5 joins links 4 and 3.

With ``w_i`` the joint axes at the home configuration (q = 0) and ``w_i'``
the same axes at q (``w2' = e^{[w1] q1} w2``, ``w3' = e^{[w1] q1} e^{[w2] q2} w3``,
``w5' = e^{[w4] q4} w5``):

* loop closure (eq. 11), as a residual on SO(3):
  ``r(q) = log(R_45^T R_123)`` with ``R_123 = e^{[w1]q1} e^{[w2]q2} e^{[w3]q3}``
  and ``R_45 = e^{[w4]q4} e^{[w5]q5}``; its Jacobian is
  ``J_l(r)^{-1} R_45^T [w1', w2', w3', -w4', -w5']``;
* passive velocities (eq. 12): ``dq_p = J_p dq_a``, ``J_p = -g_p^{-1} g_a``,
  ``g_p = [w2', w3', -w5']``, ``g_a = [w1', -w4']``;
* motor torques (eq. 13): ``tau_pr = tau_a + J_p^T tau_p`` from the tree's
  inverse dynamics, with the cut joint's torque ``tau_5 = 0``;
* their derivative (eq. 14), with ``tau_hat = g_p^{-T} tau_p``:
  ``d tau_pr = d tau_a + J_p^T d tau_p - [tau_hat . dw1'; -tau_hat . dw4']
  + g_a^T g_p^{-T} [tau_hat . dw2'; tau_hat . dw3'; -tau_hat . dw5']``.
  The printed eq. 14 sets the last row of G_p to zero; that holds for
  ``d tau_5`` (the cut joint carries no torque) but not for ``dw5'``,
  which moves with q4 and eta_4, eta_5: the code keeps that term (finite
  differences confirm it) and writes the signs as g_a = [w1', -w4']
  demands.

lambda = [eta, q, dq, ddq] has 6 * 6 + 3 * 5 = 51 columns: one (omega, v)
eta block per joint 1..5 and one for the tool frame (the end effector on
link 3). eta moves the tree's twists as :meth:`Chain.with_eta` does; the
closure (eq. 11-12) uses the rotation parts of the axes only, as the seed
does for axes through one point (an eta translation moves a tree axis off
the centre and is felt by the tree's dynamics, not by the closure).

Every function takes one sample (shape (k,)) or N samples ((N, k)) and
returns the same batch shape (derivatives always carry the sample axis).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import ArrayLike

from workbench import lie
from workbench.arrays import as_samples
from workbench.chain import Chain
from workbench.dynamics.derivatives import rnea_derivatives, twist_derivatives
from workbench.dynamics.inverse_dynamics import inverse_dynamics
from workbench.errors import WorkbenchError
from workbench.lie import Array

JOINTS = ("joint_1", "joint_2", "joint_3", "joint_4", "joint_5")
ACTIVE = np.array([0, 3])  # q1, q4
PASSIVE = np.array([1, 2, 4])  # q2, q3, q5
TREE = np.array([0, 1, 2, 3])  # joints of the spanning tree, in Chain order
CUT_FRAME = "joint_5_on_link_4"
N_LAMBDA = 6 * 6 + 3 * 5

# Newton's method on the closure stops below this residual (rad).
_CLOSURE_TOLERANCE = 1e-14
# |det g_p| below this (unit axes) is treated as a singular configuration.
_SINGULAR = 1e-6


@dataclass(frozen=True)
class TorqueDerivatives:
    """tau_pr (N, 2) and d tau_pr / d [eta (36), q (5), dq (5), ddq (5)]."""

    tau: Array
    dtau_deta: Array  # (N, 2, 36)
    dtau_dq: Array  # (N, 2, 5)
    dtau_dv: Array  # (N, 2, 5)
    dtau_da: Array  # (N, 2, 5)

    @property
    def dtau_dlambda(self) -> Array:
        """All 51 columns, lambda = [eta, q, dq, ddq]."""
        return np.concatenate([self.dtau_deta, self.dtau_dq, self.dtau_dv, self.dtau_da], -1)


class FiveBar:
    """A spherical five-bar: its spanning-tree Chain plus the cut joint 5's axis."""

    def __init__(self, chain: Chain, cut_axis: ArrayLike):
        if chain.n != 4 or tuple(chain.parents) != (-1, 0, 1, -1):
            raise WorkbenchError(
                "a five-bar tree has joints (1, 2, 3) on one branch and 4 on the other; "
                f"got parents {tuple(chain.parents)}"
            )
        if any(kind != "revolute" for kind in chain.joint_kinds):
            raise WorkbenchError("five-bar joints must be revolute")
        self.chain = chain
        # w1..w5 at home: the rotation parts of the joint twists
        self.axes = np.vstack([chain.twists[:, :3], np.asarray(cut_axis, dtype=float)])
        self.home = np.zeros(5)
        # assembly mode: the side of the plane (w2', w5') on which w3' lies
        self.mode = float(np.sign(lie.cross(self.axes[1], self.axes[4]) @ self.axes[2]))
        self._cos23 = float(self.axes[1] @ self.axes[2])
        self._cos35 = float(self.axes[2] @ self.axes[4])

    def with_eta(self, eta: ArrayLike) -> FiveBar:
        """Joint twists and tool moved by eta (36,): blocks for joints 1..5, then the tool."""
        eta = np.asarray(eta, dtype=float)
        if eta.shape != (36,):
            raise WorkbenchError(f"five-bar eta has shape {eta.shape}; expected (36,)")
        tree_eta = np.concatenate([eta[:24], eta[30:]])
        cut_axis = lie.exp_so3(eta[24:27]) @ self.axes[4]
        return FiveBar(self.chain.with_eta(tree_eta), cut_axis)

    def with_inertias(self, inertias: ArrayLike) -> FiveBar:
        """The same mechanism with other link inertias (4, 6, 6), base frame at home."""
        return FiveBar(replace(self.chain, inertias=inertias), self.axes[4])

    # ---------------------------------------------------------- kinematics
    def _samples(self, x: ArrayLike, what: str, width: int = 5) -> tuple[Array, bool]:
        names = JOINTS if width == 5 else tuple(JOINTS[i] for i in ACTIVE)
        return as_samples(x, width, what, names)

    @functools.cached_property
    def _axis_hats(self) -> tuple[Array, Array]:
        W = lie.hat3(self.axes / np.linalg.norm(self.axes, axis=1, keepdims=True))
        return W, W @ W

    def _rotations(self, q: Array) -> tuple[Array, Array, Array]:
        """Branch rotations R_1, R_12, R_123, R_4, R_45 (5, N, 3, 3) and world axes w' (N, 5, 3)."""
        # e^{[w_i] q_i} (N, 5, 3, 3) by Rodrigues with the unit axes' [w] and [w]^2
        W, W2 = self._axis_hats
        E = np.eye(3) + np.sin(q)[..., None, None] * W + (1.0 - np.cos(q))[..., None, None] * W2
        R1 = E[:, 0]
        R12 = R1 @ E[:, 1]
        R123 = R12 @ E[:, 2]
        R4 = E[:, 3]
        R45 = R4 @ E[:, 4]
        w = np.stack(
            [
                np.broadcast_to(self.axes[0], (len(q), 3)),
                R1 @ self.axes[1],
                R12 @ self.axes[2],
                np.broadcast_to(self.axes[3], (len(q), 3)),
                R4 @ self.axes[4],
            ],
            axis=1,
        )
        return np.stack([R1, R12, R123, R4, R45]), w

    def loop_residual(self, q: ArrayLike) -> Array:
        """Eq. 11 as ``log(R_45^T R_123)`` (3,) or (N, 3): zero when the loop is closed."""
        q, batched = self._samples(q, "q")
        R, _ = self._rotations(q)
        r = lie.log_so3(np.swapaxes(R[4], -1, -2) @ R[2])
        return r if batched else r[0]

    def loop_jacobian(self, q: ArrayLike) -> Array:
        """d r / d q (N, 3, 5) of :meth:`loop_residual`."""
        q, _ = self._samples(q, "q")
        R, w = self._rotations(q)
        r = lie.log_so3(np.swapaxes(R[4], -1, -2) @ R[2])
        signed = w * np.array([1.0, 1.0, 1.0, -1.0, -1.0])[None, :, None]
        return (
            lie.left_jacobian_inverse_so3(r) @ np.swapaxes(R[4], -1, -2) @ np.swapaxes(signed, 1, 2)
        )

    def closure(self, q: ArrayLike, dq: ArrayLike, ddq: ArrayLike) -> tuple[Array, Array]:
        """Loop closure at position, velocity and acceleration level and its Jacobian.

        Returns c (N, 9) = [r(q), w_v, w_a] and dc / d[q, dq, ddq] (N, 9, 15):
        ``r`` is :meth:`loop_residual`, ``w_v = G dq`` and ``w_a = G ddq + b``
        the differences of link 3's angular velocity and acceleration
        between the two branches (world frame), with ``G = [w1', w2', w3',
        -w4', -w5']`` and ``b = (w1 dq1) x w2' dq2 + (w1 dq1 + w2' dq2) x w3' dq3
        - (w4 dq4) x w5' dq5``. A consistent closed-chain motion has c = 0.
        """
        q, _ = self._samples(q, "q")
        dq, _ = self._samples(dq, "dq")
        ddq, _ = self._samples(ddq, "ddq")
        N = len(q)
        R, w = self._rotations(q)
        sign = np.array([1.0, 1.0, 1.0, -1.0, -1.0])
        G = np.swapaxes(w * sign[None, :, None], 1, 2)  # (N, 3, 5)
        # d w_i' / d q_j = w_j' x w_i' for j before i on its branch
        dw_dq = np.zeros((N, 5, 3, 5))
        for i, before in ((1, (0,)), (2, (0, 1)), (4, (3,))):
            for j in before:
                dw_dq[:, i, :, j] = lie.cross(w[:, j], w[:, i])
        v1 = w[:, 0] * dq[:, 0, None]  # angular velocity of link 1
        v2 = v1 + w[:, 1] * dq[:, 1, None]  # link 2
        v4 = w[:, 3] * dq[:, 3, None]  # link 4
        b = (
            lie.cross(v1, w[:, 1]) * dq[:, 1, None]
            + lie.cross(v2, w[:, 2]) * dq[:, 2, None]
            - lie.cross(v4, w[:, 4]) * dq[:, 4, None]
        )
        c = np.concatenate(
            [
                lie.log_so3(np.swapaxes(R[4], -1, -2) @ R[2]),
                (G @ dq[..., None])[..., 0],
                (G @ ddq[..., None])[..., 0] + b,
            ],
            axis=1,
        )
        J = np.zeros((N, 9, 15))
        J[:, :3, :5] = self.loop_jacobian(q)
        J[:, 3:6, :5] = np.einsum("nikj,i,ni->nkj", dw_dq, sign, dq)
        J[:, 3:6, 5:10] = G
        J[:, 6:9, 10:15] = G
        db_dq = (
            _cross_columns(v1[:, :, None], dw_dq[:, 1]) * dq[:, 1, None, None]
            + _cross_columns(dw_dq[:, 1] * dq[:, 1, None, None], w[:, 2, :, None])
            * dq[:, 2, None, None]
            + _cross_columns(v2[:, :, None], dw_dq[:, 2]) * dq[:, 2, None, None]
            - _cross_columns(v4[:, :, None], dw_dq[:, 4]) * dq[:, 4, None, None]
        )
        J[:, 6:9, :5] = np.einsum("nikj,i,ni->nkj", dw_dq, sign, ddq) + db_dq
        x12 = lie.cross(w[:, 0], w[:, 1])
        x13 = lie.cross(w[:, 0], w[:, 2])
        x23 = lie.cross(w[:, 1], w[:, 2])
        x45 = lie.cross(w[:, 3], w[:, 4])
        d = dq[:, :, None]
        J[:, 6:9, 5] = x12 * d[:, 1] + x13 * d[:, 2]
        J[:, 6:9, 6] = lie.cross(v1, w[:, 1]) + x23 * d[:, 2]
        J[:, 6:9, 7] = lie.cross(v2, w[:, 2])
        J[:, 6:9, 8] = -x45 * d[:, 4]
        J[:, 6:9, 9] = -lie.cross(v4, w[:, 4])
        return c, J

    def _g(self, w: Array) -> tuple[Array, Array]:
        """g_p = [w2', w3', -w5'] (N, 3, 3) and g_a = [w1', -w4'] (N, 3, 2) (eq. 12)."""
        g_p = np.stack([w[:, 1], w[:, 2], -w[:, 4]], axis=-1)
        g_a = np.stack([w[:, 0], -w[:, 3]], axis=-1)
        return g_p, g_a

    def _checked_g_p(self, w: Array) -> tuple[Array, Array]:
        g_p, g_a = self._g(w)
        det = np.linalg.det(g_p)
        bad = np.abs(det) < _SINGULAR
        if bad.any():
            raise WorkbenchError(
                f"five-bar is singular at sample {int(np.argmax(bad))} (det g_p = "
                f"{det[bad][0]:.2e}): the passive joints are not determined by the motors"
            )
        return g_p, g_a

    def passive_jacobian(self, q: ArrayLike) -> Array:
        """J_p (N, 3, 2) with (dq2, dq3, dq5) = J_p (dq1, dq4) (eq. 12)."""
        q, _ = self._samples(q, "q")
        _, w = self._rotations(q)
        g_p, g_a = self._checked_g_p(w)
        return -np.linalg.solve(g_p, g_a)

    def velocity_map(self, q: ArrayLike) -> Array:
        """T(q) (N, 5, 2): dq = T dqa, the rows of I and J_p in joint order."""
        J_p = self.passive_jacobian(q)
        T = np.zeros((len(J_p), 5, 2))
        T[:, ACTIVE, [0, 1]] = 1.0
        T[:, PASSIVE] = J_p
        return T

    def velocities(self, q: ArrayLike, dqa: ArrayLike) -> Array:
        """All five joint velocities (N, 5) from the motor velocities."""
        q, batched = self._samples(q, "q")
        dqa, _ = self._samples(dqa, "dqa", 2)
        dq = (self.velocity_map(q) @ dqa[..., None])[..., 0]
        return dq if batched else dq[0]

    def accelerations(self, q: ArrayLike, dq: ArrayLike, ddqa: ArrayLike) -> Array:
        """All five joint accelerations (N, 5) consistent with the closure.

        Differentiating ``g_a dq_a + g_p dq_p = 0`` once more:
        ``ddq_p = J_p ddq_a - g_p^{-1} (dg_p/dt) dq_p`` (g_a is constant)
        with ``dw2'/dt = (w1 dq1) x w2'``, ``dw3'/dt = (w1 dq1 + w2' dq2) x w3'``
        and ``dw5'/dt = (w4 dq4) x w5'``.
        """
        q, batched = self._samples(q, "q")
        dq, _ = self._samples(dq, "dq")
        ddqa, _ = self._samples(ddqa, "ddqa", 2)
        _, w = self._rotations(q)
        g_p, g_a = self._checked_g_p(w)
        w_link1 = w[:, 0] * dq[:, 0, None]
        w_link2 = w_link1 + w[:, 1] * dq[:, 1, None]
        w_link4 = w[:, 3] * dq[:, 3, None]
        bias = (
            lie.cross(w_link1, w[:, 1]) * dq[:, 1, None]
            + lie.cross(w_link2, w[:, 2]) * dq[:, 2, None]
            - lie.cross(w_link4, w[:, 4]) * dq[:, 4, None]
        )
        ddq = np.empty((len(q), 5))
        ddq[:, ACTIVE] = ddqa
        rhs = (g_a @ ddqa[..., None])[..., 0] + bias
        ddq[:, PASSIVE] = -np.linalg.solve(g_p, rhs[..., None])[..., 0]
        return ddq if batched else ddq[0]

    def solve_passive(self, qa: ArrayLike, guess: ArrayLike | None = None) -> Array:
        """The five joint values (5,) or (N, 5) that close the loop for motors qa = (q1, q4).

        The end-effector axis w3' lies on two cones (its angles to w2' and
        w5' are fixed by links 2 and 3); of their two intersections the
        one on the home configuration's side of the plane (w2', w5') is
        taken (the assembly mode). q2, q5 and q3 follow in closed form and
        Newton's method on :meth:`loop_residual` polishes them to 1e-14.
        An unreachable motor pair (cones apart) or a singular one (cones
        tangent) raises WorkbenchError naming the sample. ``guess`` is
        (N, 5) picks, for each passive joint, the value nearest to it among
        the equivalent ones (2 pi apart), to keep trajectories continuous.
        """
        qa, batched = self._samples(qa, "qa", 2)
        N = len(qa)
        q = np.zeros((N, 5))
        q[:, ACTIVE] = qa
        _, w = self._rotations(q)
        a, b = w[:, 1], w[:, 4]
        d = np.sum(a * b, axis=-1)
        n = lie.cross(a, b)
        nn = np.sum(n * n, axis=-1)
        if np.any(nn < _SINGULAR**2):
            s = int(np.argmax(nn < _SINGULAR**2))
            raise WorkbenchError(
                f"five-bar is singular at sample {s}: axes 2 and 5 are aligned for motor "
                f"angles ({qa[s, 0]:.6g}, {qa[s, 1]:.6g})"
            )
        alpha = (self._cos23 - d * self._cos35) / nn
        beta = (self._cos35 - d * self._cos23) / nn
        in_plane = alpha[:, None] * a + beta[:, None] * b
        radicand = 1.0 - np.sum(in_plane * in_plane, axis=-1)
        unreachable = radicand < -1e-12
        if unreachable.any():
            s = int(np.argmax(unreachable))
            raise WorkbenchError(
                f"motor angles (q1, q4) = ({qa[s, 0]:.6g}, {qa[s, 1]:.6g}) at sample {s} "
                "are outside the five-bar's workspace: links 2 and 3 cannot meet"
            )
        gamma = self.mode * np.sqrt(np.maximum(radicand, 0.0) / nn)
        u = in_plane + gamma[:, None] * n  # w3'
        R1 = lie.exp_so3(qa[:, 0, None] * self.axes[0])
        R4 = lie.exp_so3(qa[:, 1, None] * self.axes[3])
        q[:, 1] = _angle_about(a, R1 @ self.axes[2], u)
        q[:, 4] = _angle_about(b, R4 @ self.axes[2], u)
        R, _ = self._rotations(q)
        q[:, 2] = _angle_about(
            np.broadcast_to(self.axes[2], (N, 3)),
            np.broadcast_to(_perpendicular(self.axes[2]), (N, 3)),
            np.swapaxes(R[1], -1, -2) @ R[4] @ _perpendicular(self.axes[2]),
        )
        for _ in range(8):
            r = self.loop_residual(q)
            if np.abs(r).max() < _CLOSURE_TOLERANCE:
                break
            _, w = self._rotations(q)
            self._checked_g_p(w)
            J = self.loop_jacobian(q)[:, :, PASSIVE]
            q[:, PASSIVE] -= np.linalg.solve(J, r[..., None])[..., 0]
        _, w = self._rotations(q)
        self._checked_g_p(w)
        if guess is not None:
            guess, _ = self._samples(guess, "guess")
            q[:, PASSIVE] += 2 * np.pi * np.round((guess - q)[:, PASSIVE] / (2 * np.pi))
        return q if batched else q[0]

    # ----------------------------------------------------------- dynamics
    def torque(
        self, q: ArrayLike, dq: ArrayLike, ddq: ArrayLike, f_tool: ArrayLike | None = None
    ) -> Array:
        """Motor torques tau_pr (N, 2) for joints 1 and 4 (eq. 13); q, dq, ddq (N, 5)."""
        q, batched = self._samples(q, "q")
        dq, _ = self._samples(dq, "dq")
        ddq, _ = self._samples(ddq, "ddq")
        tau_tr = inverse_dynamics(self.chain, q[:, TREE], dq[:, TREE], ddq[:, TREE], f_tool)
        J_p = self.passive_jacobian(q)
        tau_p = np.stack([tau_tr[:, 1], tau_tr[:, 2], np.zeros(len(tau_tr))], axis=-1)
        tau = tau_tr[:, [0, 3]] + (np.swapaxes(J_p, -1, -2) @ tau_p[..., None])[..., 0]
        return tau if batched else tau[0]

    def torque_regressor(self, q: ArrayLike, dq: ArrayLike, ddq: ArrayLike) -> Array:
        """d tau_pr / d phi (N, 2, 40): tau_pr = Y phi, phi = ``chain.phi.ravel()`` (eq. 13).

        The tree's joint torque regressor (Pinocchio, project phi order, base
        frame at home) mapped by ``[I J_p^T]`` like the torques themselves.
        """
        from workbench.dynamics.regressor import torque_regressor

        q, batched = self._samples(q, "q")
        dq, _ = self._samples(dq, "dq")
        ddq, _ = self._samples(ddq, "ddq")
        Y = torque_regressor(self.chain, q[:, TREE], dq[:, TREE], ddq[:, TREE])  # (N, 4, 40)
        J_p = self.passive_jacobian(q)  # rows q2, q3, q5; the cut joint 5 carries no torque
        Y_pr = Y[:, [0, 3]] + np.swapaxes(J_p[:, :2], -1, -2) @ Y[:, [1, 2]]
        return Y_pr if batched else Y_pr[0]

    def torque_derivatives(
        self,
        q: ArrayLike,
        dq: ArrayLike,
        ddq: ArrayLike,
        f_tool: ArrayLike | None = None,
        with_eta: bool = True,
    ) -> TorqueDerivatives:
        """tau_pr and d tau_pr / d lambda for N samples (eq. 14, see the module docstring).

        ``with_eta=False`` skips the eta columns (left zero), a third of the
        work, for callers that need the state partials only.
        """
        q, _ = self._samples(q, "q")
        dq, _ = self._samples(dq, "dq")
        ddq, _ = self._samples(ddq, "ddq")
        N = len(q)
        state = q[:, TREE], dq[:, TREE], ddq[:, TREE]
        S = np.zeros((N, 5, N_LAMBDA))  # tree torques (tau_5 = 0) against lambda
        if with_eta:
            tree = twist_derivatives(self.chain, *state, f_tool)
            tau_tr = tree.tau
            partials = tree.dtau_dq, tree.dtau_dv, tree.dtau_da
            S[:, :4, :24] = tree.dtau_deta[..., :24]
            S[:, :4, 30:36] = tree.dtau_deta[..., 24:]
        else:
            tau_tr = np.atleast_2d(inverse_dynamics(self.chain, *state, f_tool))
            partials = rnea_derivatives(self.chain, *state, f_tool)
        for k, block in enumerate(partials):
            S[:, :4, 36 + 5 * k + TREE] = block
        R, w = self._rotations(q)
        g_p, g_a = self._checked_g_p(w)
        J_p = -np.linalg.solve(g_p, g_a)
        tau_p = np.stack([tau_tr[:, 1], tau_tr[:, 2], np.zeros(N)], axis=-1)
        tau_hat = np.linalg.solve(np.swapaxes(g_p, -1, -2), tau_p[..., None])[..., 0]
        dw = self._axis_derivatives(q, R, w)  # (N, 5, 3, 51)
        contracted = np.einsum("nk,nikl->nil", tau_hat, dw)  # tau_hat . dw_i'
        geometric_a = np.stack([contracted[:, 0], -contracted[:, 3]], axis=1)
        geometric_p = np.stack([contracted[:, 1], contracted[:, 2], -contracted[:, 4]], axis=1)
        G = np.swapaxes(g_a, -1, -2) @ np.linalg.solve(np.swapaxes(g_p, -1, -2), geometric_p)
        D = S[:, ACTIVE] + np.swapaxes(J_p, -1, -2) @ S[:, [1, 2, 4]] - geometric_a + G
        tau = tau_tr[:, [0, 3]] + (np.swapaxes(J_p, -1, -2) @ tau_p[..., None])[..., 0]
        return TorqueDerivatives(tau, D[..., :36], D[..., 36:41], D[..., 41:46], D[..., 46:])

    def _axis_derivatives(self, q: Array, R: Array, w: Array) -> Array:
        """d w_i' / d lambda (N, 5, 3, 51): rotation parts of eta and q only.

        On each branch, a rotation ``d omega`` of eta_j turns the axes after
        joint j by ``(R_before_j - R_after_j) d omega`` (world frame) and
        joint j's own axis by ``R_before_j d omega``; q_j turns the axes
        after it about ``w_j'``.
        """
        N = len(q)
        eye = np.broadcast_to(np.eye(3), (N, 3, 3))
        before = [eye, R[0], R[1], eye, R[3]]  # rotation before joint i
        after = [R[0], R[1], R[2], R[3], R[4]]  # rotation after joint i
        branch_before = {0: [], 1: [0], 2: [0, 1], 3: [], 4: [3]}
        dw = np.zeros((N, 5, 3, N_LAMBDA))
        for i in range(5):
            W = lie.hat3(w[:, i])
            dw[:, i, :, 6 * i : 6 * i + 3] = -W @ before[i]
            for j in branch_before[i]:
                dw[:, i, :, 6 * j : 6 * j + 3] = -W @ (before[j] - after[j])
                dw[:, i, :, 36 + j] = lie.cross(w[:, j], w[:, i])
        return dw

    # ------------------------------------------------------- end effector
    def pointing(self, q: ArrayLike) -> Array:
        """End-effector pointing direction (the tool frame's z axis) in the base frame."""
        q, batched = self._samples(q, "q")
        R, _ = self._rotations(q)
        p = R[2] @ self.chain.tool_frame[:3, 2]
        return p if batched else p[0]

    def pointing_derivative(self, q: ArrayLike) -> Array:
        """d pointing / d q (N, 3, 5): partials in the five joint values (w_j' x p, j = 1, 2, 3)."""
        q, _ = self._samples(q, "q")
        R, w = self._rotations(q)
        p = R[2] @ self.chain.tool_frame[:3, 2]
        dp_dq = np.zeros((len(q), 3, 5))
        for j in range(3):
            dp_dq[:, :, j] = lie.cross(w[:, j], p)
        return dp_dq

    def pointing_jacobian(self, q: ArrayLike) -> Array:
        """d pointing / d qa (N, 3, 2) along the closed loop (passive joints follow)."""
        return self.pointing_derivative(q) @ self.velocity_map(q)

    # ------------------------------------------------- forward dynamics
    def forward_dynamics(self, q: ArrayLike, dqa: ArrayLike, tau: ArrayLike) -> tuple[Array, Array]:
        """Motor accelerations (N, 2) and all joint accelerations (N, 5) under motor torques.

        Reduced to the two active coordinates: with dq = T dqa and
        ddq = T ddqa + c(q, dq), the motor torques are affine in ddqa,
        ``tau = M_r ddqa + b``; M_r's columns come from :meth:`torque` at
        unit motor accelerations without velocity and gravity terms.
        """
        q, _ = self._samples(q, "q")
        dqa, _ = self._samples(dqa, "dqa", 2)
        tau, _ = self._samples(tau, "tau", 2)
        N = len(q)
        dq = self.velocities(q, dqa)
        zero = np.zeros((N, 2))
        ddq_bias = self.accelerations(q, dq, zero)
        b = self.torque(q, dq, ddq_bias)
        gravity_only = self.torque(q, np.zeros((N, 5)), np.zeros((N, 5)))
        T = self.velocity_map(q)
        M_r = np.stack(
            [self.torque(q, np.zeros((N, 5)), T[:, :, k]) - gravity_only for k in range(2)],
            axis=-1,
        )
        ddqa = np.linalg.solve(M_r, (tau - b)[..., None])[..., 0]
        return ddqa, self.accelerations(q, dq, ddqa)

    def simulate(
        self, t: ArrayLike, tau: ArrayLike, q0: ArrayLike, dqa0: ArrayLike, substeps: int = 4
    ) -> tuple[Array, Array]:
        """Integrate the closed chain under motor torques (classical Runge-Kutta 4).

        ``t`` (K,) times, ``tau`` (K, 2) motor torques interpolated linearly
        between them, ``q0`` (5,) a closed configuration, ``dqa0`` (2,) motor
        velocities. The state is (qa, dqa); the passive joints are solved at
        every stage. Returns q (K, 5) and dq (K, 5).
        """
        t = np.asarray(t, dtype=float)
        tau, _ = self._samples(tau, "tau", 2)
        q0, _ = self._samples(q0, "q0")
        qa = q0[0, ACTIVE].copy()
        dqa = np.asarray(dqa0, dtype=float).copy()
        qs, dqs = [q0[0].copy()], [self.velocities(q0[0], dqa)]

        def rhs(time: float, x: Array) -> Array:
            torque = np.array([np.interp(time, t, tau[:, k]) for k in range(2)])
            q = self.solve_passive(x[:2])
            ddqa, _ = self.forward_dynamics(q, x[2:], torque)
            return np.concatenate([x[2:], ddqa[0]])

        x = np.concatenate([qa, dqa])
        for k in range(len(t) - 1):
            h = (t[k + 1] - t[k]) / substeps
            for m in range(substeps):
                time = t[k] + m * h
                k1 = rhs(time, x)
                k2 = rhs(time + h / 2, x + h / 2 * k1)
                k3 = rhs(time + h / 2, x + h / 2 * k2)
                k4 = rhs(time + h, x + h * k3)
                x = x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
            q = self.solve_passive(x[:2])
            qs.append(q)
            dqs.append(self.velocities(q, x[2:]))
        return np.array(qs), np.array(dqs)


def from_closed_chain(model) -> FiveBar:
    """The specialised five-bar of the shipped closed chain (its tree without joint 5)."""
    tree = model.tree
    keep = slice(0, 4)
    chain = replace(
        tree,
        joint_names=tree.joint_names[keep], link_names=tree.link_names[keep],
        parents=tree.parents[keep], joint_kinds=tree.joint_kinds[keep], axes=tree.axes[keep],
        joint_frames=tree.joint_frames[keep], inertias=tree.inertias[keep],
        lower=tree.lower[keep], upper=tree.upper[keep],
        velocity_limit=tree.velocity_limit[keep], effort_limit=tree.effort_limit[keep],
        frames=(),
    )  # fmt: skip
    return FiveBar(chain, tree.twists[4, :3])


def _cross_columns(a: Array, b: Array) -> Array:
    """Cross products of the columns: axis 1 holds the 3-vectors (..., 3, k)."""
    return np.swapaxes(lie.cross(np.swapaxes(a, 1, -1), np.swapaxes(b, 1, -1)), 1, -1)


def _perpendicular_projector(axis: Array) -> Array:
    """1 - a a^T: removes the component along the unit axis a."""
    return np.eye(3) - np.outer(axis, axis)


def _perpendicular(v: Array) -> Array:
    helper = np.array([1.0, 0.0, 0.0]) if abs(v[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    p = helper - v * (helper @ v)
    return p / np.linalg.norm(p)


def _angle_about(axis: Array, x: Array, y: Array) -> Array:
    """Angle of the rotation about unit ``axis`` that carries x to y (rows)."""
    cross = np.sum(axis * lie.cross(x, y), axis=-1)
    dot = np.sum(x * y, axis=-1) - np.sum(axis * x, axis=-1) * np.sum(axis * y, axis=-1)
    return np.arctan2(cross, dot)
