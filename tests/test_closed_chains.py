"""Contract of workbench.closed_chains on every shipped closed chain (and a welded four-bar).

Each check compares with something the closed-chain code did not compute:
central differences of its own maps (solve_passive, residual, motor
torques), Pinocchio (constraint dynamics with RigidConstraintModel, kinetic
and potential energy), an independent CasADi SX formulation with AD
(tests/closed_chain_reference.py), physical identities (power balance,
virtual work of the regressor, a weld equal to the rigid coupler) and
errors on bad inputs.

Models: the spherical five-bar (rotation closure), the planar five-bar
(revolute), the four-bar (planar), the delta (three point closures), the
four-bar with its coupler cut and welded again (weld, to a link's own
frame), built here from the shipped four-bar's tree, and the three folders
of example-parallel-robots (models/parallel_robots: point and weld
closures on joint frames, idle motions).

Idle motions (the folders: a closing body or rods that turn with the motors
still) are independent coordinates like the motors (``model.active``: the
motors, then the idle joints). Every check runs on all of them: states move
the idle coordinates too, the forces of :func:`dynamics.coordinate_forces`
(one per independent coordinate) are what Pinocchio's constraint dynamics
needs on those joints to give the same accelerations, and the idle forces
vanish on the motions the motors alone drive (zero force on an idle motion:
tests/test_robot_folder.py). ``motor_torques`` and
``torque_regressor`` are the motors' columns of ``coordinate_forces`` and
``coordinate_regressor``.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import numpy as np
import pinocchio as pin
import pytest
from scipy.optimize import brentq

from workbench import closed_chains, inertia, lie
from workbench.chain import Chain, Frame
from workbench.closed_chains import derivatives, dynamics, kinematics
from workbench.closed_chains.kinematics import check_assembly, mobility
from workbench.closed_chains.model import ClosedChain, Closure
from workbench.dynamics.kinematics import forward_kinematics
from workbench.errors import WorkbenchError
from workbench.models.urdf import write_urdf
from workbench.testing import central_differences
from workbench.testing.closed_chain_reference import closed_chain_functions, evaluate

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = {
    "fivebar": ROOT / "models/fivebar/fivebar.toml",
    "planar_fivebar": ROOT / "models/planar_fivebar/planar_fivebar.toml",
    "fourbar": ROOT / "models/fourbar/fourbar.toml",
    "delta": ROOT / "models/delta/delta.toml",
}
FOLDERS = {name: ROOT / "models/parallel_robots" / name / "robot.yaml"
           for name in ("5bar_linkage", "robot_delta", "cassie_like")}  # fmt: skip
# The folders' tool frames (their last frames are closure frames, which the tool's eta
# block would move).
TOOLS = {"5bar_linkage": "effector", "robot_delta": "effector", "cassie_like": "foot_frame"}
MODELS = (*SHIPPED, "fourbar_welded", *FOLDERS)
# Half-width (rad) of a box of independent coordinates (motors and idle joints) around
# home inside each workspace (robot_delta meets a singularity 0.09 rad from home).
SPAN = {"fivebar": 0.5, "planar_fivebar": 0.35, "fourbar": np.pi, "delta": 0.25,
        "fourbar_welded": np.pi, "5bar_linkage": 0.2, "robot_delta": 0.05,
        "cassie_like": 0.2}  # fmt: skip
# Rotational inertia (kg m^2) about its joint axis given, on both sides of the Pinocchio
# comparison, to a massless leaf link (the spherical five-bar's link 5): with nothing
# to move, its joint has a zero row in the mass matrix, which Pinocchio's constraint
# dynamics (a Cholesky factorisation) cannot take.
LEAF_INERTIA = 1e-4
MEASURED: dict[str, float] = {}  # largest errors, printed with -s (pytest -s -k closed_chains)


def record(what: str, value: float) -> float:
    MEASURED[what] = max(MEASURED.get(what, 0.0), float(value))
    return float(value)


@pytest.fixture(scope="module", autouse=True)
def _report():
    yield
    for what, value in sorted(MEASURED.items()):
        print(f"{what:60s} {value:.3g}")


# --------------------------------------------------------------------- models
def link_motions(tree: Chain, q: np.ndarray) -> np.ndarray:
    """``P_i(q)`` (n, 4, 4): product of exponentials along each link's path."""
    E = lie.exp_se3(tree.twists * q[:, None])
    P = np.empty((tree.n, 4, 4))
    for i in range(tree.n):
        P[i] = (np.eye(4) if tree.parents[i] < 0 else P[tree.parents[i]]) @ E[i]
    return P


def welded_fourbar(fourbar: ClosedChain) -> ClosedChain:
    """The four-bar with the coupler cut at the rocker and welded: a ``weld`` closure.

    The shipped tree is moved to its home (q = 0 here is the shipped home).
    The cut joint stays in the tree as joint_4 on the rocker, carrying
    ``coupler_b``, which takes half the coupler's inertia (the other half
    stays on ``coupler``: welded, the two halves are one rigid body). The
    weld joins a frame attached to the coupler to ``coupler_b``'s own frame,
    which eta moves with joint_4's block (the attached closure frames of the
    shipped models do not move).
    """
    tree = fourbar.tree
    (closure,) = fourbar.closures
    a_name, b_name = closure.frames
    coupler, rocker = tree.parent_of(a_name), tree.parent_of(b_name)
    P = link_motions(tree, fourbar.home)
    Ad_inv = lie.Ad(lie.inverse(P))
    G = np.swapaxes(Ad_inv, 1, 2) @ tree.inertias @ Ad_inv
    G[coupler] /= 2
    B = P[rocker] @ tree.placement_of(b_name)  # the cut joint at home, z along its axis
    n = tree.n
    new_tree = Chain(
        joint_names=(*tree.joint_names, "joint_4"),
        link_names=(*tree.link_names, "coupler_b"),
        parents=np.append(tree.parents, rocker),
        joint_kinds=(*tree.joint_kinds, "revolute"),
        axes=np.vstack([tree.axes, [0.0, 0.0, 1.0]]),
        joint_frames=np.concatenate([P @ tree.joint_frames, B[None]]),
        inertias=np.concatenate([G, G[coupler][None]]),
        tool_name=tree.tool_name,
        tool_parent=tree.tool_parent,
        tool_frame=P[tree.tool_parent] @ tree.tool_frame,
        gravity=tree.gravity,
        frames=(Frame("weld_on_coupler", coupler, B),),
        base_name=tree.base_name,
        name="fourbar_welded",
    )
    model = ClosedChain(
        new_tree,
        (Closure("coupler_weld", "weld", ("weld_on_coupler", "coupler_b")),),
        fourbar.actuated,
        np.zeros(n + 1),
        "position",
        "fourbar_welded",
    )
    return check_assembly(model)


@pytest.fixture(scope="module")
def shipped() -> dict[str, ClosedChain]:
    return {name: closed_chains.read(path) for name, path in SHIPPED.items()}


@pytest.fixture(scope="module")
def models(shipped) -> dict[str, ClosedChain]:
    folders = {name: closed_chains.load(path, tool=TOOLS[name]) for name, path in FOLDERS.items()}
    return {**shipped, "fourbar_welded": welded_fourbar(shipped["fourbar"]), **folders}


@pytest.fixture(scope="module", params=MODELS)
def name(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def model(models, name) -> ClosedChain:
    return models[name]


_REFERENCES: dict[str, dict] = {}


def reference(name: str, model: ClosedChain) -> dict:
    """The CasADi SX functions of ``model`` (built once per model)."""
    if name not in _REFERENCES:
        closures = [(c.kind, *c.frames) for c in model.closures]
        _REFERENCES[name] = closed_chain_functions(
            model.tree, closures, model.actuated + model.idle
        )
    return _REFERENCES[name]


def per_sample(function, eta: np.ndarray, *samples: np.ndarray) -> list[np.ndarray]:
    """The outputs of a CasADi function evaluated sample by sample, stacked (N, ...)."""
    outputs = [evaluate(function, eta, *x) for x in zip(*samples, strict=True)]
    return [np.array(column) for column in zip(*outputs, strict=True)]


def closed_states(model: ClosedChain, name: str, samples: int, seed: int):
    """Closed configurations inside the workspace with consistent velocities, accelerations."""
    rng = np.random.default_rng(seed)
    a = len(model.active)
    span = min(SPAN[name], 0.3)
    qa = model.home[model.active] + rng.uniform(-span, span, size=(samples, a))
    dqa, ddqa = rng.normal(size=(2, samples, a))
    q = kinematics.solve_passive(model, qa)
    dq = kinematics.velocities(model, q, dqa)
    ddq = kinematics.accelerations(model, q, dq, ddqa)
    return q, dq, ddq


def actuated_grid(model: ClosedChain, name: str) -> np.ndarray:
    """A grid of independent coordinates in the box of SPAN (its corners from 4 on)."""
    a = len(model.active)
    points = {1: 41, 2: 9, 3: 5}.get(a, 2)
    axes = [h + np.linspace(-SPAN[name], SPAN[name], points) for h in model.home[model.active]]
    return np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, a)


# ----------------------------------------------------------------- kinematics
def test_closure_holds_over_the_workspace(model, name):
    qa = actuated_grid(model, name)
    q = kinematics.solve_passive(model, qa)
    np.testing.assert_array_equal(q[:, model.active], qa)
    assert record(f"closure residual on the grid [{name}]",
                  np.abs(kinematics.residual(model, q)).max()) <= 1e-12  # fmt: skip
    # the independent formulation agrees that these are closed
    ref = reference(name, model)["residual"]
    eta = np.zeros(6 * (model.n + 1))
    r = max(np.abs(evaluate(ref, eta, qs)[0]).max() for qs in q[:: max(1, len(q) // 25)])
    assert record(f"closure residual on the grid, CasADi [{name}]", r) <= 1e-12


def test_jacobians_match_central_differences(model, name):
    q, _, _ = closed_states(model, name, 4, seed=1)
    h = 1e-6
    # S = dq / dq_a against central differences of solve_passive
    S = kinematics.velocity_map(model, q)
    fd = central_differences(
        lambda qa: kinematics.solve_passive(model, qa, guess=q), q[:, model.active], h,
        samples=True,
    )  # fmt: skip
    assert record(f"S vs central differences [{name}]", np.abs(S - fd).max()) <= 1e-7
    # J_p = dq_p / dq_a: the passive rows
    J_p = S[:, model.passive]
    assert np.abs(J_p - fd[:, model.passive]).max() <= 1e-7
    # K = dc/dq against central differences of the residual (at any q)
    K = kinematics.constraint_jacobian(model, q)
    fd_K = central_differences(lambda x: kinematics.residual(model, x), q, h, samples=True)
    assert record(f"K vs central differences [{name}]", np.abs(K - fd_K).max()) <= 1e-7
    # ... and against CasADi AD of the independent residual
    ref = reference(name, model)
    eta = np.zeros(6 * (model.n + 1))
    K_ad = np.array([evaluate(ref["K"], eta, qs)[0] for qs in q])
    S_ad = np.array([evaluate(ref["S"], eta, qs)[0] for qs in q])
    assert record(f"K vs CasADi AD [{name}]", np.abs(K - K_ad).max()) <= 1e-12
    assert record(f"S vs CasADi [{name}]", np.abs(S - S_ad).max()) <= 1e-10


def test_velocities_and_accelerations_along_a_trajectory(model, name):
    a = len(model.active)
    amplitude = min(SPAN[name], 0.3) * np.linspace(1.0, 0.6, a)
    omega = np.linspace(2.0, 3.0, a)

    def motion(t):
        t = np.asarray(t)[:, None]
        qa = model.home[model.active] + amplitude * np.sin(omega * t + 0.3)
        return (
            qa,
            amplitude * omega * np.cos(omega * t + 0.3),
            -amplitude * omega**2 * np.sin(omega * t + 0.3),
        )

    t = np.linspace(0.0, 1.0, 6)
    qa, dqa, ddqa = motion(t)
    q = kinematics.solve_passive(model, qa)
    dq = kinematics.velocities(model, q, dqa)
    ddq = kinematics.accelerations(model, q, dq, ddqa)
    # central differences at h and 2 h combined by Richardson (error h^4): solve_passive
    # meets the closure to 1e-13, so smaller steps would drown in that noise
    h = 2e-3
    shifted = {
        k: kinematics.solve_passive(model, motion(t + k * h)[0], guess=q) for k in (-2, -1, 1, 2)
    }
    first = [(shifted[k] - shifted[-k]) / (2 * k * h) for k in (1, 2)]
    second = [(shifted[k] - 2 * q + shifted[-k]) / (k * h) ** 2 for k in (1, 2)]
    first = (4 * first[0] - first[1]) / 3
    second = (4 * second[0] - second[1]) / 3
    scale = np.abs(ddq).max()
    err = np.abs(dq - first).max() / np.abs(dq).max()
    assert record(f"dq vs first differences, relative [{name}]", err) <= 1e-7
    # ... and to cond(K_p) 1e-13 in the passive joints, which the second differences
    # divide by h^2 (robot_delta: cond(K_p) 1.2e4, 3e-4 relative; elsewhere below 1e-7)
    K_p = kinematics.constraint_jacobian(model, q)[:, :, model.passive]
    noise = 1e-13 * np.linalg.cond(K_p).max() / h**2 / scale
    err = np.abs(ddq - second).max() / scale
    assert record(f"ddq vs second differences, relative [{name}]", err) <= 1e-6 + noise
    # the independent acceleration bias (CasADi) agrees
    ref = reference(name, model)["closed"]
    eta = np.zeros(6 * (model.n + 1))
    for s in range(len(t)):
        v, acc, _ = evaluate(ref, eta, q[s], dqa[s], ddqa[s])
        assert np.abs(v.ravel() - dq[s]).max() <= 1e-11 * max(np.abs(dq).max(), 1.0)
        err = np.abs(acc.ravel() - ddq[s]).max() / scale
        assert record(f"ddq vs CasADi, relative [{name}]", err) <= 1e-10


# ------------------------------------------------------------------- dynamics
@pytest.fixture(scope="module")
def pinocchio_setup(model, name, tmp_path_factory):
    """Pinocchio's model of the tree from the URDF (Pinocchio's parser) and the closures.

    Massless leaf links get LEAF_INERTIA about their joint axis on both sides;
    returns (closed chain used, Pinocchio model, constraint models, joint order).
    """
    urdf = model.urdf_path
    if urdf is None:
        urdf = write_urdf(model.tree, tmp_path_factory.mktemp(name) / f"{name}.urdf")
    pinocchio_model = pin.buildModelFromUrdf(str(urdf))
    tree = model.tree
    phi = tree.phi.copy()
    for j in range(tree.n):
        if np.abs(phi[tree.ancestors[j]]).max() == 0.0:  # nothing moves with joint j
            axis = tree.axes[j]
            local = np.zeros(10)
            local[4:7] = LEAF_INERTIA * axis**2
            local[7:10] = LEAF_INERTIA * axis[[0, 0, 1]] * axis[[1, 2, 2]]
            phi[j] = inertia.moved_phi(local, tree.joint_frames[j])
            jid = pinocchio_model.getJointId(tree.joint_names[j])
            pinocchio_model.inertias[jid] = pin.Inertia(
                0.0, np.zeros(3), LEAF_INERTIA * np.outer(axis, axis)
            )
    closed = model.with_inertias(inertia.matrix_from_phi(phi))
    order = np.array(
        [pinocchio_model.joints[pinocchio_model.getJointId(j)].idx_q for j in tree.joint_names]
    )
    data = pinocchio_model.createData()
    pin.framesForwardKinematics(pinocchio_model, data, to_pinocchio_order(model.home, order))
    constraints = []
    for closure in model.closures:
        ids = [pinocchio_model.getFrameId(f) for f in closure.frames]
        A, B = (pinocchio_model.frames[i] for i in ids)
        if closure.kind == "rotation":  # a weld only because the origins coincide as well
            gap = data.oMf[ids[0]].translation - data.oMf[ids[1]].translation
            assert np.linalg.norm(gap) <= 1e-12
        kind = (pin.ContactType.CONTACT_6D if closure.kind in ("weld", "rotation")
                else pin.ContactType.CONTACT_3D)  # fmt: skip
        constraints.append(
            pin.RigidConstraintModel(kind, pinocchio_model, A.parentJoint, A.placement,
                                     B.parentJoint, B.placement, pin.ReferenceFrame.LOCAL)
        )  # fmt: skip
    return closed, pinocchio_model, constraints, order


def to_pinocchio_order(x: np.ndarray, order: np.ndarray) -> np.ndarray:
    out = np.empty_like(x)
    out[..., order] = x
    return out


def test_motor_torques_drive_pinocchio_constraint_dynamics(pinocchio_setup, name):
    """Pinocchio's constraint dynamics under the forces on the independent coordinates
    gives the closed-chain ddq: the motor torques, and on idle joints the forces that
    move them as ddq does (any ddq_a of closed_states: zero only on the motions the
    motors alone drive, tests/test_robot_folder.py).

    With idle motions, whose inertia may be tiny (robot_delta's rods: 3.3e-11 kg m^2,
    conditioning 2.6e6), what is compared is what is well-conditioned: the motors'
    accelerations, and the equations of motion at Pinocchio's accelerations (our forces
    there equal the forces applied)."""
    closed, pinocchio_model, constraints, order = pinocchio_setup
    data = pinocchio_model.createData()
    constraint_data = [c.createData() for c in constraints]
    pin.initConstraintDynamics(pinocchio_model, data, constraints, constraint_data)
    settings = pin.ProximalSettings(1e-14, 1e-12, 100)
    q, dq, ddq = closed_states(closed, name, 8, seed=2)
    tau = dynamics.coordinate_forces(closed, q, dq, ddq)
    motors = len(closed.actuated)
    np.testing.assert_array_equal(dynamics.motor_torques(closed, q, dq, ddq), tau[:, :motors])
    full = np.zeros_like(q)
    full[:, closed.active] = tau
    worst = 0.0
    for s in range(len(q)):
        a = pin.constraintDynamics(
            pinocchio_model, data, to_pinocchio_order(q[s], order),
            to_pinocchio_order(dq[s], order), to_pinocchio_order(full[s], order),
            constraints, constraint_data, settings,
        )  # fmt: skip
        assert np.all(np.isfinite(a))
        if closed.idle:  # tests/test_robot_folder.py: how far the idle motions agree
            residual = dynamics.coordinate_forces(closed, q[s], dq[s], a[order]) - tau[s]
            error = np.abs(residual).max() / np.abs(tau[s]).max()
            assert record(f"forces at Pinocchio's ddq, relative [{name}]", error) <= 1e-9
            worst = max(worst, np.abs(a[order] - ddq[s])[closed.motor_indices].max())
        else:
            worst = max(worst, np.abs(a[order] - ddq[s]).max())
    assert record(f"ddq (motors' with idle motions) vs constraintDynamics [{name}]",
                  worst) <= 1e-8  # fmt: skip


def test_reduced_inertia_is_pinocchios_kinetic_energy(pinocchio_setup, name):
    """dq_a^T S^T M S dq_a / 2 is the kinetic energy Pinocchio computes of the tree moving
    with the closed chain's joint velocities dq = S dq_a."""
    closed, pinocchio_model, _, order = pinocchio_setup
    data = pinocchio_model.createData()
    q, dq, _ = closed_states(closed, name, 6, seed=4)
    dqa = dq[:, closed.active]
    M_r = dynamics.reduced_inertia(closed, q)
    energy = 0.5 * np.einsum("si,sij,sj->s", dqa, M_r, dqa)
    reference = [
        pin.computeKineticEnergy(pinocchio_model, data, to_pinocchio_order(q[s], order),
                                 to_pinocchio_order(dq[s], order))
        for s in range(len(q))
    ]  # fmt: skip
    np.testing.assert_allclose(energy, reference, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(M_r, np.swapaxes(M_r, 1, 2), rtol=0, atol=1e-12 * np.abs(M_r).max())


def test_regressor_times_phi_is_the_motor_torques(model, name):
    """Both regressors times phi are their forces: every independent coordinate's, and the
    motors' (the same rows: torque_regressor has no idle rows, as motor_torques)."""
    q, dq, ddq = closed_states(model, name, 5, seed=3)
    phi = model.tree.phi.ravel()
    for regressor, forces in ((dynamics.coordinate_regressor, dynamics.coordinate_forces),
                              (dynamics.torque_regressor, dynamics.motor_torques)):  # fmt: skip
        Y = regressor(model, q, dq, ddq)
        tau = forces(model, q, dq, ddq)
        assert Y.shape == (*tau.shape, phi.size)
        err = np.abs(Y @ phi - tau).max() / np.abs(tau).max()
        assert record(f"regressor phi vs forces, relative [{name}]", err) <= 1e-12
    assert tau.shape == (len(q), len(model.actuated))


def test_motor_torques_match_casadi(model, name):
    q, dq, ddq = closed_states(model, name, 5, seed=4)
    tau = dynamics.coordinate_forces(model, q, dq, ddq)
    ref = reference(name, model)["torque"]
    eta = np.zeros(6 * (model.n + 1))
    tau_ad = np.array([evaluate(ref, eta, *x)[0].ravel() for x in zip(q, dq, ddq, strict=True)])
    err = np.abs(tau - tau_ad).max() / np.abs(tau).max()
    # the reference's least squares (normal equations) loses a few digits on redundant rows
    assert record(f"motor torques vs CasADi, relative [{name}]", err) <= 1e-11


def _power_balance(closed, name, pinocchio_model, order, duration, intervals, substeps):
    """|E(T) - E(0) - int tau_a . dq_a dt| / int |tau_a . dq_a| dt of a simulated run.

    The motor torques are linear in time on each of ``intervals`` intervals
    (gravity at home plus a sine); the work is integrated by 3-point
    Gauss-Legendre on each (exact to h^6), so what remains is the
    integrator's error.
    """
    data = pinocchio_model.createData()
    coarse = np.linspace(0.0, duration, intervals + 1)
    x, w = np.polynomial.legendre.leggauss(3)
    nodes = coarse[:-1, None] + np.diff(coarse)[:, None] * (1 + x) / 2
    t = np.sort(np.concatenate([coarse, nodes.ravel()]))
    a = len(closed.actuated)
    hold = dynamics.motor_torques(closed, closed.home, np.zeros(closed.n), np.zeros(closed.n))
    swing = 0.3 * np.abs(hold).max() * np.cos(np.arange(a))
    g = hold + swing * np.sin(2 * np.pi * coarse / duration)[:, None]
    tau = np.stack([np.interp(t, coarse, g[:, k]) for k in range(a)], -1)
    q, dq = dynamics.simulate(closed, t, tau, closed.home, np.zeros(a), substeps=substeps)
    assert np.abs(kinematics.residual(closed, q)).max() <= 1e-12
    power = np.sum(tau * dq[:, closed.motor_indices], axis=1)  # idle joints: zero force
    power = power[np.isin(t, nodes)].reshape(intervals, 3)
    work = np.sum(np.diff(coarse) / 2 * (power @ w))
    scale = np.sum(np.diff(coarse) / 2 * (np.abs(power) @ w))
    energy = [
        pin.computeKineticEnergy(pinocchio_model, data, to_pinocchio_order(qs, order),
                                 to_pinocchio_order(vs, order))
        + pin.computePotentialEnergy(pinocchio_model, data, to_pinocchio_order(qs, order))
        for qs, vs in ((q[0], dq[0]), (q[-1], dq[-1]))
    ]  # fmt: skip
    return abs(energy[1] - energy[0] - work) / scale


# Length (s) of the power-balance run: 0.12 s, shorter where the open-loop dynamics are
# fast (5bar_linkage: linearised eigenvalues up to +60 1/s; RK4's error over 0.12 s is
# 2.4e-6 with 2 substeps, converging at fourth order: 5e-5 with 1; robot_delta: its idle
# rods, 3.3e-11 kg m^2, spin up at once under the motors: 2.3e-5 over 0.03 s, 1.0e-6 over
# 0.01 s, 7.7e-8 over 0.003 s); cassie_like: 5.8e-7 over 0.005 s from its home, where with
# more substeps the error levels off at 9.7e-7 (4.0e-6 over 0.01 s, 6.9e-5 over 0.045 s;
# not explained: from the home an earlier processor's rounding gave it, 3.5e-8 over 0.045 s).
POWER_RUN = {"5bar_linkage": 0.06, "robot_delta": 0.003, "cassie_like": 0.005}
# Length (s) of the convergence run (12 intervals), 0.3 s but for the idle rods: spun up
# by the motors, their ball joints (three revolutes each) reach gimbal lock within 0.3 s
# (robot_delta: the closure Jacobian's smallest non-zero singular value 7.8e-7 where the
# simulation stops; cassie_like, from its home, before 0.045 s), where the closure cannot
# be followed. cassie_like over 0.03 s: 9.8e-7 / 6.1e-8 / 4.4e-9 with 1 / 2 / 4 substeps.
CONVERGENCE_RUN = {"robot_delta": 0.01, "cassie_like": 0.03}


def test_simulation_power_balance(pinocchio_setup, name):
    """d/dt (kinetic + potential energy, Pinocchio) = tau_a . dq_a, integrated over a run
    (idle joints free: zero force, no power)."""
    closed, pinocchio_model, _, order = pinocchio_setup
    errors = [
        _power_balance(closed, name, pinocchio_model, order, POWER_RUN.get(name, 0.12), 3, substeps)
        for substeps in (1, 2)
    ]
    record(f"power balance, relative, 1 substep [{name}]", errors[0])
    record(f"power balance, relative, 2 substeps [{name}]", errors[1])
    assert errors[1] <= 1e-6
    assert errors[1] < errors[0]


@pytest.mark.slow
def test_simulation_power_balance_converges(pinocchio_setup, name):
    closed, pinocchio_model, _, order = pinocchio_setup
    run = CONVERGENCE_RUN.get(name, 0.3)
    errors = [
        _power_balance(closed, name, pinocchio_model, order, run, 12, substeps)
        for substeps in (1, 2, 4)
    ]
    for k, e in zip((1, 2, 4), errors, strict=True):
        record(f"power balance, {run:g} s, relative, {k} substeps [{name}]", e)
    assert errors[2] <= 1e-7
    assert errors[2] < errors[1] < errors[0]


# ---------------------------------------------------------------- derivatives
def _eta(model: ClosedChain, k: int, h: float) -> np.ndarray:
    e = np.zeros(6 * (model.n + 1))
    e[k] = h
    return e


def test_torque_derivatives_match_central_differences_and_casadi(model, name):
    q, dq, ddq = closed_states(model, name, 3, seed=5)
    d = derivatives.torque_derivatives(model, q, dq, ddq, with_eta=True)
    h = 1e-6
    tau = dynamics.coordinate_forces

    def central(f):
        return (f(h) - f(-h)) / (2 * h)

    n, E = model.n, 6 * (model.n + 1)
    fd_eta = np.stack(
        [central(lambda s, k=k: tau(model.with_eta(_eta(model, k, s)), q, dq, ddq))
         for k in range(E)], -1)  # fmt: skip
    blocks = [fd_eta]
    for which in range(3):
        columns = []
        for i in range(n):

            def moved(s, i=i, which=which):
                x = [q.copy(), dq.copy(), ddq.copy()]
                x[which][:, i] += s
                return tau(model, *x)

            columns.append(central(moved))
        blocks.append(np.stack(columns, -1))
    analytic = [d.dtau_deta, d.dtau_dq, d.dtau_dv, d.dtau_da]
    scale = max(np.abs(b).max() for b in blocks)
    err = max(np.abs(x - y).max() for x, y in zip(analytic, blocks, strict=True)) / scale
    assert record(f"torque_derivatives vs central differences, relative [{name}]", err) <= 1e-6
    # CasADi AD of the independent formulation
    ref = reference(name, model)["torque_jacobian"]
    eta = np.zeros(E)
    ad = per_sample(ref, eta, q, dq, ddq)
    err = max(np.abs(x - y).max() for x, y in zip(analytic, ad, strict=True)) / scale
    assert record(f"torque_derivatives vs CasADi AD, relative [{name}]", err) <= 1e-9
    # the state-only path gives the same state columns
    state = derivatives.torque_derivatives(model, q, dq, ddq, with_eta=False)
    assert state.dtau_deta is None
    for x, y in zip((state.dtau_dq, state.dtau_dv, state.dtau_da), analytic[1:], strict=True):
        assert np.abs(x - y).max() <= 1e-12 * scale


def test_closed_chain_derivatives_match_central_differences_and_casadi(model, name):
    """closed_chain_derivatives (eta, q_a, dq_a, ddq_a) against central differences and AD.

    Where a closure has rows that are redundant at eta = 0 (the revolute closure of the
    planar five-bar, the weld of the planar four-bar), eta directions that tilt the plane
    of the loop make the moved mechanism impossible to assemble: there the passive joints
    cannot follow, solve_passive must refuse the moved model, and the derivative is the
    least-squares one (compared with the CasADi least-squares formulation only).
    solve_passive places the passive joints to cond(K_p) 1e-13, which central
    differences divide by h (robot_delta: cond(K_p) 1.2e4, 1.2e-3; elsewhere below 3e-5).
    """
    q, dq, ddq = closed_states(model, name, 3, seed=6)
    qa, dqa, ddqa = (x[:, model.active] for x in (q, dq, ddq))
    d = derivatives.closed_chain_derivatives(model, q, dq, ddq, with_eta=True)
    h = 1e-6
    a, E = len(model.active), 6 * (model.n + 1)
    ref = reference(name, model)
    zero = np.zeros(E)
    # first-order consistency of each eta direction: dc/deta_k in the range of K_p
    inconsistent = np.zeros(E, dtype=bool)
    for qs in q:
        K_p = evaluate(ref["K"], zero, qs)[0][:, model.passive]
        C = evaluate(ref["K_eta"], zero, qs)[0]
        miss = C - K_p @ np.linalg.lstsq(K_p, C, rcond=None)[0]
        inconsistent |= np.linalg.norm(miss, axis=0) > 1e-9 * max(np.abs(C).max(), 1.0)

    def torque(m, qa, dqa, ddqa):
        qs = kinematics.solve_passive(m, qa, guess=q)
        v = kinematics.velocities(m, qs, dqa)
        return dynamics.coordinate_forces(m, qs, v, kinematics.accelerations(m, qs, v, ddqa))

    def central(f):
        return (f(h) - f(-h)) / (2 * h)

    columns = np.flatnonzero(~inconsistent)
    fd_eta = np.stack(
        [central(lambda s, k=k: torque(model.with_eta(_eta(model, k, s)), qa, dqa, ddqa))
         for k in columns], -1)  # fmt: skip
    for k in np.flatnonzero(inconsistent):
        with pytest.raises(WorkbenchError, match="not near a closed configuration"):
            torque(model.with_eta(_eta(model, k, 1e-3)), qa, dqa, ddqa)
    record(f"eta columns that cannot be assembled [{name}]", inconsistent.sum())
    fd = [
        fd_eta,
        np.stack([central(lambda s, k=k: torque(model, qa + s * np.eye(a)[k], dqa, ddqa))
                  for k in range(a)], -1),
        np.stack([central(lambda s, k=k: torque(model, qa, dqa + s * np.eye(a)[k], ddqa))
                  for k in range(a)], -1),
        np.stack([central(lambda s, k=k: torque(model, qa, dqa, ddqa + s * np.eye(a)[k]))
                  for k in range(a)], -1),
    ]  # fmt: skip
    analytic = [d.dtau_deta, d.dtau_dq, d.dtau_dv, d.dtau_da]
    scale = max(np.abs(b).max() for b in fd)
    err = max(
        np.abs(x - y).max() for x, y in zip([analytic[0][..., columns], *analytic[1:]], fd,
                                            strict=True)
    ) / scale  # fmt: skip
    noise = 1e-13 * np.linalg.cond(kinematics.constraint_jacobian(model, q)[:, :, model.passive])
    assert record(f"closed_chain_derivatives vs central differences, relative [{name}]",
                  err) <= 1e-6 + noise.max() / h  # fmt: skip
    ad = per_sample(ref["closed_jacobian"], zero, q, dqa, ddqa)
    err = max(np.abs(x - y).max() for x, y in zip(analytic, ad, strict=True)) / scale
    assert record(f"closed_chain_derivatives vs CasADi AD, relative [{name}]", err) <= 1e-9
    np.testing.assert_allclose(d.tau, dynamics.coordinate_forces(model, q, dq, ddq), atol=1e-14)


# ----------------------------------------------------------------------- weld
def test_welded_coupler_moves_like_the_rigid_one(models):
    """Cutting the coupler and welding it back changes neither kinematics nor torques."""
    fourbar, welded = models["fourbar"], models["fourbar_welded"]
    rng = np.random.default_rng(7)
    qa = fourbar.home[fourbar.active] + rng.uniform(-np.pi, np.pi, size=(10, 1))
    dqa, ddqa = rng.normal(size=(2, 10, 1))
    results = []
    for m, offset in ((fourbar, fourbar.home[fourbar.active]), (welded, 0.0)):
        q = kinematics.solve_passive(m, qa - fourbar.home[fourbar.active] + offset)
        dq = kinematics.velocities(m, q, dqa)
        ddq = kinematics.accelerations(m, q, dq, ddqa)
        results.append((q, dq, ddq, dynamics.motor_torques(m, q, dq, ddq),
                        forward_kinematics(m.tree, q)[:, :3, 3]))  # fmt: skip
    (q, dq, ddq, tau, tool), (qw, dqw, ddqw, tauw, toolw) = results
    n = fourbar.n
    np.testing.assert_allclose(qw[:, :n], q - fourbar.home, atol=1e-12)
    np.testing.assert_allclose(dqw[:, :n], dq, atol=1e-11)
    np.testing.assert_allclose(ddqw[:, :n], ddq, atol=1e-10)
    np.testing.assert_allclose(toolw, tool, atol=1e-13)
    err = np.abs(tauw - tau).max() / np.abs(tau).max()
    assert record("welded vs rigid coupler, motor torques, relative", err) <= 1e-12


# ------------------------------------------------------------ reach problems
PROBLEMS = sorted(ROOT.glob("problems/*_reach.toml"))


@pytest.mark.parametrize(
    "problem",
    [p for p in PROBLEMS if tomllib.loads(p.read_text())["task"].get("model") in SHIPPED],
    ids=lambda p: p.stem,
)
def test_reach_problems_start_and_goal_are_reachable(problem, shipped):
    spec = tomllib.loads(problem.read_text())
    assert set(spec) == {"task", "transcription"}
    assert set(spec["task"]) == {"model", "start", "goal", "duration"}
    assert set(spec["transcription"]) == {"knots"}
    assert spec["task"]["duration"] > 0 and spec["transcription"]["knots"] >= 10
    model = shipped[spec["task"]["model"]]
    assert model.task == "position"
    tree = model.tree
    for which in ("start", "goal"):
        target = np.array(spec["task"][which], dtype=float)
        qa, q = model.home[model.active].copy(), model.home.copy()
        for _ in range(30):  # Gauss-Newton on the motors, Jacobian by central differences
            q = kinematics.solve_passive(model, qa, guess=q)
            miss = forward_kinematics(tree, q)[:3, 3] - target
            if np.abs(miss).max() <= 1e-12:
                break
            J = np.stack([
                forward_kinematics(tree, kinematics.solve_passive(model, qa + 1e-7 * e, guess=q))
                - forward_kinematics(tree, kinematics.solve_passive(model, qa - 1e-7 * e, guess=q))
                for e in np.eye(len(qa))
            ], -1)[:3, 3] / 2e-7  # fmt: skip
            qa = qa - np.linalg.lstsq(J, miss, rcond=None)[0]
        assert record(f"reach {which} miss (m) [{problem.stem}]", np.abs(miss).max()) <= 1e-9
        inside = np.minimum(q - tree.lower, tree.upper - q)
        margin = np.where([k == "prismatic" for k in tree.joint_kinds], 0.01, np.deg2rad(5))
        assert np.all(inside > margin), f"{which}: within 5 deg (1 cm) of a joint limit"
        K_p = kinematics.constraint_jacobian(model, q)[:, model.passive]
        s = np.linalg.svd(K_p, compute_uv=False)
        assert s[-1] / s[0] > 1e-2, f"{which}: close to a singular configuration"


# ------------------------------------------------------------------ bad input
def _closure_file(tmp_path: Path, source: Path, **changes) -> Path:
    """A copy of the closure file ``source`` with some keys changed (URDF path made absolute)."""
    spec = tomllib.loads(source.read_text())
    spec["urdf"] = str((source.parent / spec["urdf"]).resolve())
    spec.update(changes)
    lines = [f"{key} = {_toml(value)}" for key, value in spec.items()
             if key not in ("home", "closure")]  # fmt: skip
    lines += ["[home]", *(f"{j} = {v!r}" for j, v in spec.get("home", {}).items())]
    for closure in spec["closure"]:
        lines += ["[[closure]]", *(f"{k} = {_toml(v)}" for k, v in closure.items())]
    path = tmp_path / f"variant_{len(list(tmp_path.iterdir()))}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _toml(value) -> str:
    if isinstance(value, str):
        return f'"{value}"'
    return "[" + ", ".join(_toml(v) for v in value) + "]"


def test_bad_closure_files_are_refused(tmp_path):
    fivebar = SHIPPED["planar_fivebar"]
    spec = tomllib.loads(fivebar.read_text())
    closed_chains.read(_closure_file(tmp_path, fivebar))  # the copy itself loads
    closure = spec["closure"][0]
    cases = {
        "unknown frame 'joint_5_on_link_9'": {
            "closure": [{**closure, "frames": [closure["frames"][0], "joint_5_on_link_9"]}]},
        "must be one of": {"closure": [{**closure, "type": "hinge"}]},
        "home configuration is not closed": {"home": {**spec["home"], "joint_2": -1.0}},
        "unknown joint 'joint_7'": {"actuated": ["joint_1", "joint_7"]},
    }  # fmt: skip
    for message, changes in cases.items():
        with pytest.raises(WorkbenchError, match=message):
            closed_chains.read(_closure_file(tmp_path, fivebar, **changes))
    with pytest.raises(WorkbenchError, match="hinge"):
        closed_chains.read(_closure_file(tmp_path, fivebar, **cases["must be one of"]))
    # two of the delta's three ball joints leave the platform free: idle motions (3 of them)
    delta = SHIPPED["delta"]
    closures = tomllib.loads(delta.read_text())["closure"]
    loose = closed_chains.read(_closure_file(tmp_path, delta, closure=closures[:2]))
    assert len(loose.idle) == 3 == mobility(loose) - len(loose.actuated)
    # a motor too many: the closures tie it to the others
    with pytest.raises(WorkbenchError, match=r"not independent.*joint_2"):
        closed_chains.read(
            _closure_file(tmp_path, fivebar, actuated=["joint_1", "joint_4", "joint_2"])
        )


def test_motors_outside_the_workspace_and_singular_configurations(shipped):
    model = shipped["planar_fivebar"]
    tree = model.tree
    # proximal links pointing straight outwards: the elbows are further apart than the
    # two distal links reach
    with pytest.raises(WorkbenchError, match="cannot be followed"):
        kinematics.solve_passive(model, [np.pi, 0.0])
    with pytest.raises(WorkbenchError, match="qa contains nan"):
        kinematics.solve_passive(model, [np.nan, 0.0])
    # a diverged state (an open-loop simulation gone astray) is refused at once, not followed
    with pytest.raises(WorkbenchError, match="paths of at most"):
        kinematics.solve_passive(model, [3000.0, 0.0])
    # without strict, the samples that cannot be followed are NaN and the others are what
    # each gives alone (an optimiser's trial point with one knot outside the workspace)
    qa = np.array([[np.pi, 0.0], model.home[model.active] + 0.05, [3000.0, 0.0],
                   model.home[model.active] - 0.05])  # fmt: skip
    q, _ = kinematics.closed_configurations(model, qa, model.home, strict=False)
    assert np.isnan(q[[0, 2]]).all()
    for k in (1, 3):
        np.testing.assert_array_equal(q[k], kinematics.solve_passive(model, qa[k]))
        assert np.abs(kinematics.residual(model, q[k])).max() <= 1e-12
    # a configuration where the closure stops fixing the elbows: turn joint 2 until the
    # independent (CasADi) K_p loses rank (the tip on the line through both elbows), a sign
    # change of det(U^T K_p) with U the range of K_p at home
    ref = reference("planar_fivebar", model)
    zero = np.zeros(6 * (model.n + 1))
    j2 = tree.joint_index("joint_2")

    def K_p(x):
        q = model.home.copy()
        q[j2] = x
        return evaluate(ref["K"], zero, q)[0][:, model.passive]

    U = np.linalg.svd(K_p(model.home[j2]))[0][:, : len(model.passive)]
    grid = model.home[j2] + np.linspace(0.0, 2 * np.pi, 73)
    det = np.array([np.linalg.det(U.T @ K_p(x)) for x in grid])
    i = int(np.flatnonzero(np.sign(det[:-1]) != np.sign(det[1:]))[0])
    x = brentq(lambda x: np.linalg.det(U.T @ K_p(x)), grid[i], grid[i + 1], xtol=1e-15)
    s = np.linalg.svd(K_p(x), compute_uv=False)
    assert s[-1] / s[0] <= 1e-12  # a true rank loss
    q = model.home.copy()
    q[j2] = x
    with pytest.raises(WorkbenchError, match="singular"):
        kinematics.velocity_map(model, q)
    with pytest.raises(WorkbenchError, match="singular"):
        dynamics.motor_torques(model, q, np.zeros(4), np.zeros(4))
    # wrong shapes name the argument
    with pytest.raises(WorkbenchError, match="qa has shape"):
        kinematics.solve_passive(model, [0.1, 0.2, 0.3])
    with pytest.raises(WorkbenchError, match="eta has shape"):
        model.with_eta(np.zeros(5))
