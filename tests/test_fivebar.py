"""The spherical five-bar (seed 000 §3) against Pinocchio's constraint dynamics, energy
balance, finite differences and a CasADi SX reference."""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest

import workbench as wb
from tests.fivebar_casadi_reference import knot_functions
from workbench.fivebar import ACTIVE
from workbench.fivebar_design import CUT_FRAMES, FiveBarDesign


@pytest.fixture(scope="module")
def fb() -> wb.fivebar.FiveBar:
    return wb.fivebar.FiveBar.default()


def _closed_states(fb, samples: int, seed: int = 0):
    """Closed configurations near home with consistent velocities and accelerations."""
    rng = np.random.default_rng(seed)
    qa = rng.uniform(-0.5, 0.5, size=(samples, 2))
    q = fb.solve_passive(qa)
    dq = fb.velocities(q, rng.normal(size=(samples, 2)))
    ddq = fb.accelerations(q, dq, rng.normal(size=(samples, 2)))
    return q, dq, ddq


def test_home_is_assembled(fb):
    assert np.abs(fb.loop_residual(fb.home)).max() <= 1e-14
    np.testing.assert_allclose(fb.solve_passive(fb.home[ACTIVE]), fb.home, atol=1e-12)


def test_loop_closes_across_the_workspace(fb):
    grid = np.stack(np.meshgrid(*2 * [np.linspace(-1.2, 1.2, 25)]), -1).reshape(-1, 2)
    closed, reachable = [], []
    for qa in grid:  # sample by sample: unreachable pairs raise
        try:
            closed.append(fb.solve_passive(qa))
            reachable.append(qa)
        except wb.WorkbenchError as exc:
            assert "outside the five-bar's workspace" in str(exc) or "singular" in str(exc)
    closed = np.array(closed)
    assert len(closed) >= 0.5 * len(grid)
    assert np.abs(fb.loop_residual(closed)).max() <= 1e-12
    np.testing.assert_array_equal(closed[:, ACTIVE], reachable)
    # the batched solve gives the same answer
    np.testing.assert_allclose(fb.solve_passive(np.array(reachable)), closed, atol=1e-13)


def test_passive_jacobian_matches_finite_differences(fb):
    q, _, _ = _closed_states(fb, 5, seed=1)
    J_p = fb.passive_jacobian(q)
    h = 1e-6
    for k in range(2):
        step = np.zeros(2)
        step[k] = h
        plus = fb.solve_passive(q[:, ACTIVE] + step, guess=q)
        minus = fb.solve_passive(q[:, ACTIVE] - step, guess=q)
        fd = (plus - minus)[:, [1, 2, 4]] / (2 * h)
        assert np.abs(J_p[:, :, k] - fd).max() <= 1e-7


def _pinocchio_loop(fb):
    """The tree plus a 3D constraint joining the two sides of the cut joint 5."""
    model = fb.pinocchio_model()
    sides = [model.frames[model.getFrameId(name)] for name in CUT_FRAMES]
    constraint = pin.RigidConstraintModel(
        pin.ContactType.CONTACT_3D,
        model,
        sides[0].parentJoint,
        sides[0].placement,
        sides[1].parentJoint,
        sides[1].placement,
        pin.ReferenceFrame.LOCAL,
    )
    return model, [constraint]


def test_torque_drives_constraint_dynamics_along_the_plan(fb):
    """Route (a): Pinocchio's constraint dynamics under tau_pr reproduces the accelerations."""
    model, constraints = _pinocchio_loop(fb)
    data = model.createData()
    constraint_data = [c.createData() for c in constraints]
    pin.initConstraintDynamics(model, data, constraints, constraint_data)
    settings = pin.ProximalSettings(1e-14, 1e-12, 50)
    q, dq, ddq = _closed_states(fb, 20, seed=2)
    tau = fb.torque(q, dq, ddq)
    tau_full = np.zeros((len(q), 5))
    tau_full[:, ACTIVE] = tau
    for s in range(len(q)):
        a = pin.constraintDynamics(
            model,
            data,
            fb.tree_configuration(q[s]),
            fb.tree_configuration(dq[s]),
            fb.tree_configuration(tau_full[s]),
            constraints,
            constraint_data,
            settings,
        )
        np.testing.assert_allclose(a, fb.tree_configuration(ddq[s]), atol=1e-8)


def test_power_balance(fb):
    """Route (b): d/dt (kinetic + potential energy of the tree) = dq_a . tau_pr."""
    model = fb.pinocchio_model()
    data = model.createData()

    def motion(t):
        qa = np.stack([0.4 * np.sin(2.0 * t), 0.3 * np.sin(3.0 * t + 0.5)], -1)
        dqa = np.stack([0.8 * np.cos(2.0 * t), 0.9 * np.cos(3.0 * t + 0.5)], -1)
        ddqa = np.stack([-1.6 * np.sin(2.0 * t), -2.7 * np.sin(3.0 * t + 0.5)], -1)
        q = fb.solve_passive(qa)
        dq = fb.velocities(q, dqa)
        return q, dq, fb.accelerations(q, dq, ddqa)

    def energy(t):
        q, dq, _ = motion(t)
        return np.array(
            [
                pin.computeKineticEnergy(
                    model, data, fb.tree_configuration(qs), fb.tree_configuration(vs)
                )
                + pin.computePotentialEnergy(model, data, fb.tree_configuration(qs))
                for qs, vs in zip(q, dq, strict=True)
            ]
        )

    t = np.linspace(0.0, 2.0, 9)
    q, dq, ddq = motion(t)
    power = np.sum(dq[:, ACTIVE] * fb.torque(q, dq, ddq), axis=1)
    h = 1e-5
    dE_dt = (energy(t + h) - energy(t - h)) / (2 * h)
    assert np.abs(dE_dt - power).max() <= 1e-6 * np.abs(power).max()


def test_torque_matches_casadi_reference(fb):
    q, dq, ddq = _closed_states(fb, 10, seed=3)
    torque = knot_functions(fb)["torque"].map(len(q))
    reference = np.array(torque(np.hstack([q, dq, ddq]).T)).T
    np.testing.assert_allclose(fb.torque(q, dq, ddq), reference, atol=1e-12)


def test_torque_derivatives_match_finite_differences(fb):
    q, dq, ddq = _closed_states(fb, 4, seed=4)
    d = fb.torque_derivatives(q, dq, ddq)
    D = d.dtau_dlambda  # (N, 2, 51): eta (36), q, dq, ddq (5 each)
    assert D.shape == (4, 2, 51)
    h = 1e-6
    fd = np.empty_like(D)
    for k in range(36):
        eta = np.zeros(36)
        eta[k] = h
        fd[:, :, k] = (
            fb.with_eta(eta).torque(q, dq, ddq) - fb.with_eta(-eta).torque(q, dq, ddq)
        ) / (2 * h)
    for block, x in enumerate((q, dq, ddq)):
        for k in range(5):
            e = np.zeros(5)
            e[k] = h
            args_plus = [q, dq, ddq]
            args_minus = [q, dq, ddq]
            args_plus[block] = x + e
            args_minus[block] = x - e
            fd[:, :, 36 + 5 * block + k] = (fb.torque(*args_plus) - fb.torque(*args_minus)) / (
                2 * h
            )
    scale = np.abs(fd).max()
    assert np.abs(D - fd).max() <= 1e-6 * scale
    np.testing.assert_allclose(d.tau, fb.torque(q, dq, ddq), atol=1e-14)
    # the state-only path gives the same state columns
    state = fb.torque_derivatives(q, dq, ddq, with_eta=False)
    np.testing.assert_allclose(state.dtau_dlambda[..., 36:], D[..., 36:], atol=1e-12 * scale)


def test_closure_jacobian_matches_finite_differences(fb):
    rng = np.random.default_rng(5)
    q, dq, ddq = (rng.normal(scale=0.5, size=(3, 5)) for _ in range(3))
    _, J = fb.closure(q, dq, ddq)
    h = 1e-6
    x = np.concatenate([q, dq, ddq], axis=1)
    for k in range(15):
        e = np.zeros(15)
        e[k] = h
        plus = fb.closure(*np.split(x + e, 3, axis=1))[0]
        minus = fb.closure(*np.split(x - e, 3, axis=1))[0]
        np.testing.assert_allclose(J[:, :, k], (plus - minus) / (2 * h), atol=1e-8)
    qc, dqc, ddqc = _closed_states(fb, 3, seed=6)
    assert np.abs(fb.closure(qc, dqc, ddqc)[0]).max() <= 1e-12


def test_pointing_jacobian_matches_finite_differences(fb):
    q, _, _ = _closed_states(fb, 3, seed=7)
    J = fb.pointing_jacobian(q)
    h = 1e-6
    for k in range(2):
        step = np.zeros(2)
        step[k] = h
        plus = fb.pointing(fb.solve_passive(q[:, ACTIVE] + step, guess=q))
        minus = fb.pointing(fb.solve_passive(q[:, ACTIVE] - step, guess=q))
        np.testing.assert_allclose(J[:, :, k], (plus - minus) / (2 * h), atol=1e-8)


def test_forward_dynamics_inverts_the_torque_map(fb):
    q, dq, ddq = _closed_states(fb, 6, seed=8)
    tau = fb.torque(q, dq, ddq)
    _, ddq_all = fb.forward_dynamics(q, dq[:, ACTIVE], tau)
    np.testing.assert_allclose(ddq_all, ddq, atol=1e-10)


def test_simulation_conserves_energy_without_torque(fb):
    model = fb.pinocchio_model()
    data = model.createData()
    t = np.linspace(0.0, 0.1, 41)  # unpowered, the mechanism falls and later folds up
    q0 = fb.solve_passive([0.2, -0.1])
    q, dq = fb.simulate(t, np.zeros((len(t), 2)), q0, [1.0, -0.5])
    energy = [
        pin.computeKineticEnergy(model, data, fb.tree_configuration(a), fb.tree_configuration(b))
        + pin.computePotentialEnergy(model, data, fb.tree_configuration(a))
        for a, b in zip(q, dq, strict=True)
    ]
    assert np.abs(np.array(energy) - energy[0]).max() <= 1e-6 * abs(energy[0]) + 1e-9
    assert np.abs(fb.loop_residual(q)).max() <= 1e-12


def test_unreachable_singular_and_bad_inputs(fb):
    # the default design (distal arcs of 90 deg) reaches every motor pair; short distal
    # arcs do not
    short = FiveBarDesign(distal_arc=np.deg2rad(70.0))
    narrow = wb.fivebar.FiveBar(short.chain(), short.axes()[4])
    narrow.solve_passive([0.0, 0.0])
    with pytest.raises(wb.WorkbenchError, match="outside the five-bar's workspace"):
        narrow.solve_passive([-2.0, -1.0])
    with pytest.raises(wb.WorkbenchError, match="expected"):
        fb.torque(np.zeros(4), np.zeros(5), np.zeros(5))
    with pytest.raises(wb.WorkbenchError, match="qa contains nan"):
        fb.solve_passive([np.nan, 0.0])
    # axes 2, 3 and 5 coplanar makes g_p singular: with q1 = q4 = 0, turn w3 about w2
    # into the plane of w2 and w5 (w3 sweeps the great circle normal to w2)
    w2, w3, w5 = fb.axes[[1, 2, 4]]
    target = w5 - (w5 @ w2) * w2
    q2 = np.arctan2(w2 @ np.cross(w3, target), w3 @ target)
    with pytest.raises(wb.WorkbenchError, match="singular"):
        fb.passive_jacobian([0.0, q2, 0.0, 0.0, 0.0])
