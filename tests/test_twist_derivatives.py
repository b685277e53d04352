"""d tau / d [eta, q, dq, ddq] against Pinocchio, central differences and CasADi AD."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pinocchio as pin
import pytest

import workbench as wb
from tests.conftest import random_state
from workbench.dynamics.derivatives import (
    forward_dynamics_derivatives,
    rnea_derivatives,
    rnea_derivatives_pinocchio,
    twist_derivatives,
)
from workbench.eta import identifiable_eta_basis, twist_null_directions
from workbench.testing import central_differences
from workbench.testing.casadi_reference import inverse_dynamics_function
from workbench.testing.pinocchio_reference import rnea, tool_fext

ARMS_AND_TREE = ("iiwa", "ur5", "panda_arm", "talos_upper_body")


def relative_error(a, b):
    return np.abs(a - b).max() / np.abs(b).max()


def pinocchio_eta_differences(chain, q, dq, ddq, f_tool, h=1e-6):
    """Central differences of pinocchio.rnea on models rebuilt from chain.with_eta(+-h e_k)."""

    def torques(eta):
        return rnea(wb.to_pinocchio(chain.with_eta(eta)), q, dq, ddq, chain.tool_name, f_tool)

    return central_differences(torques, np.zeros(6 * (chain.n + 1)), h)


@pytest.mark.parametrize("with_tool", [False, True])
@pytest.mark.parametrize("name", ARMS_AND_TREE)
def test_dtau_deta_against_pinocchio_finite_differences(chains, name, with_tool):
    chain = chains[name]
    q, dq, ddq, f = random_state(chain, 2, seed=11)
    f = f if with_tool else None
    d = twist_derivatives(chain, q, dq, ddq, f)
    numeric = pinocchio_eta_differences(chain, q, dq, ddq, f)
    assert relative_error(d.dtau_deta, numeric) < 1e-6
    if not with_tool:
        assert np.all(d.dtau_deta[..., -6:] == 0.0)


@pytest.mark.parametrize("with_tool", [False, True])
@pytest.mark.parametrize("name", ARMS_AND_TREE)
def test_dtau_deta_against_casadi_ad(chains, name, with_tool):
    chain = chains[name]
    q, dq, ddq, f = random_state(chain, 3, seed=12)
    tau_fn = inverse_dynamics_function(chain, with_tool=with_tool)
    eta = ca.MX.sym("eta", 6 * (chain.n + 1))
    args = [ca.MX.sym(s, chain.n) for s in ("q", "dq", "ddq")]
    extra = [ca.MX.sym("f", 6)] if with_tool else []
    jac = ca.Function("J", [eta, *args, *extra], [ca.jacobian(tau_fn(eta, *args, *extra), eta)])
    d = twist_derivatives(chain, q, dq, ddq, f if with_tool else None)
    zero = np.zeros(6 * (chain.n + 1))
    for s in range(len(q)):
        more = [f[s]] if with_tool else []
        ad = np.array(jac(zero, q[s], dq[s], ddq[s], *more))
        tau_ref = np.array(tau_fn(zero, q[s], dq[s], ddq[s], *more)).ravel()
        assert relative_error(d.dtau_deta[s], ad) < 1e-9
        assert relative_error(d.tau[s], tau_ref) < 1e-12


@pytest.mark.parametrize("name", ("iiwa", "ur5", "panda_arm", "planar_2r", "talos_upper_body"))
def test_state_partials_equal_compute_rnea_derivatives(chains, name):
    chain = chains[name]
    q, dq, ddq, f = random_state(chain, 20, seed=13)
    model = wb.models.load_pinocchio(name)
    data = model.createData()
    d = twist_derivatives(chain, q, dq, ddq, f)
    for s in range(len(q)):
        fext = tool_fext(model, chain.tool_name, f[s])
        pin.computeRNEADerivatives(model, data, q[s], dq[s], ddq[s], fext)
        M = np.triu(data.M) + np.triu(data.M, 1).T
        assert relative_error(d.dtau_dq[s], data.dtau_dq) < 1e-10
        assert relative_error(d.dtau_dv[s], data.dtau_dv) < 1e-10
        assert relative_error(d.dtau_da[s], M) < 1e-10
    # the state-only kernel and the Pinocchio path offered by the project agree
    for ours, full in zip(
        rnea_derivatives(chain, q, dq, ddq, f), (d.dtau_dq, d.dtau_dv, d.dtau_da), strict=True
    ):
        np.testing.assert_array_equal(ours, full)
    dq_pin, dv_pin, M_pin = rnea_derivatives_pinocchio(chain, q, dq, ddq, f)
    assert relative_error(d.dtau_dv, dv_pin) < 1e-10
    assert relative_error(d.dtau_dq, dq_pin) < 1e-10
    assert relative_error(d.dtau_da, M_pin) < 1e-10


def test_lambda_layout_and_unbatched_input(chains):
    chain = chains["iiwa"]
    q, dq, ddq, _ = random_state(chain, 1, seed=14)
    d = twist_derivatives(chain, q[0], dq[0], ddq[0])
    n = chain.n
    assert d.dtau_deta.shape == (1, n, 6 * (n + 1))
    assert d.dtau_dlambda.shape == (1, n, 6 * (n + 1) + 3 * n)
    np.testing.assert_array_equal(d.dtau_dlambda[..., -n:], d.dtau_da)


@pytest.mark.parametrize("name", ("ur5", "talos_upper_body"))
def test_forward_dynamics_partials_equal_pinocchio_aba_derivatives(chains, name):
    chain = chains[name]
    q, dq, tau, f = random_state(chain, 5, seed=15)
    tau = tau * 10.0
    model = wb.models.load_pinocchio(name)
    data = model.createData()
    fd = forward_dynamics_derivatives(chain, q, dq, tau, f)
    for s in range(len(q)):
        fext = tool_fext(model, chain.tool_name, f[s])
        pin.computeABADerivatives(model, data, q[s], dq[s], tau[s], fext)
        Minv = np.triu(data.Minv) + np.triu(data.Minv, 1).T
        assert relative_error(fd.ddq[s], data.ddq) < 1e-10
        assert relative_error(fd.dddq_dq[s], data.ddq_dq) < 1e-9
        assert relative_error(fd.dddq_dv[s], data.ddq_dv) < 1e-9
        assert relative_error(fd.dddq_dtau[s], Minv) < 1e-9
    # eta block: central differences of Pinocchio's ABA on rebuilt models
    h, s, k = 1e-6, 0, 3
    e = np.zeros(6 * (chain.n + 1))
    e[k] = h
    fext = tool_fext(model, chain.tool_name, f[s])

    def aba(c):
        m = wb.to_pinocchio(c)
        return pin.aba(m, m.createData(), q[s], dq[s], tau[s], fext)

    numeric = (aba(chain.with_eta(e)) - aba(chain.with_eta(-e))) / (2 * h)
    assert relative_error(fd.dddq_deta[s, :, k], numeric) < 1e-6


@pytest.mark.parametrize("name", ("iiwa", "ur5", "panda_arm", "talos_upper_body"))
def test_null_directions_are_null_and_the_rest_has_full_rank(chains, name):
    chain = chains[name]
    q, dq, ddq, f = random_state(chain, 200, seed=16)
    nulls = twist_null_directions(chain)
    assert [b.shape[1] for b in nulls] == [2 if k == "revolute" else 4 for k in chain.joint_kinds]
    # null: the torques of chain.with_eta(h * direction) do not change (central differences)
    h = 1e-4
    tau = wb.inverse_dynamics(chain, q[:5], dq[:5], ddq[:5], f[:5])
    for j, basis in enumerate(nulls[:3]):
        for direction in basis.T:
            eta = np.zeros(6 * (chain.n + 1))
            eta[6 * j : 6 * j + 6] = h * direction
            moved = wb.inverse_dynamics(chain.with_eta(eta), q[:5], dq[:5], ddq[:5], f[:5])
            assert np.abs(moved - tau).max() < 1e-10 * np.abs(tau).max()
    # the identifiable directions have full rank on a generic sample set (tool wrench on)
    basis = identifiable_eta_basis(chain)
    J = (twist_derivatives(chain, q, dq, ddq, f).dtau_deta @ basis).reshape(-1, basis.shape[1])
    singular = np.linalg.svd(J, compute_uv=False)
    assert singular[-1] > 1e-6 * singular[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((np.zeros(6), np.zeros(7), np.zeros(7)), r"q has shape \(6,\)"),
        ((np.zeros(7), np.full(7, np.nan), np.zeros(7)), "dq contains nan"),
        ((np.zeros((2, 7)), np.zeros((3, 7)), np.zeros(7)), "sample counts differ"),
    ],
)
def test_bad_input(chains, args, message):
    with pytest.raises(wb.WorkbenchError, match=message):
        twist_derivatives(chains["iiwa"], *args)
