"""Time derivatives of the equations of motion (issue 9) against FD, CasADi AD, Pinocchio
and the 2R closed forms of seed 003 §6.1."""

from __future__ import annotations

from dataclasses import replace

import casadi as ca
import numpy as np
import pinocchio as pin
import pytest

import workbench as wb
from workbench.dynamics.matrices import (
    coriolis_matrix,
    gravity_torques,
    mass_matrix,
    task_space_dynamics,
)
from workbench.dynamics.time_derivatives import (
    flexible_joint_motor_trajectory,
    mass_matrix_derivatives,
    time_derivatives,
)
from workbench.models.pinocchio_conversion import shared_model
from workbench.testing.casadi_reference import inverse_dynamics_function

ROBOTS = ("iiwa", "planar_2r", "talos_upper_body")
H = 1e-4  # central-difference step in time


def relative_error(a, b):
    return np.abs(a - b).max() / max(1.0, np.abs(b).max())


def sines(n: int, seed: int):
    """q(t) = sum_m a_m sin(w_m t + p_m) per joint; returns d^k q / dt^k at times t (T, 1)."""
    rng = np.random.default_rng(seed)
    a, w, p = rng.normal(size=(3, n)), rng.uniform(0.5, 2.0, (3, n)), rng.uniform(0, 6, (3, n))

    def derivative(t, k):
        return sum(a[m] * w[m] ** k * np.sin(w[m] * t + p[m] + k * np.pi / 2) for m in range(3))

    return derivative


TIMES = np.linspace(0.0, 2.0, 7)[:, None]


@pytest.mark.parametrize("name", ROBOTS)
def test_against_central_differences_in_time(chains, name):
    chain = chains[name]
    traj = sines(chain.n, seed=4)
    tau, tau_dot, tau_ddot = time_derivatives(chain, *(traj(TIMES, k) for k in range(5)))

    def ID(shift):
        return wb.inverse_dynamics(chain, *(traj(TIMES + shift, k) for k in range(3)))

    assert relative_error(tau, ID(0.0)) < 1e-12
    assert relative_error(tau_dot, (ID(H) - ID(-H)) / (2 * H)) < 1e-6
    assert relative_error(tau_ddot, (ID(H) - 2 * ID(0.0) + ID(-H)) / H**2) < 1e-6


@pytest.mark.parametrize("name", ROBOTS)
def test_against_casadi_automatic_differentiation(chains, name):
    """AD of the SX RNEA of tests/casadi_reference.py along q(t) = a polynomial of degree 5."""
    chain = chains[name]
    n = chain.n
    coefficients = np.random.default_rng(5).normal(size=(6, n)) / np.arange(1, 7)[:, None]
    t = ca.SX.sym("t")
    powers = [t**k for k in range(6)]

    def q_of_t(order):  # d^order q / dt^order, SX (n,)
        terms = [
            ca.DM(coefficients[k]) * np.prod(range(k - order + 1, k + 1)) * powers[k - order]
            for k in range(order, 6)
        ]
        return sum(terms[1:], terms[0])

    tau = inverse_dynamics_function(chain)(
        ca.DM.zeros(6 * (n + 1)), q_of_t(0), q_of_t(1), q_of_t(2)
    )
    tau_dot = ca.jacobian(tau, t)
    f = ca.Function("f", [t], [tau, tau_dot, ca.jacobian(tau_dot, t)])
    f_q = ca.Function("q", [t], [ca.horzcat(*(q_of_t(k) for k in range(5)))])
    for time in (-0.7, 0.3, 1.1):
        expected = [np.asarray(x).ravel() for x in f(time)]
        got = time_derivatives(chain, *np.asarray(f_q(time)).T)
        for ours, theirs in zip(got, expected, strict=True):
            assert relative_error(ours, theirs) < 1e-10


def two_r_closed_form(q, dq, ddq, dddq, g=9.81, L1=0.5, L2=0.4, m1=2.0, m2=1.5):
    """tau and tau_dot of the 2R of seed 003 §6.1 (point masses at the link ends, gravity -y).

    The extracted paper text lost the formulas; these are the standard 2R
    equations it quotes ("identical to [16]") and their time derivative,
    derived by hand with the product rule (a = m2 L1 L2).
    """
    q1, q2 = q[..., 0], q[..., 1]
    d1, d2 = dq[..., 0], dq[..., 1]
    a1, a2 = ddq[..., 0], ddq[..., 1]
    j1, j2 = dddq[..., 0], dddq[..., 1]
    a = m2 * L1 * L2
    s2, c2, s1, c1 = np.sin(q2), np.cos(q2), np.sin(q1), np.cos(q1)
    s12, c12 = np.sin(q1 + q2), np.cos(q1 + q2)
    M11 = (m1 + m2) * L1**2 + m2 * L2**2 + 2 * a * c2
    M12 = m2 * L2**2 + a * c2
    M22 = m2 * L2**2
    tau = np.stack(
        [
            M11 * a1 + M12 * a2 - a * s2 * (2 * d1 * d2 + d2**2)
            + (m1 + m2) * g * L1 * c1 + m2 * g * L2 * c12,
            M12 * a1 + M22 * a2 + a * s2 * d1**2 + m2 * g * L2 * c12,
        ],
        axis=-1,
    )  # fmt: skip
    tau_dot = np.stack(
        [
            -2 * a * s2 * d2 * a1 + M11 * j1 - a * s2 * d2 * a2 + M12 * j2
            - a * c2 * d2 * (2 * d1 * d2 + d2**2)
            - 2 * a * s2 * (a1 * d2 + d1 * a2 + d2 * a2)
            - (m1 + m2) * g * L1 * s1 * d1 - m2 * g * L2 * s12 * (d1 + d2),
            -a * s2 * d2 * a1 + M12 * j1 + M22 * j2 + a * c2 * d2 * d1**2
            + 2 * a * s2 * d1 * a1 - m2 * g * L2 * s12 * (d1 + d2),
        ],
        axis=-1,
    )  # fmt: skip
    return tau, tau_dot


def test_planar_2r_closed_forms(chains):
    """Seed 003 §6.1 with its gravity along -y (the shipped URDF keeps Pinocchio's -z).

    tau and tau_dot are the closed forms above; tau_ddot is the central
    difference in time of the closed-form tau_dot.
    """
    chain = replace(chains["planar_2r"], gravity=np.array([0.0, -9.81, 0.0]))
    traj = sines(2, seed=6)
    tau, tau_dot, tau_ddot = time_derivatives(chain, *(traj(TIMES, k) for k in range(5)))
    expected_tau, expected_dot = two_r_closed_form(*(traj(TIMES, k) for k in range(4)))
    assert relative_error(tau, expected_tau) < 1e-13
    assert relative_error(tau_dot, expected_dot) < 1e-13
    plus = two_r_closed_form(*(traj(TIMES + H, k) for k in range(4)))[1]
    minus = two_r_closed_form(*(traj(TIMES - H, k) for k in range(4)))[1]
    assert relative_error(tau_ddot, (plus - minus) / (2 * H)) < 1e-7


@pytest.mark.parametrize("name", ROBOTS)
def test_matrices_against_pinocchio(chains, name):
    chain = chains[name]
    traj = sines(chain.n, seed=7)
    q, dq, ddq = (traj(TIMES, k) for k in range(3))
    model = shared_model(chain)
    data = model.createData()
    M, C, g = mass_matrix(chain, q), coriolis_matrix(chain, q, dq), gravity_torques(chain, q)
    crba = np.array([pin.crba(model, data, x) for x in q])
    assert relative_error(np.triu(M), np.triu(crba)) < 1e-14
    bias = np.array([pin.rnea(model, data, x, v, 0 * v) for x, v in zip(q, dq, strict=True)])
    assert relative_error(np.einsum("nij,nj->ni", C, dq) + g, bias) < 1e-12
    M_ours, M_dot, M_ddot = mass_matrix_derivatives(chain, q, dq, ddq)
    assert relative_error(M_ours, M) < 1e-13
    skew = M_dot - 2 * C
    assert np.abs(skew + np.swapaxes(skew, 1, 2)).max() < 1e-12
    M_fd = [mass_matrix(chain, traj(TIMES + s, 0)) for s in (-H, 0.0, H)]
    assert relative_error(M_dot, (M_fd[2] - M_fd[0]) / (2 * H)) < 1e-6
    assert relative_error(M_ddot, (M_fd[2] - 2 * M_fd[1] + M_fd[0]) / H**2) < 1e-6


def test_a_massless_link_keeps_its_rotational_inertia(chains):
    """A link of zero mass with a rotational inertia (a rotor modelled as pure inertia) is
    the same in Pinocchio's model as in the project's inverse dynamics: M(q) from
    Pinocchio's CRBA equals the columns of inverse dynamics at unit accelerations."""
    from workbench.dynamics.inverse_dynamics import inverse_dynamics

    chain = chains["iiwa"]
    inertias = chain.inertias.copy()
    inertias[-1] = 0.0
    inertias[-1][:3, :3] = np.diag([0.01, 0.02, 0.03])  # about the link's origin, no mass
    light = replace(chain, inertias=inertias)
    q = sines(chain.n, seed=9)(TIMES, 0)[:3]
    n = chain.n
    rest = inverse_dynamics(light, q, 0 * q, 0 * q)
    columns = [
        inverse_dynamics(light, q, 0 * q, np.tile(np.eye(n)[j], (len(q), 1))) - rest
        for j in range(n)
    ]
    M = mass_matrix(light, q)
    assert relative_error(M, np.stack(columns, axis=-1)) < 1e-13
    assert relative_error(M, mass_matrix(chain, q)) > 1e-6  # the inertia is seen


def test_task_space_dynamics_reproduce_the_tool_motion(chains):
    """F = Lambda V_dot + eta (seed 004 eq. 9.97) with F = J_bar^T tau and V_dot from Pinocchio."""
    chain = chains["iiwa"]
    model = shared_model(chain)
    data = model.createData()
    frame = model.getFrameId(chain.tool_name)
    rng = np.random.default_rng(8)
    for _ in range(3):
        q, ddq, V = rng.normal(size=chain.n), rng.normal(size=chain.n), rng.normal(size=6)
        Lam, eta = task_space_dynamics(chain, q, V)
        M = pin.crba(model, data, q)
        M = np.triu(M) + np.triu(M, 1).T
        pin.computeJointJacobians(model, data, q)
        J = wb.lie.pinocchio_vector(pin.getFrameJacobian(model, data, frame, pin.LOCAL).T).T
        assert relative_error(np.linalg.inv(Lam), J @ np.linalg.solve(M, J.T)) < 1e-12
        J_bar = np.linalg.solve(M, J.T) @ Lam
        dq = J_bar @ V
        tau = pin.rnea(model, data, q, dq, ddq)
        pin.forwardKinematics(model, data, q, dq, ddq)
        a = pin.getFrameAcceleration(model, data, frame, pin.LOCAL).vector
        V_dot = wb.lie.pinocchio_vector(a)
        assert relative_error(Lam @ V_dot + eta, J_bar.T @ tau) < 1e-10


def test_flexible_joint_motor_trajectory(chains):
    """theta = q + K^-1 tau, its derivatives by central differences, u = B ddtheta + tau."""
    chain = chains["iiwa"]
    traj = sines(chain.n, seed=9)
    K, B = np.linspace(2000.0, 800.0, chain.n), 0.3
    out = flexible_joint_motor_trajectory(chain, K, B, *(traj(TIMES, k) for k in range(5)))

    def theta(shift):
        q = [traj(TIMES + shift, k) for k in range(3)]
        return q[0] + wb.inverse_dynamics(chain, *q) / K

    fd = (theta(H) - theta(-H)) / (2 * H), (theta(H) - 2 * theta(0.0) + theta(-H)) / H**2
    assert relative_error(out.theta, theta(0.0)) < 1e-14
    assert relative_error(out.dtheta, fd[0]) < 1e-7
    assert relative_error(out.ddtheta, fd[1]) < 1e-6
    np.testing.assert_allclose(out.u, B * out.ddtheta + K * (out.theta - traj(TIMES, 0)))
    with pytest.raises(wb.WorkbenchError, match="stiffness of joint"):
        flexible_joint_motor_trajectory(chain, 0.0, B, *(traj(TIMES, k) for k in range(5)))


def test_batching_and_errors(chains):
    chain = chains["talos_upper_body"]
    traj = sines(chain.n, seed=10)
    batched = time_derivatives(chain, *(traj(TIMES, k) for k in range(5)))
    single = time_derivatives(chain, *(traj(TIMES[2], k) for k in range(5)))
    for b, s in zip(batched, single, strict=True):
        assert s.shape == (chain.n,)
        np.testing.assert_allclose(s, b[2], rtol=1e-13, atol=1e-12)
    M, M_dot, _ = mass_matrix_derivatives(chain, *(traj(TIMES[2], k) for k in range(3)))
    assert M.shape == M_dot.shape == (chain.n, chain.n)
    bad = np.ones((3, chain.n + 1))
    with pytest.raises(wb.WorkbenchError, match="dddq"):
        time_derivatives(chain, *(traj(TIMES, k) for k in range(3)), bad, traj(TIMES, 4))
