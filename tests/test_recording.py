"""Log descriptions (workbench.recordings.recording) read through read_log: synthetic
recordings with known q(t), units, transmissions and marker rotations, checked against
quantities computed here (inverse transmissions, analytic derivatives, SciPy rotations,
SciPy filter padding), and one WorkbenchError per kind of bad description."""

from __future__ import annotations

import gzip
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import signal
from scipy.spatial.transform import Rotation

import workbench as wb
from workbench.recordings.log_files import read_log

DEG = np.pi / 180.0


@pytest.fixture(scope="module")
def planar() -> wb.Chain:
    return wb.models.load("planar_2r")


@pytest.fixture(scope="module")
def tx40() -> wb.Chain:
    return wb.models.load("staubli_tx40")


def write_table(path: Path, header: list[str], data: np.ndarray) -> Path:
    """CSV (optionally .gz) with a header row, or NPZ, with every digit of the values."""
    data = np.asarray(data, dtype=float)
    if path.suffix == ".npz":
        np.savez(path, **{name: data[:, k] for k, name in enumerate(header)})
        return path
    lines = [",".join(header)] + [",".join(repr(float(v)) for v in row) for row in data]
    text = "\n".join(lines) + "\n"
    if path.suffix == ".gz":
        with gzip.open(path, "wt") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


def write_description(folder: Path, text: str, name: str = "log.toml") -> Path:
    path = folder / name
    path.write_text(text)
    return path


def toml_list(values) -> str:
    return "[" + ", ".join(repr(v) if isinstance(v, str) else repr(float(v)) for v in values) + "]"


def static_poses(chain: wb.Chain, samples: int, seed: int) -> np.ndarray:
    """Joint positions within 80 % of each joint's range."""
    rng = np.random.default_rng(seed)
    lower, upper = np.maximum(chain.lower, -np.pi), np.minimum(chain.upper, np.pi)
    centre, half = (upper + lower) / 2, 0.8 * (upper - lower) / 2
    return centre + half * rng.uniform(-1.0, 1.0, size=(samples, chain.n))


def sines(chain: wb.Chain, t: np.ndarray, seed: int):
    """q(t) = c + a sin(w t + p) per joint, in range and far below the velocity limits, with
    its analytic derivatives."""
    rng = np.random.default_rng(seed)
    lower, upper = np.maximum(chain.lower, -np.pi), np.minimum(chain.upper, np.pi)
    centre, half = (upper + lower) / 2, (upper - lower) / 2
    a = 0.3 * half * rng.uniform(0.5, 1.0, size=chain.n)
    w = 2 * np.pi * rng.uniform(0.5, 1.5, size=chain.n)
    a = np.minimum(a, 0.3 * chain.velocity_limit / w)
    p = rng.uniform(0, 2 * np.pi, size=chain.n)
    arg = t[:, None] * w + p
    return centre + a * np.sin(arg), a * w * np.cos(arg), -a * w**2 * np.sin(arg)


def tx40_transmission() -> np.ndarray:
    R = np.diag([32.0, 32.0, 45.0, -48.0, 45.0, 32.0])
    R[5, 4] = 32.0
    return R


def scipy_padlen(order: int) -> int:
    """sosfiltfilt's default padding, by SciPy's documented formula on the actual sections."""
    sos = signal.butter(order, 0.1, output="sos")
    return 3 * (2 * len(sos) + 1 - min((sos[:, 2] == 0).sum(), (sos[:, 5] == 0).sum()))


def names(chain: wb.Chain, prefix: str) -> list[str]:
    return [f"{prefix}{k}" for k in range(chain.n)]


# ------------------------------------------------------------ units, formats
@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".npz"])
def test_joint_side_units_and_file_formats(tmp_path, planar, suffix):
    """Positions in degrees become radians, torques scaled per column, a marker position in mm
    becomes m; CSV, gzip CSV and NPZ read alike; columns say where each joint came from."""
    q = static_poses(planar, 30, seed=1)
    tau = np.random.default_rng(2).normal(size=(30, 2))
    tip = np.random.default_rng(3).uniform(-0.8, 0.8, size=(30, 3))
    data = np.column_stack([q / DEG, tau, tip * 1000.0])
    header = ["a_deg", "b_deg", "ta", "tb", "mx", "my", "mz"]
    write_table(tmp_path / f"data{suffix}", header, data)
    path = write_description(
        tmp_path,
        f"""
[positions]
file = "data{suffix}"
columns = ["a_deg", "b_deg"]
unit = "deg"
[torques]
file = "data{suffix}"
columns = ["ta", "tb"]
scale = [2.0, -0.5]
[[markers]]
name = "tip_marker"
position = ["mx", "my", "mz"]
unit = "mm"
""",
    )
    log = read_log(path, planar, require=("tau", "position"))
    np.testing.assert_allclose(log.q, q, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(log.tau, tau * [2.0, -0.5], rtol=1e-14)
    assert log.dq is None and log.ddq is None and not log.differentiated
    (marker,) = log.markers
    assert marker.name == "tip_marker" and marker.frame == planar.tool_name
    np.testing.assert_allclose(marker.position, tip, rtol=1e-14)
    assert marker.rotation is None
    assert log.frame_known and log.decimation == 1 and log.min_speed is None
    where = log.columns[f"q_{planar.joint_names[1]}"]
    assert f"data{suffix}" in where and "'b_deg'" in where and "column 2" in where
    assert "'tb'" in log.columns[f"tau_{planar.joint_names[1]}"]


def test_prismatic_joints_in_millimetres(tmp_path):
    """Panda (7 revolute joints, 2 prismatic fingers): unit = "deg" applies to the revolute
    joints, linear_unit = "mm" (and the offsets, in the column unit) to the prismatic ones."""
    panda = wb.models.load("panda")
    prismatic = np.array([k == "prismatic" for k in panda.joint_kinds])
    assert prismatic.sum() == 2
    q = static_poses(panda, 15, seed=21)
    offsets = np.where(prismatic, 5.0, 10.0)  # mm and degrees
    unit = np.where(prismatic, 1e-3, DEG)
    write_table(tmp_path / "p.csv", names(panda, "j"), (q - offsets * unit) / unit)
    path = write_description(
        tmp_path,
        f"""
[positions]
file = "p.csv"
columns = {toml_list(names(panda, "j"))}
unit = "deg"
linear_unit = "mm"
offsets = {toml_list(offsets)}
""",
    )
    np.testing.assert_allclose(read_log(path, panda).q, q, rtol=0, atol=1e-13)


def test_columns_as_a_table_of_joints(tmp_path, planar):
    """columns = {joint = "column"} picks columns by joint name, in any file order."""
    q = static_poses(planar, 10, seed=4)
    j1, j2 = planar.joint_names
    data = np.column_stack([q[:, 0] + 1.0, q[:, 1], q[:, 0]])
    write_table(tmp_path / "d.csv", ["other", "x2", "x1"], data)
    path = write_description(
        tmp_path,
        f'[positions]\nfile = "d.csv"\ncolumns = {{ {j2} = "x2", {j1} = "x1" }}\n',
    )
    log = read_log(path, planar)
    np.testing.assert_array_equal(log.q, q)


# ------------------------------------------------------------- transmission
def check_motor_side(tmp_path, chain, R, transmission_toml, torque_matrix=None):
    """Motor-side degrees with joint offsets and motor torques with torque constants, against
    q recovered through R here and tau = T (k tau_m) with T = R^T or the given matrix."""
    rng = np.random.default_rng(5)
    q = static_poses(chain, 25, seed=6)
    offsets_deg = rng.uniform(-20.0, 20.0, size=chain.n)
    # q = R^-1 q_motor + offsets  <=>  q_motor = R (q - offsets)
    q_motor_deg = (q - offsets_deg * DEG) @ R.T / DEG
    tau_motor = rng.normal(size=(25, chain.n))
    constants = rng.uniform(0.5, 2.0, size=chain.n)
    data = np.column_stack([q_motor_deg, tau_motor])
    write_table(tmp_path / "motor.csv", names(chain, "p") + names(chain, "c"), data)
    path = write_description(
        tmp_path,
        f"""
[positions]
file = "motor.csv"
columns = {toml_list(names(chain, "p"))}
unit = "deg"
side = "motor"
offsets = {toml_list(offsets_deg)}
[torques]
file = "motor.csv"
columns = {toml_list(names(chain, "c"))}
side = "motor"
scale = {toml_list(constants)}
[transmission]
{transmission_toml}
""",
    )
    log = read_log(path, chain, require=("tau",))
    np.testing.assert_allclose(log.q, q, rtol=0, atol=1e-12)
    T = R.T if torque_matrix is None else torque_matrix
    expected = np.einsum("ij,sj->si", T, tau_motor * constants)
    np.testing.assert_allclose(log.tau, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(log.transmission, R, rtol=0, atol=0)
    # virtual power: with the default torque matrix, tau . dq == tau_m . dq_m
    if torque_matrix is None:
        dq = rng.normal(size=(25, chain.n))
        power_joint = np.einsum("si,si->s", log.tau, dq)
        power_motor = np.einsum("si,si->s", tau_motor * constants, dq @ R.T)
        np.testing.assert_allclose(power_joint, power_motor, rtol=1e-10)


def test_motor_side_ratios_and_coupling(tmp_path, tx40):
    """TX40: ratios [32, 32, 45, -48, 45, 32] and coupling [6, 5, 32] (motor 6 turns with
    joint 5)."""
    R = tx40_transmission()
    text = "ratios = [32, 32, 45, -48, 45, 32]\ncouplings = [[6, 5, 32.0]]"
    check_motor_side(tmp_path, tx40, R, text)


def test_motor_side_full_matrix(tmp_path, tx40):
    """A full motor-from-joint matrix (every motor couples every joint)."""
    rng = np.random.default_rng(8)
    R = np.diag(rng.uniform(20.0, 50.0, size=6) * rng.choice([-1, 1], size=6))
    R += rng.normal(scale=3.0, size=(6, 6))
    rows = ", ".join(toml_list(row) for row in R)
    check_motor_side(tmp_path, tx40, R, f"matrix = [{rows}]")


def test_motor_side_with_a_torque_matrix(tmp_path, tx40):
    """A given torque_matrix (joint-from-motor) replaces R^T for the torques only."""
    R = tx40_transmission()
    T = np.diag([30.0, 31.0, 44.0, -47.0, 46.0, 33.0])
    T[4, 5] = 29.0
    rows = ", ".join(toml_list(row) for row in T)
    text = f"ratios = [32, 32, 45, -48, 45, 32]\ncouplings = [[6, 5, 32]]\ntorque_matrix = [{rows}]"
    check_motor_side(tmp_path, tx40, R, text, torque_matrix=T)


def test_joint_side_offsets_in_column_unit(tmp_path, planar):
    """Joint-side offsets are added in the column unit (degrees here)."""
    q = static_poses(planar, 10, seed=9)
    write_table(tmp_path / "d.csv", ["a", "b"], (q - [10 * DEG, -5 * DEG]) / DEG)
    path = write_description(
        tmp_path,
        '[positions]\nfile = "d.csv"\ncolumns = ["a", "b"]\nunit = "deg"\noffsets = [10, -5]\n',
    )
    np.testing.assert_allclose(read_log(path, planar).q, q, rtol=0, atol=1e-13)


# ------------------------------------------------------------- time series
def time_series(tmp_path, chain, rate, seconds, *, extra="", time_toml=None, seed=10):
    """A joint-side recording of q(t) (sines) sampled at ``rate`` Hz; returns (log, q, dq, ddq)."""
    t = np.arange(int(rate * seconds)) / rate
    q, dq, ddq = sines(chain, t, seed)
    tau = np.random.default_rng(seed).normal(size=q.shape)
    header = ["stamp_ms", *names(chain, "q"), *names(chain, "tau")]
    write_table(tmp_path / "ts.csv", header, np.column_stack([1000.0 * t, q, tau]))
    if time_toml is None:
        time_toml = f"sample_period = {1.0 / rate!r}"
    path = write_description(
        tmp_path,
        f"""
[time]
{time_toml}
[positions]
file = "ts.csv"
columns = {toml_list(names(chain, "q"))}
[torques]
file = "ts.csv"
columns = {toml_list(names(chain, "tau"))}
{extra}
""",
    )
    return read_log(path, chain, require=("tau",)), t, q, dq, ddq


def test_time_column_in_ms_and_filtered_derivatives(tmp_path, tx40):
    """A time column in ms gives t in s; the low-passed q and its derivatives are within 1e-4
    (relative) of the analytic q, dq, ddq away from the borders; defaults: decimation to
    100 Hz, the border of the filters (SciPy padding and 10 FIR outputs) and a min_speed of
    1 % of each joint's velocity limit."""
    time_toml = 'file = "ts.csv"\ncolumn = "stamp_ms"\nunit = "ms"'
    log, t, q, dq, ddq = time_series(tmp_path, tx40, 1000.0, 3.0, time_toml=time_toml)
    np.testing.assert_allclose(log.t, t, rtol=0, atol=1e-12)
    assert log.decimation == 10 and log.differentiated
    assert log.border == max(10, math.ceil(scipy_padlen(4) / 10))
    np.testing.assert_allclose(log.min_speed, 0.01 * tx40.velocity_limit, rtol=1e-14)
    inner = slice(log.border * log.decimation, -log.border * log.decimation)
    for got, exact in ((log.q, q), (log.dq, dq), (log.ddq, ddq)):
        assert np.abs(got[inner] - exact[inner]).max() < 1e-4 * np.abs(exact).max()
    assert np.abs(log.q - q).max() > 0  # the positions were filtered, not passed through


def test_processing_settings(tmp_path, planar):
    """decimate_to_hz = 50 at 1 kHz is a factor 20; lowpass_order 2 sets the border from its
    SciPy padding; min_speed: one number for all joints, a list per joint, or a fraction of the
    velocity limits."""
    extra = "[processing]\nlowpass_hz = 40.0\nlowpass_order = 2\ndecimate_to_hz = 50.0\n"
    log, *_ = time_series(tmp_path, planar, 1000.0, 2.0, extra=extra + "min_speed = 0.05")
    assert log.decimation == 20
    assert log.border == max(10, math.ceil(scipy_padlen(2) / 20))
    np.testing.assert_array_equal(log.min_speed, [0.05, 0.05])
    log, *_ = time_series(tmp_path, planar, 1000.0, 2.0, extra=extra + "min_speed = [0.1, 0.2]")
    np.testing.assert_array_equal(log.min_speed, [0.1, 0.2])
    log, *_ = time_series(tmp_path, planar, 1000.0, 2.0, extra=extra + "min_speed_fraction = 0.02")
    np.testing.assert_allclose(log.min_speed, 0.02 * planar.velocity_limit, rtol=1e-14)


def test_low_rate_is_not_decimated(tmp_path, planar):
    """At 100 Hz (not above 200 Hz) the default keeps every sample."""
    log, *_ = time_series(tmp_path, planar, 100.0, 5.0)
    assert log.decimation == 1 and log.border == scipy_padlen(4)


def test_motor_side_velocities(tmp_path, tx40):
    """Logged motor velocities in deg/s (with positions and a sample period) become joint
    velocities R^-1 dq_m, low-passed, close to the analytic ones away from the borders."""
    rate = 1000.0
    t = np.arange(3000) / rate
    q, dq, ddq = sines(tx40, t, seed=12)
    R = tx40_transmission()
    header = [*names(tx40, "q"), *names(tx40, "v")]
    write_table(tmp_path / "v.csv", header, np.column_stack([q, dq @ R.T / DEG]))
    path = write_description(
        tmp_path,
        f"""
[time]
sample_period = 0.001
[positions]
file = "v.csv"
columns = {toml_list(names(tx40, "q"))}
[velocities]
file = "v.csv"
columns = {toml_list(names(tx40, "v"))}
side = "motor"
unit = "deg"
[transmission]
ratios = [32, 32, 45, -48, 45, 32]
couplings = [[6, 5, 32]]
""",
    )
    log = read_log(path, tx40)
    assert not log.differentiated
    inner = slice(log.border * log.decimation, -log.border * log.decimation)
    assert np.abs(log.dq[inner] - dq[inner]).max() < 1e-3 * np.abs(dq).max()
    assert np.abs(log.ddq[inner] - ddq[inner]).max() < 1e-3 * np.abs(ddq).max()


# ------------------------------------------------------------------ markers
ROTATION_COLUMNS = {
    "rotation_vector": ["r0", "r1", "r2"],
    "quaternion_xyzw": ["qx", "qy", "qz", "qw"],
    "quaternion_wxyz": ["w_", "x_", "y_", "z_"],
    "rpy": ["roll", "pitch", "yaw"],
}


@pytest.mark.parametrize("unit", ["rad", "deg"])
def test_marker_rotations_against_scipy(tmp_path, planar, unit):
    """The four rotation types give scipy's rotation matrices: rotation vectors, quaternions
    (scalar last and first, one of them sign-flipped), and URDF rpy = Rz(y) Ry(p) Rx(r) =
    scipy's extrinsic 'xyz' Euler angles; rotation vectors and rpy in the rotation_unit; a
    marker's file defaults to the positions' file."""
    N = 20
    rotations = Rotation.random(N, random_state=7)
    quat = rotations.as_quat()  # x, y, z, w
    angle = 1.0 if unit == "rad" else 1.0 / DEG
    q = static_poses(planar, N, seed=13)
    columns = {
        "rotation_vector": rotations.as_rotvec() * angle,
        "quaternion_xyzw": quat,
        "quaternion_wxyz": -quat[:, [3, 0, 1, 2]],
        "rpy": rotations.as_euler("xyz") * angle,
    }
    header = ["qa", "qb"] + [c for kind in ROTATION_COLUMNS for c in ROTATION_COLUMNS[kind]]
    write_table(tmp_path / "m.csv", header, np.column_stack([q, *columns.values()]))
    markers = ""
    for kind, cols in ROTATION_COLUMNS.items():
        markers += f'[[markers]]\nname = "{kind}"\nrotation = {toml_list(cols)}\n'
        markers += f'rotation_type = "{kind}"\n'
        if not kind.startswith("quaternion"):  # quaternions have no angle unit
            markers += f'rotation_unit = "{unit}"\n'

    path = write_description(
        tmp_path, f'[positions]\nfile = "m.csv"\ncolumns = ["qa", "qb"]\n{markers}'
    )
    log = read_log(path, planar)
    assert [m.name for m in log.markers] == list(ROTATION_COLUMNS)
    expected = rotations.as_matrix()
    for marker in log.markers:
        assert marker.position is None
        np.testing.assert_allclose(marker.rotation, expected, rtol=0, atol=1e-12)


def test_marker_in_its_own_file_and_unknown_device_frame(tmp_path, planar):
    """A marker file of its own; [measurement_frame] known = false sets frame_known False."""
    q = static_poses(planar, 12, seed=14)
    p = np.random.default_rng(15).uniform(-1, 1, size=(12, 3))
    write_table(tmp_path / "q.csv", ["a", "b"], q)
    write_table(tmp_path / "cam.npz", ["x", "y", "z"], p)
    path = write_description(
        tmp_path,
        """
[positions]
file = "q.csv"
columns = ["a", "b"]
[[markers]]
file = "cam.npz"
position = ["x", "y", "z"]
[measurement_frame]
known = false
""",
    )
    log = read_log(path, planar, require=("position",))
    assert log.frame_known is False
    np.testing.assert_array_equal(log.markers[0].position, p)


# -------------------------------------------------- validation and the model
@pytest.mark.parametrize(
    ("toml", "folds", "fraction"),
    [("folds = 4", 4, None), ('folds = "leave-one-out"', -1, None), ("fraction = 0.25", 0, 0.25)],
)
def test_validation_and_model_defaults(tmp_path, planar, toml, folds, fraction):
    """[validation] folds, "leave-one-out" (-1) or fraction, and [model] terms, reach
    log.defaults."""
    write_table(tmp_path / "q.csv", ["a", "b"], static_poses(planar, 10, seed=16))
    path = write_description(
        tmp_path,
        f'[positions]\nfile = "q.csv"\ncolumns = ["a", "b"]\n[validation]\n{toml}\n'
        '[model]\nterms = ["friction", "offset"]\n',
    )
    defaults = read_log(path, planar).defaults
    assert defaults.folds == folds and defaults.validation == fraction
    assert defaults.terms == ("friction", "offset")


# ------------------------------------------------------------------- errors
GOOD = """
[positions]
file = "q.csv"
columns = ["a", "b"]
"""


def expect_error(tmp_path, chain, text, *fragments, data=None, name="log.toml"):
    """The description ``text`` (with q.csv, columns a and b, unless ``data`` replaces it)
    raises a WorkbenchError whose message contains every fragment."""
    if data is None:
        write_table(tmp_path / "q.csv", ["a", "b"], static_poses(chain, 10, seed=17))
    path = write_description(tmp_path, text, name)
    with pytest.raises(wb.WorkbenchError) as info:
        read_log(path, chain)
    message = str(info.value)
    for fragment in fragments:
        fragment = str(path) if fragment is None else fragment
        assert fragment in message, message
    return message


def test_unknown_keys_are_errors(tmp_path, planar):
    """Typos in a key or a section are errors naming the file, the section and the typo."""
    expect_error(tmp_path, planar, GOOD + 'unti = "deg"\n', None, "[positions]", "unti")
    expect_error(tmp_path, planar, GOOD + "[procesing]\n", None, "top level", "procesing")


@pytest.mark.parametrize(
    ("extra", "fragments"),
    [
        ('[time]\nsample_period = "0.001"\n', ["[time] sample_period", "must be a number"]),
        ("[validation]\nfolds = 100.7\n", ["[validation] folds", "must be an integer"]),
        ('[measurement_frame]\nknown = "true"\n', ["[measurement_frame] known", "true or false"]),
        ('[validation]\nfolds = "three"\n', ["[validation] folds", "leave-one-out"]),
        ("[validation]\nfolds = 3\nfraction = 0.2\n", ["[validation] fraction", "not both"]),
        ('[model]\nterms = ["frction"]\n', ["[model] terms", "frction"]),
        ("[positions.x]\n", ["[positions]", "unknown key(s) x"]),
    ],
    ids=["string-number", "float-integer", "string-boolean", "folds-word", "both", "term", "table"],
)
def test_wrong_types_are_errors(tmp_path, planar, extra, fragments):
    """A string for a number, 100.7 for an integer, "true" for a boolean and other bad values
    name the file and the key."""
    expect_error(tmp_path, planar, GOOD + extra, None, *fragments)


def test_missing_and_miscounted_columns(tmp_path, planar):
    """A column the file lacks is named with the file's columns listed; a columns list of the
    wrong length names the key and both lengths; a joint table must name every joint."""
    text = '[positions]\nfile = "q.csv"\ncolumns = ["a", "c"]\n'
    message = expect_error(tmp_path, planar, text, "q.csv", "no column 'c'")
    assert "the columns are 'a', 'b'" in message
    text = '[positions]\nfile = "q.csv"\ncolumns = ["a"]\n'
    expect_error(tmp_path, planar, text, None, "[positions] columns", "1 entries; expected 2")
    j1 = planar.joint_names[0]
    text = f'[positions]\nfile = "q.csv"\ncolumns = {{ {j1} = "a", elbow = "b" }}\n'
    expect_error(tmp_path, planar, text, None, "[positions] columns", "'elbow'", "missing joints")


def test_motor_side_needs_an_invertible_transmission(tmp_path, planar):
    """side = "motor" without [transmission], or with a singular one, names the key."""
    motor = GOOD + 'side = "motor"\n'
    expect_error(tmp_path, planar, motor, None, "[positions] side", "[transmission]")
    singular = motor + "[transmission]\nratios = [2.0, 0.0]\n"
    expect_error(tmp_path, planar, singular, None, "[transmission] ratios", "singular")
    singular = motor + "[transmission]\nmatrix = [[1.0, 2.0], [2.0, 4.0]]\n"
    expect_error(tmp_path, planar, singular, None, "[transmission] matrix", "singular")
    bad = motor + "[transmission]\nratios = [2.0, 3.0]\ncouplings = [[3, 1, 2.0]]\n"
    expect_error(tmp_path, planar, bad, None, "[transmission] couplings", "1 to 2")


def test_files_of_different_lengths(tmp_path, planar):
    """Positions and torques files with different row counts name both files and counts."""
    write_table(tmp_path / "q.csv", ["a", "b"], static_poses(planar, 10, seed=18))
    write_table(tmp_path / "t.csv", ["a", "b"], np.random.default_rng(0).normal(size=(9, 2)))
    text = GOOD + '[torques]\nfile = "t.csv"\ncolumns = ["a", "b"]\n'
    expect_error(tmp_path, planar, text, "t.csv has 9 data rows", "q.csv", "10", data=False)


@pytest.mark.parametrize("damage", ["repeat", "gap", "jitter", "swap"])
def test_irregular_time_columns_are_resampled(tmp_path, planar, damage):
    """A repeated stamp, a gap of ten periods, a sample 30 % of a period late or two samples
    out of order are put on a uniform grid (the gap splits the recording), reported in
    log.clock; the resampled positions follow the logged sines."""
    t = np.arange(2000) * 1e-3
    if damage == "repeat":
        t[1000] = t[999]
    elif damage == "gap":
        t[1000:] += 0.01
    elif damage == "jitter":
        t[1000] += 0.3e-3
    q, _, _ = sines(planar, t, seed=19)
    if damage == "swap":
        t[[1000, 1001]] = t[[1001, 1000]]
    write_table(tmp_path / "q.csv", ["t", "a", "b"], np.column_stack([t, q]))
    text = '[time]\nfile = "q.csv"\ncolumn = "t"\n[processing]\ndecimate_to_hz = 1000\n' + GOOD
    log = read_log(write_description(tmp_path, text), planar)
    clock = log.clock
    assert clock["resampled"] and clock["period_s"] == pytest.approx(1e-3)
    assert clock["duplicate_stamps"] == (damage == "repeat")
    assert clock["out_of_order_samples"] == 2 * (damage == "swap")
    assert len(clock["gaps"]) == (damage == "gap") and len(clock["segments"]) == 1 + (
        damage == "gap"
    )
    if damage == "jitter":
        assert clock["jitter_max_percent"] == pytest.approx(30.0, rel=1e-6)
    if damage == "gap":
        assert clock["gaps"][0]["length_s"] == pytest.approx(0.011)
        assert log.segments == ((0, 1000), (1000, 2000))
    truth, _, _ = sines(planar, log.t, seed=19)
    assert np.abs(log.q - truth).max() < 1e-3  # the low-pass filter's own error


def test_bad_rotations(tmp_path, planar):
    """An unknown rotation_type lists the choices; quaternion columns that are not unit
    quaternions name the key and the sample."""
    rotations = Rotation.random(10, random_state=1).as_quat()
    rotations[4] *= 1.5
    q = static_poses(planar, 10, seed=20)
    write_table(tmp_path / "q.csv", ["a", "b", "x", "y", "z", "w"], np.column_stack([q, rotations]))
    marker = '[[markers]]\nrotation = ["x", "y", "z", "w"]\nrotation_type = "{}"\n'
    expect_error(
        tmp_path, planar, GOOD + marker.format("euler"), None, "[markers[0]] rotation_type",
        "'euler'", "'quaternion_wxyz'", data=False,
    )  # fmt: skip
    expect_error(
        tmp_path, planar, GOOD + marker.format("quaternion_xyzw"), None,
        "[markers[0]] rotation", "sample 4 has norm 1.5", data=False,
    )  # fmt: skip


def test_too_short_and_too_slow_recordings(tmp_path, planar):
    """Fewer samples than the filters need, and decimate_to_hz above the sample rate, are
    errors naming the file (and the key)."""
    text = "[time]\nsample_period = 0.001\n" + GOOD
    expect_error(tmp_path, planar, text, None, "too short", "10 samples")
    t = np.arange(2000) * 1e-3
    write_table(tmp_path / "q.csv", ["a", "b"], sines(planar, t, seed=22)[0])
    text += "[processing]\ndecimate_to_hz = 2000.0\n"
    expect_error(tmp_path, planar, text, None, "[processing] decimate_to_hz", data=False)


def test_unknown_marker_frame_names_file_and_key(tmp_path, planar):
    """A marker frame the model does not have is an error naming the description file and the
    key (as every other description error does)."""
    text = GOOD + '[[markers]]\nframe = "nope"\nposition = ["a", "b", "a"]\n'
    expect_error(tmp_path, planar, text, None, "[markers[0]] frame", "'nope'")


def test_processing_without_time_says_it_needs_a_time_base(tmp_path, planar):
    """[processing] is for time series only (module docstring): in a description without [time]
    the error should say so instead of calling lowpass_hz an unknown key."""
    message = expect_error(tmp_path, planar, GOOD + "[processing]\nlowpass_hz = 10.0\n", None)
    assert "[time]" in message and "known: none" not in message, message


def test_payload_section(tmp_path, planar):
    """[model.payload]: phi about the link's joint frame from mass, COM and inertia about the
    COM (parallel-axis theorem written out here); an unknown link is an error naming it."""
    write_table(tmp_path / "q.csv", ["a", "b"], static_poses(planar, 20, seed=3))
    base = '[positions]\nfile = "q.csv"\ncolumns = ["a", "b"]\n'
    payload = (
        "[model.payload]\nmass = 1.5\ncom = [0.1, 0.0, 0.02]\n"
        "inertia = [0.02, 0.02, 0.03, 0.0, 0.001, 0.0]\n"
    )
    log = read_log(write_description(tmp_path, base + payload), planar)
    link, phi = log.payload
    c = np.array([0.1, 0.0, 0.02])
    I_com = np.array([[0.02, 0.0, 0.001], [0.0, 0.02, 0.0], [0.001, 0.0, 0.03]])
    I_origin = I_com + 1.5 * (c @ c * np.eye(3) - np.outer(c, c))
    assert link == planar.n - 1 and phi[0] == 1.5
    np.testing.assert_allclose(phi[1:4], 1.5 * c, rtol=0, atol=1e-15)
    np.testing.assert_allclose(wb.inertia.rotational_inertia(phi), I_origin, rtol=0, atol=1e-15)
    bad = base + payload.replace("[model.payload]\n", '[model.payload]\nlink = "nope"\n')
    with pytest.raises(wb.WorkbenchError, match=r"\[model.payload\] link = 'nope'"):
        read_log(write_description(tmp_path, bad, "bad.toml"), planar)


def test_an_unknown_torque_model_term_is_named_with_the_choices(tmp_path, planar):
    """A misspelt `[model] terms` entry is refused naming the file, the key, the entry and the
    terms the torque model has (every one of workbench.identification.drives' TERMS)."""
    from workbench.identification.drives import TERMS

    q = static_poses(planar, 30, seed=1)
    write_table(tmp_path / "data.csv", ["a", "b", "ta", "tb"], np.column_stack([q, q]))
    path = write_description(
        tmp_path,
        '[positions]\nfile = "data.csv"\ncolumns = ["a", "b"]\n[torques]\nfile = "data.csv"\n'
        'columns = ["ta", "tb"]\n[model]\nterms = ["friction", "stribek"]\n',
    )
    with pytest.raises(wb.WorkbenchError) as error:
        read_log(path, planar, require=("tau",))
    message = str(error.value)
    assert message.startswith(f"{path}: [model] terms: unknown 'stribek'; choose from ")
    assert all(repr(term) in message for term in TERMS)
