"""The excitation criteria written in CasADi SX, independent of the project's kernels, and the
check of the analytic gradients against CasADi's algorithmic differentiation of them.

Reference (no workbench dynamics code): inverse dynamics in body frames with symbolic
inertial parameters phi (``tests/casadi_reference.py``'s recursion), the regressor
``Y = d tau / d phi`` and ``d tau / d eta`` by CasADi, the joint-frame standard columns
by the 10x10 motion matrix of each joint frame, Coulomb friction as ``tanh``, the
trajectory as the Fourier basis times theta, ``F = sum X^T X``, ``log det F`` through an
SX Cholesky factorisation and ``log cond`` through the eigenvalues, and the gradient by
``casadi.gradient``. ``criterion_functions`` is also used by benchmarks/bench_excitation.py.
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.excitation.experiment import dynamic_information, twist_information
from workbench.excitation.trajectory import FourierSpace
from workbench.identification.drives import Drives
from workbench.testing.excitation_reference import (
    analytic_gradient,
    central_gradient,
    criterion_functions,
)


@pytest.fixture(scope="module")
def iiwa():
    return wb.models.load("iiwa")


def _theta(space, seed=0):
    rng = np.random.default_rng(seed)
    return 0.3 * rng.normal(size=space.size)


@pytest.mark.parametrize("terms", [("friction",), ("friction", "rotor_inertia", "offset")])
def test_dynamic_logdet_gradient_matches_casadi_ad(iiwa, terms):
    drives = Drives(iiwa.n, terms, min_speed=np.full(iiwa.n, 0.05))
    information = dynamic_information(iiwa, drives, np.full(iiwa.n, 2.0))
    space = FourierSpace(iiwa.n, 10.0, 5)
    points = 12
    theta = _theta(space)
    value, grad = analytic_gradient(information, space, points, theta)
    reference = criterion_functions(information, space, points)
    J, g = (np.asarray(v).ravel() for v in reference(theta))
    assert abs(value - J[0]) <= 1e-9 * abs(J[0])
    assert np.max(np.abs(grad - g)) <= 1e-9 * np.max(np.abs(g))


def test_dynamic_gradients_match_central_differences(iiwa):
    drives = Drives(iiwa.n, ("friction",), min_speed=np.full(iiwa.n, 0.05))
    information = dynamic_information(iiwa, drives, 0.01 * iiwa.effort_limit)
    space = FourierSpace(iiwa.n, 10.0, 5)
    points = 30
    theta = _theta(space, 1)
    some = np.random.default_rng(3).choice(space.size, 16, replace=False)
    for criterion in ("logdet", "condition"):
        _, grad = analytic_gradient(information, space, points, theta, criterion)
        fd = central_gradient(information, space, points, theta, criterion, components=some)
        error = np.max(np.abs(grad[some] - fd[some]))
        assert error <= 1e-6 * np.max(np.abs(grad)), criterion


def test_twist_logdet_gradient_matches_casadi_ad_and_central_differences():
    chain = wb.models.load("planar_2r")
    drives = Drives(chain.n, ("friction",), min_speed=np.full(chain.n, 0.05))
    information = twist_information(chain, drives, np.full(chain.n, 0.5))
    assert information.eta_count > 0
    space = FourierSpace(chain.n, 4.0, 4)
    points = 16
    theta = _theta(space, 2)
    value, grad = analytic_gradient(information, space, points, theta)
    J, g = (
        np.asarray(v).ravel() for v in criterion_functions(information, space, points, True)(theta)
    )
    assert abs(value - J[0]) <= 1e-9 * abs(J[0])
    assert np.max(np.abs(grad - g)) <= 1e-9 * np.max(np.abs(g))
    fd = central_gradient(information, space, points, theta)
    assert np.max(np.abs(grad - fd)) <= 1e-6 * np.max(np.abs(fd))
