"""Batched inverse dynamics against Pinocchio and modern_robotics."""

from __future__ import annotations

import modern_robotics as mr
import numpy as np
import pytest

import workbench as wb
from tests.conftest import ROBOTS, random_state
from workbench.models.urdf import load_urdf
from workbench.testing.pinocchio_reference import rnea


def relative_error(a, b):
    return np.abs(a - b).max() / max(1.0, np.abs(b).max())


@pytest.mark.parametrize("name", ROBOTS)
def test_equals_pinocchio_rnea(chains, name):
    chain = chains[name]
    q, dq, ddq, _ = random_state(chain, 200, seed=1)
    expected = rnea(wb.models.load_pinocchio(name), q, dq, ddq)
    assert relative_error(wb.inverse_dynamics(chain, q, dq, ddq), expected) < 1e-10


@pytest.mark.parametrize("name", ROBOTS)
def test_tool_wrench_equals_pinocchio_external_forces(chains, name):
    chain = chains[name]
    q, dq, ddq, f_tool = random_state(chain, 100, seed=2)
    model = wb.models.load_pinocchio(name)
    expected = rnea(model, q, dq, ddq, chain.tool_name, f_tool)
    assert relative_error(wb.inverse_dynamics(chain, q, dq, ddq, f_tool), expected) < 1e-10


def test_unbatched_input_gives_unbatched_output(chains):
    chain = chains["iiwa"]
    q, dq, ddq, _ = random_state(chain, 3)
    batched = wb.inverse_dynamics(chain, q, dq, ddq)
    single = wb.inverse_dynamics(chain, q[1], dq[1], ddq[1])
    assert single.shape == (chain.n,)
    np.testing.assert_array_equal(single, batched[1])
    # a single state broadcasts against a batch
    mixed = wb.inverse_dynamics(chain, q[1], dq[1], ddq)
    np.testing.assert_allclose(mixed[1], single, rtol=1e-14)


def test_large_batches_split_across_threads_agree(chains):
    chain = chains["ur5"]
    q, dq, ddq, f = random_state(chain, 3000, seed=3)
    tau = wb.inverse_dynamics(chain, q, dq, ddq, f)
    picks = [0, 1499, 2999]
    singles = np.array([wb.inverse_dynamics(chain, q[s], dq[s], ddq[s], f[s]) for s in picks])
    np.testing.assert_array_equal(tau[picks], singles)


def mr_lists(chain: wb.Chain):
    """modern_robotics' Slist, Mlist, Glist for a serial chain (space-frame screws at q = 0).

    Link frames are put at the joint frames M_i, inertias expressed there.
    """
    Slist = chain.twists.T
    frames = [*chain.joint_frames, chain.tool_frame]
    Mlist = [frames[0]] + [np.linalg.inv(frames[i - 1]) @ frames[i] for i in range(1, len(frames))]
    Glist = list(chain.local_inertias())
    return Slist, Mlist, Glist


def test_equals_modern_robotics_on_iiwa(chains):
    chain = chains["iiwa"]
    Slist, Mlist, Glist = mr_lists(chain)
    q, dq, ddq, f = random_state(chain, 20, seed=4)
    ours = wb.inverse_dynamics(chain, q, dq, ddq, f)
    for s in range(len(q)):
        # MR's Ftip is the wrench the tip applies to the environment: the negative of ours.
        theirs = mr.InverseDynamics(q[s], dq[s], ddq[s], chain.gravity, -f[s], Mlist, Glist, Slist)
        assert relative_error(ours[s], theirs) < 1e-10


def test_eta_update_matches_pinocchio_and_urdf(chains, tmp_path):
    chain = chains["panda_arm"]
    rng = np.random.default_rng(5)
    moved = chain.with_eta(rng.normal(scale=0.05, size=6 * (chain.n + 1)))
    q, dq, ddq, f = random_state(chain, 50, seed=6)
    ours = wb.inverse_dynamics(moved, q, dq, ddq, f)
    pin_model = wb.to_pinocchio(moved)
    assert relative_error(ours, rnea(pin_model, q, dq, ddq, moved.tool_name, f)) < 1e-10
    path = wb.write_urdf(moved, tmp_path / "moved.urdf")
    reloaded = load_urdf(path)
    assert reloaded.joint_names == moved.joint_names
    assert reloaded.tool_name == moved.tool_name
    urdf_model = wb.pinocchio_conversion.load_urdf_model(path)
    assert relative_error(ours, rnea(urdf_model, q, dq, ddq, moved.tool_name, f)) < 1e-10
    assert relative_error(wb.inverse_dynamics(reloaded, q, dq, ddq, f), ours) < 1e-10


def test_static_torques_are_the_potential_energy_gradient(chains):
    """tau(q, 0, 0) = dU/dq with U from Pinocchio's computePotentialEnergy (central differences)."""
    import pinocchio as pin

    chain = chains["iiwa"]
    model = wb.models.load_pinocchio("iiwa")
    data = model.createData()
    q, _, _, _ = random_state(chain, 5, seed=7)
    zero = np.zeros_like(q)
    static = wb.inverse_dynamics(chain, q, zero, zero)
    h = 1e-6
    for s in range(len(q)):
        grad = [
            (pin.computePotentialEnergy(model, data, q[s] + h * e)
             - pin.computePotentialEnergy(model, data, q[s] - h * e)) / (2 * h)
            for e in np.eye(chain.n)
        ]  # fmt: skip
        np.testing.assert_allclose(static[s], grad, atol=1e-6 * np.abs(static).max())


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((np.zeros(6), np.zeros(7), np.zeros(7)), r"q has shape \(6,\); expected \(7,\)"),
        ((np.zeros((3, 7)), np.zeros((4, 7)), np.zeros(7)), "sample counts differ"),
        ((np.full(7, np.nan), np.zeros(7), np.zeros(7)), "q contains nan at iiwa_joint_1"),
        ((np.zeros(7), np.zeros(7), [[0, 0, 0, 0, 0, 0, np.inf]]), "ddq contains inf"),
        ((np.zeros(7), np.zeros(7), "abc"), "ddq is not a numeric array"),
    ],
)
def test_bad_input_raises_workbench_error(chains, args, message):
    with pytest.raises(wb.WorkbenchError, match=message):
        wb.inverse_dynamics(chains["iiwa"], *args)


def test_bad_tool_wrench_shape(chains):
    with pytest.raises(wb.WorkbenchError, match="f_tool has shape"):
        wb.inverse_dynamics(chains["iiwa"], np.zeros(7), np.zeros(7), np.zeros(7), np.zeros(3))
