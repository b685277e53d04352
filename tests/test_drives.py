"""Drive terms of the torque model (workbench.identification.drives) against per-joint closed forms
and an independent motor-side physical model (rotor inertia, viscous and Coulomb friction of
each motor, reaching the joints through R^T by virtual power)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import workbench as wb
from workbench.identification.drives import (
    Drives,
    drive_file_text,
    read_drive_file,
    sidecar_path,
)
from workbench.resources import shipped

ALL = ("friction", "rotor_inertia", "offset", "coupled_motors")


def tx40_transmission() -> np.ndarray:
    """The Staubli TX40's motor-from-joint matrix (its published configuration)."""
    R = np.diag([32.0, 32.0, 45.0, -48.0, 45.0, 32.0])
    R[5, 4] = 32.0
    return R


def random_coupled(seed: int = 0) -> np.ndarray:
    """A dense 3x3 motor-from-joint matrix: every motor turns with every joint."""
    rng = np.random.default_rng(seed)
    return np.diag([50.0, -30.0, 40.0]) + rng.normal(scale=10.0, size=(3, 3))


def moving_state(n: int, samples: int, seed: int, floor: float = 0.05):
    """dq, ddq with every joint speed and every motor speed away from zero."""
    rng = np.random.default_rng(seed)
    dq = rng.normal(size=(samples, n))
    dq = np.where(np.abs(dq) < floor, floor, dq)
    return dq, rng.normal(size=(samples, n))


def motor_model_torques(R, J, b, c, dq, ddq, offsets=None):
    """Joint torques R^T tau_m of motors tau_m = J ddq_m + b dq_m + c sign(dq_m), q_m = R q."""
    dq_m, ddq_m = dq @ R.T, ddq @ R.T
    tau_m = J * ddq_m + b * dq_m + c * np.sign(dq_m)
    tau = tau_m @ R  # (R^T tau_m) for every row
    return tau if offsets is None else tau + offsets


def parameters_of_motor_model(R, J, b, c, offsets=None):
    """Joint-side parameters by name (module docstring): the diagonal parts of every motor go
    to Ia_j and fv_j; a motor that drives one joint puts |R_kj| c_k in fs_j; a coupled motor k
    has Iam_k = R_kk^2 J_k, fvm_k = R_kk^2 b_k, fsm_k = |R_kk| c_k."""
    n = R.shape[0]
    values = {f"{p}{j + 1}": 0.0 for j in range(n) for p in ("Ia", "fv", "fs", "off")}
    coupled = [k for k in range(n) if np.count_nonzero(R[k]) > 1]
    for k in range(n):
        for j in np.flatnonzero(R[k]):
            values[f"Ia{j + 1}"] += R[k, j] ** 2 * J[k]
            values[f"fv{j + 1}"] += R[k, j] ** 2 * b[k]
            if k not in coupled:
                values[f"fs{j + 1}"] += abs(R[k, j]) * c[k]
    for k in coupled:
        values[f"Iam{k + 1}"] = R[k, k] ** 2 * J[k]
        values[f"fvm{k + 1}"] = R[k, k] ** 2 * b[k]
        values[f"fsm{k + 1}"] = abs(R[k, k]) * c[k]
    if offsets is not None:
        values |= {f"off{j + 1}": float(offsets[j]) for j in range(n)}
    return values, coupled


def test_per_joint_columns():
    """fv: dq_j, fs: sign(dq_j), Ia: ddq_j, off: 1, each in row j only; names interleaved
    per joint (Ia, fv, fs, off)."""
    n = 3
    drives = Drives(n, ("friction", "rotor_inertia", "offset"))
    assert drives.names == [f"{p}{j}" for j in (1, 2, 3) for p in ("Ia", "fv", "fs", "off")]
    dq, ddq = moving_state(n, 20, seed=1)
    dq[3, 1] = 0.0
    C = drives.columns(dq, ddq)
    assert C.shape == (20, n, 4 * n)
    for j in range(n):
        for name, column in (
            ("Ia", ddq[:, j]),
            ("fv", dq[:, j]),
            ("fs", np.sign(dq[:, j])),
            ("off", np.ones(20)),
        ):
            k = drives.names.index(f"{name}{j + 1}")
            expected = np.zeros((20, n))
            expected[:, j] = column
            np.testing.assert_array_equal(C[:, :, k], expected)
    assert C[3, 1, drives.names.index("fs2")] == 0.0


def test_default_terms_and_no_terms():
    """Default: viscous and Coulomb friction only; no terms: an empty (N, n, 0) block."""
    assert Drives(2).names == ["fv1", "fs1", "fv2", "fs2"]
    dq, ddq = moving_state(2, 5, seed=2)
    assert Drives(2, ()).columns(dq, ddq).shape == (5, 2, 0)


@pytest.mark.parametrize(
    ("R", "expected_coupled"),
    [(tx40_transmission(), [5]), (random_coupled(0), [0, 1, 2]), (random_coupled(7), [0, 1, 2])],
    ids=["tx40", "dense3-0", "dense3-7"],
)
def test_coupled_motors_reproduce_the_motor_side_model(R, expected_coupled):
    """For random motor rotor inertias, viscous and Coulomb friction and offsets, C(dq, ddq) x
    with x derived here from J, b, c and R equals R^T tau_m to 1e-12 (all speeds away from 0)."""
    n = R.shape[0]
    rng = np.random.default_rng(n)
    drives = Drives(n, ALL, R)
    assert drives.coupled == expected_coupled
    assert drives.names[-3 * len(expected_coupled) :] == [
        f"{p}{k + 1}" for k in expected_coupled for p in ("Iam", "fvm", "fsm")
    ]
    dq, ddq = moving_state(n, 200, seed=3)
    dq_m = dq @ R.T
    assert np.abs(dq_m).min() > 1e-3  # no motor at rest either
    for trial in range(3):
        J = rng.uniform(1e-5, 1e-3, size=n)
        b = rng.uniform(1e-4, 1e-2, size=n)
        c = rng.uniform(1e-3, 1e-1, size=n)
        offsets = rng.normal(size=n)
        values, coupled = parameters_of_motor_model(R, J, b, c, offsets)
        assert coupled == expected_coupled
        x = np.array([values[name] for name in drives.names])
        expected = motor_model_torques(R, J, b, c, dq, ddq, offsets)
        got = drives.columns(dq, ddq) @ x
        assert np.abs(got - expected).max() < 1e-12 * np.abs(expected).max(), trial


def test_coupled_columns_are_ignored_without_the_term():
    """Without 'coupled_motors' the transmission adds no columns."""
    drives = Drives(6, ("friction", "rotor_inertia"), tx40_transmission())
    assert drives.coupled == []
    assert len(drives.names) == 18


@pytest.mark.parametrize("R", [tx40_transmission(), random_coupled(3)], ids=["tx40", "dense3"])
def test_coulomb_columns_fade_below_min_speed(R):
    """With min_speed (Drives docstring) per-joint Coulomb columns are tanh(3 dq_j / min_speed_j),
    within 0.5 % of sign(dq_j) above min_speed_j and odd through rest; a coupled motor's are
    tanh(3 dq_mk / (|R_kk| min_speed_k)) R_k / |R_kk| with dq_mk = R_k . dq. They equal the
    motor-side model whose motor Coulomb friction is c_k tanh(3 dq_mk / (|R_kk| min_speed_k))."""
    n = R.shape[0]
    rng = np.random.default_rng(11)
    min_speed = rng.uniform(0.05, 0.2, size=n)
    drives = Drives(n, ALL, R, min_speed)
    dq = rng.normal(scale=0.2, size=(400, n))
    dq[0] = 0.0
    ddq = rng.normal(size=(400, n))
    C = drives.columns(dq, ddq)
    for j in range(n):
        fs = C[:, j, drives.names.index(f"fs{j + 1}")]
        np.testing.assert_allclose(fs, np.tanh(3.0 * dq[:, j] / min_speed[j]), rtol=1e-14)
        fast = np.abs(dq[:, j]) >= min_speed[j]
        assert fast.any() and (~fast).any()
        assert np.abs(fs[fast] - np.sign(dq[fast, j])).max() <= 0.005
        assert fs[0] == 0.0 and np.all(np.abs(fs) <= 1.0)
        others = np.delete(np.arange(n), j)
        np.testing.assert_array_equal(C[:, others, drives.names.index(f"fs{j + 1}")], 0.0)
    threshold = np.abs(np.diag(R)) * min_speed
    speed = dq @ R.T
    for k in drives.coupled:
        column = C[:, :, drives.names.index(f"fsm{k + 1}")]
        expected = np.tanh(3.0 * speed[:, k] / threshold[k])[:, None] * R[k] / abs(R[k, k])
        np.testing.assert_allclose(column, expected, rtol=1e-14, atol=1e-15)
    J, b, c = rng.uniform(1e-4, 1e-3, size=(3, n))
    values, _ = parameters_of_motor_model(R, J, b, c)
    x = np.array([values[name] for name in drives.names])
    dq_m, ddq_m = dq @ R.T, ddq @ R.T
    tau_m = J * ddq_m + b * dq_m + c * np.tanh(3.0 * dq_m / threshold)
    expected = tau_m @ R
    np.testing.assert_allclose(C @ x, expected, rtol=0, atol=1e-12 * np.abs(expected).max())


def test_coupled_motor_with_zero_diagonal_is_finite_or_refused():
    """A coupled motor whose own joint entry R_kk is zero (R invertible) must either be refused
    with a WorkbenchError or give finite columns."""
    R = np.array([[2.0, 0.0, 0.0], [1.0, 0.0, 3.0], [0.0, 4.0, 1.0]])
    assert abs(np.linalg.det(R)) > 1.0
    dq, ddq = moving_state(3, 10, seed=4)
    try:
        drives = Drives(3, ALL, R)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            C = drives.columns(dq, ddq)
    except wb.WorkbenchError:
        return
    assert np.all(np.isfinite(C))


def test_bad_terms_and_transmission_shape():
    """Unknown terms and a transmission of the wrong shape are WorkbenchErrors naming them."""
    with pytest.raises(wb.WorkbenchError, match=r"unknown torque-model term.*frictoin"):
        Drives(2, ("frictoin",))
    with pytest.raises(wb.WorkbenchError, match=r"shape \(3, 3\); expected \(2, 2\)"):
        Drives(2, ALL, np.eye(3))


# -------------------------------------------------------------- drive files
def test_drive_file_round_trip(tmp_path):
    """drive_file_text -> read_drive_file gives back the terms, the transmission and every
    value exactly (floats written by repr)."""
    R = tx40_transmission()
    drives = Drives(6, ALL, R)
    rng = np.random.default_rng(5)
    values = rng.normal(size=len(drives.names)) * 10.0 ** rng.integers(-6, 3, len(drives.names))
    std = np.abs(values) * 0.01
    path = tmp_path / "robot.drives.toml"
    path.write_text(drive_file_text(drives, values, std, note="line one\nline two"))
    back, read = read_drive_file(path, 6)
    assert back.terms == ALL and back.coupled == [5]
    np.testing.assert_array_equal(back.transmission, R)
    assert list(read) == drives.names
    assert [read[name] for name in drives.names] == values.tolist()
    text = path.read_text()
    assert "# line one\n# line two\n" in text and "# std " in text


def test_drive_file_without_transmission(tmp_path):
    """Friction only and no transmission round-trip too."""
    drives = Drives(2)
    path = tmp_path / "a.drives.toml"
    path.write_text(drive_file_text(drives, np.array([0.5, 1.5, 2.5, 3.5])))
    back, read = read_drive_file(path, 2)
    assert back.transmission is None and back.terms == ("friction",)
    assert read == {"fv1": 0.5, "fs1": 1.5, "fv2": 2.5, "fs2": 3.5}


def test_drive_file_errors_name_file_and_key(tmp_path):
    """An unknown parameter, a wrong transmission shape and a typo key are errors naming the
    file and the key."""
    path = tmp_path / "bad.drives.toml"
    path.write_text('terms = ["friction"]\n[values]\nfv1 = 1.0\nIa1 = 2.0\n')
    with pytest.raises(wb.WorkbenchError) as info:
        read_drive_file(path, 2)
    assert str(path) in str(info.value) and "[values] Ia1" in str(info.value)
    path.write_text('terms = ["friction"]\ntransmission = [[1.0, 0.0]]\n[values]\n')
    with pytest.raises(wb.WorkbenchError) as info:
        read_drive_file(path, 2)
    assert str(path) in str(info.value) and "transmission" in str(info.value)
    path.write_text('terms = ["friction"]\ntransmision = [[1.0]]\n[values]\n')
    with pytest.raises(wb.WorkbenchError, match=r"unknown key.*transmision"):
        read_drive_file(path, 1)


def test_shipped_tx40_drive_file_matches_its_log_description():
    """The TX40 drive file's transmission is the ratios and coupling of its log description
    (models/staubli_tx40/identification.toml, read here with tomllib)."""
    import tomllib

    folder = shipped("models") / "staubli_tx40"
    drives, values = read_drive_file(folder / "tx40.drives.toml", 6)
    description = tomllib.loads((folder / "identification.toml").read_text())
    R = np.diag(description["transmission"]["ratios"])
    for motor, joint, ratio in description["transmission"]["couplings"]:
        R[motor - 1, joint - 1] = ratio
    np.testing.assert_array_equal(drives.transmission, R)
    np.testing.assert_array_equal(drives.transmission, tx40_transmission())
    assert set(values) == set(drives.names)


def test_sidecar_path():
    """robot.urdf -> robot.drives.toml in the same folder (also for dotted names)."""
    assert str(sidecar_path("models/x/robot.urdf")) == "models/x/robot.drives.toml"
    assert str(sidecar_path("/a/b.c/tx40.v2.urdf")) == "/a/b.c/tx40.v2.drives.toml"
