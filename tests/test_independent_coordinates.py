"""Reaching on independent coordinates: closed states by Pinocchio's measure, Jacobians by
central differences.

The callbacks of :mod:`workbench.ocp.independent_coordinates` take the motors' and idle
joints' values, velocities and accelerations and solve the passive joints inside. Here,
on example-parallel-robots folders (welds with ball joints near gimbal lock on
cassie_like, point closures on the iso3d five-bar, idle rods on the delta): the tree
states they build close the loops in Pinocchio's forward kinematics of the folder's URDF
(frames coincide, velocities in the null space of Pinocchio's constraint Jacobian), keep
the independent coordinates given, and every callback's Jacobian (the implicit function
theorem on the closures' three levels) equals central differences of its values.
"""

from __future__ import annotations

import numpy as np
import pinocchio as pin
import pytest
import yaml

from workbench.closed_chains import load
from workbench.closed_chains.kinematics import independent_rows
from workbench.ocp.independent_coordinates import independent_callbacks
from workbench.resources import shipped
from workbench.testing import central_differences

FOLDERS = shipped("models") / "parallel_robots"
KNOTS = 4
CASES = {"cassie_like": "foot", "robot_delta": "effector", "5bar_linkage_iso3d": "effector"}


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request):
    name = request.param
    chain = load(FOLDERS / name / "robot.yaml", tool=CASES[name])
    rng = np.random.default_rng(3)
    m = len(chain.active)
    x = np.concatenate(
        [chain.home[chain.active] + 0.03 * rng.standard_normal((KNOTS, m)),
         rng.standard_normal((KNOTS, m)), rng.standard_normal((KNOTS, m))], axis=1,
    )  # fmt: skip
    rows = independent_rows(chain, chain.home)
    return name, chain, x, independent_callbacks(chain, KNOTS, rows, chain.home)


@pytest.mark.parametrize("stacked", [False, True])
def test_closed_states_close_the_loops_in_pinocchio(case, stacked):
    """``stacked``: the knots twice, the second time with other rates, as the bridge's
    perturbations of the rates stack them (each value is closed once for both)."""
    name, chain, x, functions = case
    n, m = chain.n, len(chain.active)
    if stacked:
        other = x.copy()
        other[:, m:] = np.random.default_rng(4).standard_normal((len(x), 2 * m))
        x = np.concatenate([x, other])
    X, _ = functions["states"](x, False)
    for level in range(3):
        assert np.array_equal(X[:, chain.active + level * n], x[:, level * m : (level + 1) * m])
    model = pin.buildModelFromUrdf(str(FOLDERS / name / "robot.urdf"))
    data = model.createData()
    spec = yaml.safe_load((FOLDERS / name / "robot.yaml").read_text())
    for q, dq in zip(X[:, :n], X[:, n : 2 * n], strict=True):
        pin.computeJointJacobians(model, data, q)
        pin.framesForwardKinematics(model, data, q)
        for (a, b), kind in zip(spec["closed_loop"], spec["type"], strict=True):
            A, B = data.oMf[model.getFrameId(a)], data.oMf[model.getFrameId(b)]
            error = pin.log6(A.actInv(B)).vector if kind == "6d" else A.translation - B.translation
            assert np.abs(error).max() < 1e-9
            J = [pin.getFrameJacobian(model, data, model.getFrameId(f), pin.LOCAL_WORLD_ALIGNED)
                 for f in (a, b)]  # fmt: skip
            relative = ((J[0] - J[1]) @ dq)[: 6 if kind == "6d" else 3]
            assert np.abs(relative).max() < 1e-9 * max(1.0, np.abs(dq).max())


@pytest.mark.parametrize("callback", ["torque", "task", "passive"])
def test_callback_jacobians_match_central_differences(case, callback):
    name, chain, x, functions = case
    if callback not in functions:
        pytest.skip(f"{name}: no passive joint has a finite limit")
    function = functions[callback]
    inputs = x[-1:, : len(chain.active)] if callback == "task" else x
    value, jacobian = function.evaluate(inputs, np.zeros(0), True)[:2]
    assert np.isfinite(value).all()
    numeric = central_differences(
        lambda y: function.evaluate(y, np.zeros(0), False)[0], inputs, 1e-6, samples=True
    )
    scale = max(1.0, np.abs(jacobian).max())
    assert np.abs(jacobian - numeric).max() <= 1e-6 * scale
