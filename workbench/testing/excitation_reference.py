"""The excitation criteria written in CasADi SX, independent of the project's kernels.

Inverse dynamics in body frames with symbolic inertial parameters phi (the
recursion of :mod:`workbench.testing.casadi_reference`), the regressor
``Y = d tau / d phi`` and ``d tau / d eta`` by CasADi, the joint-frame
standard columns by the 10 x 10 motion matrix of each joint frame, Coulomb
friction as ``tanh``, the trajectory as the Fourier basis times theta,
``F = sum X^T X``, ``log det F`` through an SX Cholesky factorisation and
``log cond`` through the eigenvalues, and the gradient by ``casadi.gradient``.
Used by tests/test_excitation_sx.py and benchmarks/bench_excitation.py;
:func:`analytic_gradient` and :func:`central_gradient` give the project's
gradient and central differences of its criterion for comparison.
"""

from __future__ import annotations

import re

import casadi as ca
import numpy as np

import workbench as wb
from workbench import inertia
from workbench.excitation.design import DesignProblem
from workbench.excitation.trajectory import FourierSpace
from workbench.identification.torque_model import TorqueModel
from workbench.testing.casadi_reference import Ad, ad, exp_joint, exp_series, inverse

_TO_STANDARD = np.array([4, 7, 8, 5, 9, 6, 1, 2, 3, 0])


def _torques(chain: wb.Chain, eta, phi, q, dq, ddq):
    """tau (n,) of chain with joint twists Ad_{exp(eta_i)} A_i and inertias phi (10 n,), base
    frame at q = 0, project order [m, h, Ixx, Iyy, Izz, Ixy, Ixz, Iyz] (body-frame recursion)."""
    n = chain.n
    A = [Ad(exp_series(eta[6 * i : 6 * i + 6])) @ ca.DM(chain.twists[i]) for i in range(n)]
    G = []
    for i in range(n):
        p = phi[10 * i : 10 * i + 10]
        m, h = p[0], p[1:4]
        I = ca.vertcat(
            ca.horzcat(p[4], p[7], p[8]), ca.horzcat(p[7], p[5], p[9]), ca.horzcat(p[8], p[9], p[6])
        )
        H = ca.vertcat(
            ca.horzcat(0, -h[2], h[1]), ca.horzcat(h[2], 0, -h[0]), ca.horzcat(-h[1], h[0], 0)
        )
        G.append(ca.vertcat(ca.horzcat(I, H), ca.horzcat(H.T, m * ca.SX.eye(3))))
    T, V, dV = [None] * n, [None] * n, [None] * n
    for i in range(n):
        p = chain.parents[i]
        T[i] = exp_joint(A[i], q[i])
        X = Ad(inverse(T[i]))
        Vp = ca.SX.zeros(6) if p < 0 else V[p]
        dVp = ca.vertcat(ca.SX.zeros(3), -ca.DM(chain.gravity)) if p < 0 else dV[p]
        V[i] = X @ Vp + A[i] * dq[i]
        dV[i] = X @ dVp + A[i] * ddq[i] + ad(V[i]) @ A[i] * dq[i]
    F = [G[i] @ dV[i] - ad(V[i]).T @ G[i] @ V[i] for i in range(n)]
    tau = [None] * n
    for i in reversed(range(n)):
        tau[i] = A[i].T @ F[i]
        p = chain.parents[i]
        if p >= 0:
            F[p] = F[p] + Ad(inverse(T[i])).T @ F[i]
    return ca.vertcat(*tau)


def _row_function(chain: wb.Chain, model: TorqueModel, select, speed, eta_directions=None):
    """SX Function (q, dq, ddq) -> W (n, c): [d tau/d eta U,] the model's columns ``select``."""
    n = chain.n
    q, dq, ddq = (ca.SX.sym(s, n) for s in ("q", "dq", "ddq"))
    eta = ca.SX.sym("eta", 6 * n)
    phi = ca.SX.sym("phi", 10 * n)
    tau = _torques(chain, eta, phi, q, dq, ddq)
    Y = ca.substitute(ca.jacobian(tau, phi), eta, ca.DM.zeros(6 * n))
    L = inertia.motion_matrix(chain.joint_frames)
    grouped = model.order[select]
    columns = []
    drive_names = model.drives.names
    for g in grouped:
        if g < 10 * n:
            link, p = divmod(int(g), 10)
            unit = np.zeros(10 * n)
            unit[10 * link : 10 * link + 10] = L[link] @ np.eye(10)[_TO_STANDARD[p]]
            columns.append(Y @ ca.DM(unit))
        else:
            kind, joint = re.fullmatch(r"([A-Za-z]+)(\d+)", drive_names[int(g) - 10 * n]).groups()
            j = int(joint) - 1
            value = {"fv": dq[j], "fs": ca.tanh(3 * dq[j] / speed), "Ia": ddq[j], "off": 1.0}
            column = ca.SX.zeros(n)
            column[j] = value[kind]
            columns.append(column)
    blocks = []
    if eta_directions is not None:
        phi0 = np.concatenate([chain.phi[i] for i in range(n)])
        J = ca.substitute(
            ca.jacobian(tau, eta), ca.vertcat(eta, phi), ca.DM(np.r_[np.zeros(6 * n), phi0])
        )
        blocks.append(J @ ca.DM(eta_directions[: 6 * n]))
    blocks.append(ca.horzcat(*columns))
    return ca.Function("rows", [q, dq, ddq], [ca.horzcat(*blocks)])


def _cholesky_logdet(F):
    p = F.shape[0]
    L = [[None] * p for _ in range(p)]
    total = 0
    for j in range(p):
        s = F[j, j] - sum(L[j][k] ** 2 for k in range(j))
        L[j][j] = ca.sqrt(s)
        total = total + ca.log(s)
        for i in range(j + 1, p):
            L[i][j] = (F[i, j] - sum(L[i][k] * L[j][k] for k in range(j))) / L[j][j]
    return total


def criterion_functions(information, space: FourierSpace, points: int, twist: bool = False):
    """CasADi Functions theta -> (-log det F, gradient) built in SX (module docstring)."""
    chain = information.chain
    if twist:
        model, select = information.linear.model, information.linear.select
        rows = _row_function(chain, model, select, 0.05, information.directions)
    else:
        model, select = information.model, information.base.independent
        rows = _row_function(chain, model, select, 0.05)
    speed = model.drives.min_speed
    assert speed is None or np.allclose(speed, 0.05)
    n, m = space.n, space.per_joint
    theta = ca.SX.sym("theta", n * m)
    z = ca.reshape(theta, m, n).T  # (n, m), joint-major like theta.reshape(n, m)
    (Bq, Bv, Ba), offset = space.reduced_basis(space.collocation_times(points))
    sigma = information.sigma
    F = 0
    for k in range(points):
        q = ca.DM(offset[0][k]) + z @ ca.DM(Bq[k])
        dq = ca.DM(offset[1][k]) + z @ ca.DM(Bv[k])
        ddq = ca.DM(offset[2][k]) + z @ ca.DM(Ba[k])
        X = ca.diag(ca.DM(1 / sigma)) @ rows(q, dq, ddq)
        F = F + X.T @ X
    J = -_cholesky_logdet(F)
    return ca.Function("logdet", [theta], [J, ca.gradient(J, theta)])


def analytic_gradient(information, space, points, theta, criterion="logdet"):
    problem = DesignProblem(information, space, None, criterion, points)
    return problem.objective(theta), problem.objective_gradient(theta)


def central_gradient(
    information, space, points, theta, criterion="logdet", step=1e-6, components=None
):
    """Central differences of the criterion along ``components`` of theta (default all)."""
    problem = DesignProblem(information, space, None, criterion, points)
    g = np.full_like(theta, np.nan)
    for i in range(theta.size) if components is None else components:
        e = np.zeros_like(theta)
        e[i] = step
        g[i] = (problem.objective(theta + e) - problem.objective(theta - e)) / (2 * step)
    return g
