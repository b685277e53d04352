"""The identification torque model (workbench.identification.torque_model) against Pinocchio's rnea
and joint-torque regressor, drive torques written out here, the rank of the regressor, and the
published TX40 identification with coefficients from its URDF geometry."""

from __future__ import annotations

import csv
import re
import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest
from scipy.spatial.transform import Rotation

import workbench as wb
from tests.conftest import random_state
from workbench.identification.drives import Drives, read_drive_file
from workbench.identification.torque_model import TorqueModel, base_parameters, parse_expression
from workbench.resources import shipped

TX40 = shipped("models") / "staubli_tx40"
ALL = ("friction", "rotor_inertia", "offset", "coupled_motors")
STANDARD = ("Ixx", "Ixy", "Ixz", "Iyy", "Iyz", "Izz", "mx", "my", "mz", "m")
# Pinocchio's dynamic-parameter order [m, mx, my, mz, Ixx, Ixy, Iyy, Ixz, Iyz, Izz]
PINOCCHIO_INDEX = {"m": 0, "mx": 1, "my": 2, "mz": 3, "Ixx": 4, "Ixy": 5, "Iyy": 6}
PINOCCHIO_INDEX |= {"Ixz": 7, "Iyz": 8, "Izz": 9}


@pytest.fixture(scope="module")
def models() -> dict[str, TorqueModel]:
    """iiwa with friction, the TX40 with its shipped drive file, TALOS' upper body (a tree)."""
    tx40_drives, _ = read_drive_file(TX40 / "tx40.drives.toml", 6)
    return {
        "iiwa": TorqueModel(wb.models.load("iiwa"), Drives(7)),
        "staubli_tx40": TorqueModel(wb.models.load("staubli_tx40"), tx40_drives),
        "talos_upper_body": TorqueModel(
            wb.models.load("talos_upper_body"),
            Drives(20, ("friction", "rotor_inertia", "offset")),
        ),
    }


@pytest.fixture(scope="module")
def bases(models):
    return {name: base_parameters(model) for name, model in models.items()}


def split_name(name: str) -> tuple[str, int]:
    prefix, number = re.fullmatch(r"([A-Za-z]+)(\d+)", name).groups()
    return prefix, int(number)


def drive_values(model: TorqueModel, seed: int) -> np.ndarray:
    """Random drive parameters in model.drives.names order (the TX40's: its shipped file)."""
    if model.drives.transmission is not None:
        _, values = read_drive_file(TX40 / "tx40.drives.toml", 6)
        return np.array([values[name] for name in model.drives.names])
    return np.random.default_rng(seed).uniform(0.1, 2.0, size=len(model.drives.names))


def drive_torques_by_hand(drives: Drives, values: np.ndarray, dq, ddq) -> np.ndarray:
    """Drive torques from the module docstring of workbench.identification.drives, term by term."""
    tau = np.zeros_like(dq)
    R = drives.transmission
    for name, v in zip(drives.names, values, strict=True):
        p, j = split_name(name)
        i = j - 1
        if p == "Ia":
            tau[:, i] += v * ddq[:, i]
        elif p == "fv":
            tau[:, i] += v * dq[:, i]
        elif p == "fs":
            tau[:, i] += v * np.sign(dq[:, i])
        elif p == "off":
            tau[:, i] += v
        else:  # coupled motor k = i: R_ki R_kj / R_kk^2 for i != j; R_ki / |R_kk| sign(R_k dq)
            k = i
            for row in range(dq.shape[1]):
                if p == "fsm":
                    tau[:, row] += v * R[k, row] / abs(R[k, k]) * np.sign(dq @ R[k])
                    continue
                rate = ddq if p == "Iam" else dq
                for col in range(dq.shape[1]):
                    if col != row:
                        tau[:, row] += v * R[k, row] * R[k, col] / R[k, k] ** 2 * rate[:, col]
    return tau


def pinocchio_rnea(model, q, dq, ddq) -> np.ndarray:
    data = model.createData()
    return np.array([pin.rnea(model, data, *s).copy() for s in zip(q, dq, ddq, strict=True)])


@pytest.mark.parametrize("name", ["iiwa", "staubli_tx40", "talos_upper_body"])
def test_W_x_is_inverse_dynamics_plus_drive_torques(models, name):
    """W(q, dq, ddq) values(d) equals Pinocchio's rnea (on the URDF model and on
    wb.to_pinocchio(chain)) and wb.inverse_dynamics, plus the drive torques written out here."""
    model = models[name]
    chain = model.chain
    q, dq, ddq, _ = random_state(chain, 40, seed=2)
    d = drive_values(model, seed=3)
    drive = drive_torques_by_hand(model.drives, d, dq, ddq)
    got = model.columns(q, dq, ddq) @ model.values(d)
    scale = max(1.0, np.abs(got).max())
    for reference in (
        pinocchio_rnea(wb.models.load_pinocchio(name), q, dq, ddq),
        pinocchio_rnea(wb.to_pinocchio(chain), q, dq, ddq),
        wb.inverse_dynamics(chain, q, dq, ddq),
    ):
        assert np.abs(got - (reference + drive)).max() < 1e-10 * scale


@pytest.mark.parametrize("name", ["iiwa", "staubli_tx40", "talos_upper_body"])
def test_inertial_columns_are_pinocchio_regressor_columns(models, name):
    """Each column named <p><j> is Pinocchio's computeJointTorqueRegressor column of parameter p
    of link j (its dynamic-parameter order, joint frames), and the drive columns are those of
    Drives.columns, under the names of both."""
    model = models[name]
    chain = model.chain
    q, dq, ddq, _ = random_state(chain, 10, seed=4)
    W = model.columns(q, dq, ddq)
    pm = wb.models.load_pinocchio(name)
    data = pm.createData()
    Y = np.array(
        [pin.computeJointTorqueRegressor(pm, data, *s).copy() for s in zip(q, dq, ddq, strict=True)]
    )
    C = model.drives.columns(dq, ddq)
    assert len(model.names) == model.size == W.shape[2]
    assert sorted(model.names) == sorted(
        [f"{p}{j + 1}" for j in range(chain.n) for p in STANDARD] + model.drives.names
    )
    for k, name_k in enumerate(model.names):
        p, j = split_name(name_k)
        if p in PINOCCHIO_INDEX:
            expected = Y[:, :, 10 * (j - 1) + PINOCCHIO_INDEX[p]]
        else:
            expected = C[:, :, model.drives.names.index(name_k)]
        np.testing.assert_allclose(W[:, :, k], expected, rtol=0, atol=1e-12, err_msg=name_k)
    select = np.array([0, 5, model.size - 1, 13])
    np.testing.assert_array_equal(model.columns(q, dq, ddq, select=select), W[:, :, select])


def test_columns_are_interleaved_link_by_link(models):
    """Order: link j's ten standard parameters, then joint j's drive terms, ...; coupled motors
    last (TX40: ..., Ixx6 ... m6, Ia6, fv6, fs6, off6, Iam6, fvm6, fsm6)."""
    names = models["staubli_tx40"].names
    expected = []
    for j in range(1, 7):
        expected += [f"{p}{j}" for p in STANDARD] + [f"{p}{j}" for p in ("Ia", "fv", "fs", "off")]
    assert names == [*expected, "Iam6", "fvm6", "fsm6"]


@pytest.mark.parametrize("name", ["iiwa", "staubli_tx40", "talos_upper_body"])
def test_values_and_split_round_trip(models, name):
    """values() holds each link's inertia in its joint frame (read here from
    chain.local_inertias() by the names' meaning: Ixy the tensor entry, m c, m); split() gives
    back chain.phi (base frame at q = 0) and the drive parameters."""
    model = models[name]
    chain = model.chain
    d = np.random.default_rng(1).normal(size=len(model.drives.names))
    x = model.values(d)
    G = chain.local_inertias()
    for j in range(chain.n):
        I, H, m = G[j, :3, :3], G[j, :3, 3:], G[j, 3, 3]
        expected = {
            "Ixx": I[0, 0], "Ixy": I[0, 1], "Ixz": I[0, 2], "Iyy": I[1, 1], "Iyz": I[1, 2],
            "Izz": I[2, 2], "mx": H[2, 1], "my": H[0, 2], "mz": H[1, 0], "m": m,
        }  # fmt: skip
        for p, value in expected.items():
            assert abs(x[model.names.index(f"{p}{j + 1}")] - value) < 1e-12 * max(1, abs(value))
    for k, drive_name in enumerate(model.drives.names):
        assert x[model.names.index(drive_name)] == d[k]
    phi, back = model.split(x)
    np.testing.assert_allclose(phi, chain.phi, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(back, d)
    assert np.all(model.values()[[model.names.index(n) for n in model.drives.names]] == 0)


@pytest.mark.parametrize("name", ["iiwa", "staubli_tx40", "talos_upper_body"])
def test_base_parameters_reproduce_W_x(models, bases, name):
    """At fresh random states: W[:, :, independent] (B x) == W x for random x; B is the identity
    on the independent columns; r equals the numerical rank of W there."""
    model, base = models[name], bases[name]
    chain = model.chain
    q, dq, ddq, _ = random_state(chain, max(40, 600 // chain.n), seed=17)
    W = model.columns(q, dq, ddq)
    r = base.independent.size
    assert base.matrix.shape == (r, model.size) and len(base.names) == r
    np.testing.assert_array_equal(base.matrix[:, base.independent], np.eye(r))
    flat = W.reshape(-1, model.size)
    norms = np.linalg.norm(flat, axis=0)
    nonzero = norms > 1e-10 * norms.max()  # the others are rounding (e.g. link 1's mass)
    assert set(base.independent) <= set(np.flatnonzero(nonzero))
    flat = flat[:, nonzero] / norms[nonzero]
    s = np.linalg.svd(flat, compute_uv=False)
    assert np.count_nonzero(s > 1e-8 * s[0]) == r
    assert s[r - 1] > 1e-4 * s[0]  # a clear gap: the rank is not a matter of tolerance
    rng = np.random.default_rng(5)
    for _ in range(3):
        x = rng.normal(size=model.size)
        full = W @ x
        reduced = W[:, :, base.independent] @ (base.matrix @ x)
        assert np.abs(reduced - full).max() < 1e-9 * max(1.0, np.abs(full).max())


@pytest.mark.parametrize("name", ["iiwa", "staubli_tx40", "talos_upper_body"])
def test_base_names_parse_back_to_the_matrix_rows(models, bases, name):
    """Each name is a readable expression led by its independent parameter (coefficient 1);
    parse_expression gives the row's non-zero entries to the printed 6 digits."""
    model, base = models[name], bases[name]
    for i, text in enumerate(base.names):
        terms = parse_expression(text)
        row = base.matrix[i]
        support = {model.names[k]: row[k] for k in np.flatnonzero(row)}
        assert terms.keys() == support.keys(), text
        assert next(iter(terms)) == model.names[base.independent[i]]
        for key, c in terms.items():
            assert abs(c - support[key]) <= 5e-6 * abs(support[key]), (text, key)


def test_parse_expression_forms_and_errors():
    """Signs, integers written as 1.0, exponents; text that is not an expression is an error."""
    assert parse_expression("Izz1 - 0.225*mx3 + 1e-05*m4 + 2.0*Ia1") == {
        "Izz1": 1.0,
        "mx3": -0.225,
        "m4": 1e-05,
        "Ia1": 2.0,
    }
    for bad in ("", "Izz1 + ", "Izz1 * 3", "0.5*", "Izz1 + foo"):
        with pytest.raises(wb.WorkbenchError, match="cannot parse"):
            parse_expression(bad)


def urdf_joint_origins(path) -> dict[str, np.ndarray]:
    """Joint frames at q = 0 in the base frame from the URDF's joint origins (serial chain),
    with URDF rpy = Rz(y) Ry(p) Rx(r) (scipy's extrinsic 'xyz')."""
    joints = {j.get("name"): j for j in ET.parse(path).getroot().iter("joint")}
    by_child_link = {j.find("child").get("link"): j for j in joints.values()}
    frames = {}

    def frame(joint) -> np.ndarray:
        name = joint.get("name")
        if name not in frames:
            origin = joint.find("origin")
            T = np.eye(4)
            T[:3, :3] = Rotation.from_euler(
                "xyz", [float(v) for v in origin.get("rpy").split()]
            ).as_matrix()
            T[:3, 3] = [float(v) for v in origin.get("xyz").split()]
            parent = by_child_link.get(joint.find("parent").get("link"))
            frames[name] = T if parent is None else frame(parent) @ T
        return frames[name]

    return {name: frame(j) for name, j in joints.items()}


def test_tx40_first_base_parameter_is_the_published_one():
    """With the TX40's drive terms and transmission, the first base parameter regroups Izz1,
    Ia1, Iyy2, Iyy3, mz3, m3..m6 as in the published identification
    (reference/TX40_bp_5_reference.csv); the m_k coefficients are the squared distances of
    joints 3-6 from the axis of joint 1 and the mz3 one is 2 (R3^T d3_perp)_z, from tx40.urdf."""
    drives, _ = read_drive_file(TX40 / "tx40.drives.toml", 6)
    model = TorqueModel(wb.models.load("staubli_tx40"), drives)
    ours = base_parameters(model).names[0]
    with open(TX40 / "reference" / "TX40_bp_5_reference.csv", newline="") as fh:
        published_text = next(csv.reader(fh))[0]
    published = {}
    for term in published_text.split(" + "):
        coefficient, _, name = term.rpartition("*")
        published[name] = float(coefficient) if coefficient else 1.0
    terms = parse_expression(ours)
    assert terms.keys() == published.keys(), (ours, published_text)
    frames = urdf_joint_origins(TX40 / "tx40.urdf")
    T1 = frames["joint_1"]
    axis, origin = T1[:3, 2], T1[:3, 3]  # joint 1 turns about its z axis (tx40.urdf)

    def perpendicular(v):
        return v - (v @ axis) * axis

    for k in range(3, 7):
        d = perpendicular(frames[f"joint_{k}"][:3, 3] - origin)
        assert abs(terms[f"m{k}"] - d @ d) < 1e-6, k
        assert abs(published[f"m{k}"] - d @ d) < 1e-5, k  # printed 0.05185
    T3 = frames["joint_3"]
    h_coefficient = 2 * T3[:3, :3].T @ perpendicular(T3[:3, 3] - origin)
    assert abs(terms["mz3"] - h_coefficient[2]) < 1e-6
    assert abs(published["mz3"] - h_coefficient[2]) < 1e-6
    for name in ("Izz1", "Ia1", "Iyy2", "Iyy3"):
        assert terms[name] == pytest.approx(1.0, abs=1e-6) and published[name] == 1.0
