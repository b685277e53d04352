"""Physically consistent identification (workbench.identification.consistency) against an
independent solver of the same convex problem (CasADi + IPOPT, pseudo-inertias written as
F F^T + delta 1), pseudo-inertias of point masses, and the objective of the module docstring
evaluated here."""

from __future__ import annotations

import re
from dataclasses import replace

import casadi as ca
import numpy as np
import pytest

import workbench as wb
from workbench.calibration.fitting.dynamic import calibrate_dynamic
from workbench.calibration.simulation.simulate import simulate_log
from workbench.identification.consistency import consistent_fit, is_consistent, pseudo_inertia_map
from workbench.identification.drives import Drives
from workbench.identification.torque_model import TorqueModel
from workbench.inertia import pseudo_inertia

DELTA = 1e-9  # the module docstring's smallest pseudo-inertia eigenvalue
FRICTION = ("fv", "fs")


@pytest.fixture(scope="module")
def iiwa() -> wb.Chain:
    return wb.models.load("iiwa")


@pytest.fixture(scope="module")
def consistent_iiwa(iiwa) -> wb.Chain:
    """The iiwa with 0.01 kg m^2 added to every link's inertia about its centre of mass: its
    shipped (identified) inertias violate the triangle inequality on links 4 and 7 and sit on
    it on link 2."""
    mass, com, inertia_com = wb.inertia.com_from_phi(iiwa.phi)
    phi = wb.inertia.phi_from_com(mass, com, inertia_com + 0.01 * np.eye(3))
    return replace(iiwa, inertias=wb.inertia.matrix_from_phi(phi))


@pytest.fixture(scope="module")
def noisy(iiwa):
    """A noisy identification whose least-squares estimate is not consistent, and the
    consistent fit started from the nominal model."""
    log, truth = simulate_log(iiwa, kind="dynamic", samples=1000, noise=0.01, seed=5)
    fit = calibrate_dynamic(iiwa, log)
    x0 = fit.model.values()
    result = consistent_fit(fit.model, fit.base, x0, fit.beta, fit.covariance, eps=EPS)
    return fit, x0, result, truth


def prefix(name: str) -> str:
    return re.fullmatch(r"([A-Za-z]+)\d+", name).group(1)


def index(model: TorqueModel, name: str) -> int:
    return model.names.index(name)


def pseudo_inertia_by_names(model: TorqueModel, x, link: int, backend=np):
    """J = [[tr(I)/2 1 - I, h], [h^T, m]] of link ``link`` (0-based), read from x by the
    standard names (Ixy the tensor entry, h = (mx, my, mz)); works on NumPy or CasADi x."""
    j = link + 1

    def v(p):
        return x[index(model, f"{p}{j}")]

    I = [
        [v("Ixx"), v("Ixy"), v("Ixz")],
        [v("Ixy"), v("Iyy"), v("Iyz")],
        [v("Ixz"), v("Iyz"), v("Izz")],
    ]
    half_trace = (v("Ixx") + v("Iyy") + v("Izz")) / 2
    h = [v("mx"), v("my"), v("mz")]
    rows = [[(half_trace if r == c else 0) - I[r][c] for c in range(3)] + [h[r]] for r in range(3)]
    rows.append([*h, v("m")])
    if backend is np:
        return np.array(rows, dtype=float)
    return ca.vertcat(*[ca.horzcat(*row) for row in rows])


def friction_mask(model: TorqueModel) -> np.ndarray:
    return np.array([prefix(name) in FRICTION for name in model.names])


EPS = 1e-8  # the regularisation weight passed to consistent_fit in these tests


def docstring_objective(model, base, x0, beta, covariance, eps=EPS):
    """f(x) = 1/2 (B x - beta)^T C^-1 (B x - beta) + eps'/2 |(x - x0) / s|^2 with s each
    parameter's nominal size (at least 1e-3 of the largest, or of 1) and eps' = eps times the
    weakest non-zero curvature of the data term in x / s; as a function of w = x / s."""
    s = np.maximum(np.abs(x0), 1e-3 * max(np.abs(x0).max(), 1.0))
    information = np.linalg.pinv(covariance)
    Bs = base.matrix * s
    curvature = np.linalg.eigvalsh(Bs.T @ information @ Bs)
    weight = eps * curvature[curvature > 1e-12 * curvature[-1]].min()
    w0 = x0 / s

    def f(w, backend=np):
        r = (Bs @ w - beta) if backend is np else ca.mtimes(ca.DM(Bs), w) - beta
        d = w - w0
        if backend is np:
            return 0.5 * r @ information @ r + 0.5 * weight * d @ d
        return 0.5 * ca.mtimes([r.T, ca.DM(information), r]) + 0.5 * weight * ca.dot(d, d)

    return f, s


def ipopt_solution(model, f, s, starts):
    """min f(w) s.t. J_i(s w) = F_i F_i^T + delta 1 (F_i free 4x4), friction w >= 0, by IPOPT
    from each start x; returns the objectives and solutions x."""
    P, n = model.size, model.chain.n
    w = ca.SX.sym("w", P)
    F = [ca.SX.sym(f"F{i}", 4, 4) for i in range(n)]
    x = s * w
    g = []
    for i in range(n):
        E = pseudo_inertia_by_names(model, x, i, backend=ca) - ca.mtimes(F[i], F[i].T)
        E -= DELTA * ca.DM.eye(4)
        g += [E[r, c] for r in range(4) for c in range(r, 4)]
    variables = ca.vertcat(w, *[ca.reshape(Fi, 16, 1) for Fi in F])
    options = {"print_time": False, "ipopt.print_level": 0, "ipopt.sb": "yes"}
    options |= {"ipopt.tol": 1e-12, "ipopt.constr_viol_tol": 1e-12, "ipopt.max_iter": 3000}
    options |= {"ipopt.bound_relax_factor": 0.0}
    solver = ca.nlpsol(
        "consistent", "ipopt", {"x": variables, "f": f(w, ca), "g": ca.vertcat(*g)}, options
    )
    lower = np.full(P + 16 * n, -np.inf)
    lower[:P][friction_mask(model)] = 0.0
    results = []
    for start in starts:
        x_start = start.copy()
        x_start[friction_mask(model)] = np.maximum(x_start[friction_mask(model)], 0.0)
        factors = []  # F with F F^T = J - delta 1, negative eigenvalues clipped to zero
        for i in range(n):
            values, vectors = np.linalg.eigh(pseudo_inertia_by_names(model, x_start, i))
            factors.append(vectors * np.sqrt(np.maximum(values - DELTA, 0.0)))
        guess = np.concatenate([x_start / s, *[a.reshape(-1, order="F") for a in factors]])
        out = solver(x0=guess, lbx=lower, lbg=0.0, ubg=0.0)
        x_opt = s * np.array(out["x"][:P]).ravel()
        violation = float(np.abs(np.array(out["g"])).max())
        results.append((float(out["f"]), x_opt, violation))
    return results


def test_result_is_consistent(noisy):
    """The estimate is not consistent; the result is: every link's pseudo-inertia (built here
    from the names) has eigenvalues above delta, friction is non-negative, and is_consistent
    agrees on both."""
    fit, _, result, _ = noisy
    model = fit.model
    assert not is_consistent(model, fit.x)
    eigenvalues = [
        np.linalg.eigvalsh(pseudo_inertia_by_names(model, result.x, i)).min()
        for i in range(model.chain.n)
    ]
    assert min(eigenvalues) > DELTA * (1 - 1e-6)
    assert result.x[friction_mask(model)].min() >= 0.0
    assert is_consistent(model, result.x)
    assert result.gap_bound <= 1e-10 * max(1.0, abs(result.objective))


def test_result_beats_other_consistent_models(noisy, consistent_iiwa):
    """f (the module docstring's objective, evaluated here) is lower at the result than at
    consistent models between it and a consistent iiwa with friction 0.5 (the consistent set
    is convex)."""
    fit, x0, result, _ = noisy
    model = fit.model
    f, s = docstring_objective(model, fit.base, x0, fit.beta, fit.covariance)
    other = TorqueModel(consistent_iiwa, model.drives).values(np.full(2 * model.chain.n, 0.5))
    assert is_consistent(model, other)
    for t in (1.0, 0.5, 0.1, 0.01):
        mixed = (1 - t) * result.x + t * other
        assert f(result.x / s) <= f(mixed / s) * (1 + 1e-6), t


def test_reported_objective_is_the_docstring_objective(noisy):
    """ConsistentFit.objective is f(x) of the module docstring (evaluated here from the
    residual B x - beta) to 1e-9 relative."""
    fit, x0, result, _ = noisy
    f, s = docstring_objective(fit.model, fit.base, x0, fit.beta, fit.covariance)
    assert result.objective == pytest.approx(f(result.x / s), rel=1e-9)


def test_objective_matches_ipopt(noisy):
    """IPOPT on the same convex problem with each pseudo-inertia written as F F^T + delta 1 (F
    free) and friction >= 0, started from the workbench solution and from the nominal model,
    finds no lower objective: workbench is within 1e-6 (relative) of IPOPT's best feasible
    one."""
    fit, x0, result, _ = noisy
    model = fit.model
    f, s = docstring_objective(model, fit.base, x0, fit.beta, fit.covariance)
    runs = ipopt_solution(model, f, s, [result.x, x0])
    feasible = [value for value, _, violation in runs if violation < 1e-9]
    assert feasible, runs
    best = min(feasible)
    ours = f(result.x / s)
    assert ours <= best * (1 + 1e-6), (ours, best)
    # and IPOPT's optimum is essentially the same model
    for value, x_opt, violation in runs:
        if violation < 1e-9 and value <= best * (1 + 1e-6):
            difference = np.abs(fit.base.matrix @ (x_opt - result.x)).max()
            assert difference < 1e-6 * np.abs(fit.beta).max()


def consistent_estimate(chain, noise):
    """Identification on a consistent robot whose minimum-norm completion is consistent."""
    log, truth = simulate_log(
        chain, kind="dynamic", samples=1000, noise=noise, friction=1.0, seed=5
    )
    drives = Drives(chain.n)
    friction = {f"fv{j + 1}": v for j, v in enumerate(truth.viscous)}
    friction |= {f"fs{j + 1}": c for j, c in enumerate(truth.coulomb)}
    return calibrate_dynamic(chain, log), np.array([friction[k] for k in drives.names])


@pytest.mark.parametrize("noise", [0.0, 1e-3])
def test_already_consistent_estimate_keeps_beta(consistent_iiwa, noise):
    """When the least-squares estimate's minimum-norm completion is already consistent, the
    consistent fit (nominal x0 with the true friction) reproduces the estimated base
    parameters: B x = beta to 1e-8 relative."""
    fit, friction = consistent_estimate(consistent_iiwa, noise)
    assert fit.physically_consistent and is_consistent(fit.model, fit.x)
    x0 = fit.model.values(friction)
    result = consistent_fit(fit.model, fit.base, x0, fit.beta, fit.covariance)
    assert np.abs(fit.base.matrix @ result.x - fit.beta).max() <= 1e-8 * np.abs(fit.beta).max()
    assert is_consistent(fit.model, result.x)


@pytest.mark.parametrize("noise", [0.0, 1e-3])
def test_already_consistent_estimate_keeps_beta_from_zero_friction(consistent_iiwa, noise):
    """As above with calibrate_dynamic's default nominal model (zero friction): B x = beta to
    1e-8 relative."""
    fit, _ = consistent_estimate(consistent_iiwa, noise)
    assert fit.physically_consistent
    result = consistent_fit(fit.model, fit.base, fit.model.values(), fit.beta, fit.covariance)
    assert np.abs(fit.base.matrix @ result.x - fit.beta).max() <= 1e-8 * np.abs(fit.beta).max()


def point_mass_parameters(model: TorqueModel, link: int, masses, points) -> dict[str, float]:
    """Standard parameters of point masses (Ixx = sum m (y^2 + z^2), Ixy = -sum m x y, ...)."""
    j = link + 1
    I = sum(m * (p @ p * np.eye(3) - np.outer(p, p)) for m, p in zip(masses, points, strict=True))
    h = sum(m * p for m, p in zip(masses, points, strict=True))
    values = {f"Ixx{j}": I[0, 0], f"Ixy{j}": I[0, 1], f"Ixz{j}": I[0, 2], f"Iyy{j}": I[1, 1]}
    values |= {f"Iyz{j}": I[1, 2], f"Izz{j}": I[2, 2], f"m{j}": float(np.sum(masses))}
    values |= {f"mx{j}": h[0], f"my{j}": h[1], f"mz{j}": h[2]}
    return values


def test_pseudo_inertia_map_of_point_masses_and_random_x(iiwa):
    """A x is the pseudo-inertia sum m [p; 1][p; 1]^T of point masses placed in each link (a
    physical identity), and equals pseudo_inertia(link_phi(x)) and the matrix built from the
    names for random x."""
    model = TorqueModel(iiwa, Drives(iiwa.n, ("friction", "rotor_inertia", "offset")))
    A = pseudo_inertia_map(model)
    assert A.shape == (iiwa.n, 16, model.size)
    rng = np.random.default_rng(9)
    x = rng.normal(size=model.size)
    expected = []
    for link in range(iiwa.n):
        masses, points = rng.uniform(0.1, 2.0, size=5), rng.normal(scale=0.3, size=(5, 3))
        for name, value in point_mass_parameters(model, link, masses, points).items():
            x[index(model, name)] = value
        expected.append(
            sum(m * np.outer([*p, 1], [*p, 1]) for m, p in zip(masses, points, strict=True))
        )
    got = (A @ x).reshape(iiwa.n, 4, 4)
    np.testing.assert_allclose(got, np.array(expected), rtol=0, atol=1e-12)
    for _ in range(3):
        x = rng.normal(size=model.size)
        got = (A @ x).reshape(iiwa.n, 4, 4)
        np.testing.assert_allclose(got, pseudo_inertia(model.link_phi(x)), rtol=0, atol=1e-14)
        for link in range(iiwa.n):
            np.testing.assert_allclose(
                got[link], pseudo_inertia_by_names(model, x, link), rtol=0, atol=1e-14
            )
    drive_columns = [index(model, name) for name in model.drives.names]
    np.testing.assert_array_equal(A[:, :, drive_columns], 0.0)


def test_is_consistent_cases(iiwa):
    """Point masses in general position: consistent; a negative mass, a flat (coplanar) body,
    or a negative friction coefficient: not consistent; a negative offset is allowed."""
    model = TorqueModel(iiwa, Drives(iiwa.n, ("friction", "offset")))
    rng = np.random.default_rng(4)
    x = np.zeros(model.size)
    for link in range(iiwa.n):
        points = rng.normal(scale=0.2, size=(6, 3))
        for name, value in point_mass_parameters(model, link, np.ones(6), points).items():
            x[index(model, name)] = value
    x[friction_mask(model)] = 0.5
    x[index(model, "off3")] = -2.0
    assert is_consistent(model, x)
    bad = x.copy()
    bad[index(model, "m2")] = -bad[index(model, "m2")]
    assert not is_consistent(model, bad)
    flat = x.copy()
    points = rng.normal(scale=0.2, size=(6, 3))
    points[:, 2] = 0.0
    for name, value in point_mass_parameters(model, 4, np.ones(6), points).items():
        flat[index(model, name)] = value
    assert np.linalg.eigvalsh(pseudo_inertia_by_names(model, flat, 4)).min() < 1e-12
    assert not is_consistent(model, flat, margin=1e-9)
    bad = x.copy()
    bad[index(model, "fs5")] = -1e-6
    assert not is_consistent(model, bad)
