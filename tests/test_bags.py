"""ROS bags (workbench.recordings.bags) and static postures (workbench.recordings.standstill).

Bags are written here by rosbags in every storage (ROS 1 .bag, ROS 2 sqlite3 and
MCAP folders, bare .db3 and .mcap files) from arrays the test generates, with
shuffled joint order, joints left out of messages, zero stamps and out-of-order
stamps; what is read back is compared with those arrays. Standstill detection
runs on a step-and-hold trajectory with encoder-like noise, its boundaries
checked within a tolerance derived from the threshold; quaternion means are
compared with SciPy's Rotation.mean.
"""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from rosbags.rosbag1 import Writer as Writer1
from rosbags.typesys import Stores, get_typestore
from scipy.spatial.transform import Rotation

from workbench import cli
from workbench.errors import WorkbenchError
from workbench.recordings import bags, standstill
from workbench.testing.bag_writer import (
    JointStateStream,
    PoseStream,
    write_bag,
    write_joint_states,
    write_poses,
)

STORAGES = ("ros1", "sqlite3", "mcap", "bare.db3", "bare.mcap")
NAMES = ("shoulder", "elbow", "wrist")


def bag_path(tmp_path: Path, kind: str, name: str = "rec") -> tuple[Path, str]:
    """(path, storage) of a bag of ``kind`` in ``tmp_path``."""
    if kind == "ros1":
        return tmp_path / f"{name}.bag", "ros1"
    if kind.startswith("bare."):
        suffix = kind.split(".")[1]
        return tmp_path / f"{name}.{suffix}", "mcap" if suffix == "mcap" else "sqlite3"
    return tmp_path / f"{name}_{kind}", kind


def stamps(count: int, seed: int, t0_s: int = 1000, period_ns: int = 2_000_000) -> np.ndarray:
    """Integer nanosecond stamps with jitter (strictly increasing)."""
    rng = np.random.default_rng(seed)
    jitter = rng.integers(-300_000, 300_000, count)
    return t0_s * 10**9 + np.arange(count) * period_ns + jitter


def seconds(ns: np.ndarray) -> np.ndarray:
    """The float nearest to each ns / 1e9 (exact rational arithmetic)."""
    return np.array([float(Fraction(int(v), 10**9)) for v in ns])


def assert_times(t: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_allclose(t, expected, rtol=1e-15, atol=0)


def random_quaternions(rng: np.random.Generator, count: int) -> np.ndarray:
    q = rng.normal(size=(count, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def recording():
    """Joint states: 120 messages, out-of-order header stamps, joints left out of some."""
    rng = np.random.default_rng(7)
    count = 120
    receive_ns = stamps(count, 1)
    header_ns = receive_ns - 5_000_000  # recorded 5 ms after the stamp
    swap = np.arange(10, count - 1, 17)  # stamps of neighbours exchanged: out of order
    header_ns[swap], header_ns[swap + 1] = header_ns[swap + 1], header_ns[swap].copy()
    position = rng.normal(size=(count, 3))
    effort = rng.normal(scale=10.0, size=(count, 3))
    drop = rng.random((count, 3)) < 0.15
    drop[0] = False
    return {
        "t": seconds(header_ns),
        "receive_t": seconds(receive_ns),
        "position": position,
        "effort": effort,
        "drop": drop,
    }


def write_recording(path: Path, storage: str, rec: dict) -> Path:
    return write_joint_states(
        path, storage, rec["t"], NAMES, rec["position"], effort=rec["effort"],
        shuffle_names=True, drop=rec["drop"], receive_t=rec["receive_t"],
    )  # fmt: skip


# -------------------------------------------------------------- joint states
@pytest.mark.parametrize("kind", STORAGES)
def test_joint_states_are_the_written_arrays(tmp_path, kind, recording):
    path, storage = bag_path(tmp_path, kind)
    write_recording(path, storage, recording)
    assert bags.is_bag(path)
    states = bags.read_joint_states(path, joints=NAMES)
    order = np.argsort(recording["t"], kind="stable")
    assert states.names == NAMES
    assert (np.diff(states.t) >= 0).all() and (np.diff(order) < 0).any()  # input was out of order
    assert_times(states.t, recording["t"][order])
    missing = recording["drop"][order]
    np.testing.assert_array_equal(np.isnan(states.position), missing)
    np.testing.assert_array_equal(states.position[~missing], recording["position"][order][~missing])
    np.testing.assert_array_equal(states.effort[~missing], recording["effort"][order][~missing])
    assert np.isnan(states.velocity).all()  # written empty
    np.testing.assert_array_equal(states.message, order + 1)  # receive order = writing order


def test_every_joint_seen_in_order_of_first_appearance(tmp_path, recording):
    path, storage = bag_path(tmp_path, "mcap")
    write_recording(path, storage, recording)
    states = bags.read_joint_states(path)
    assert sorted(states.names) == sorted(NAMES)
    chosen = bags.read_joint_states(path, joints=["wrist", "shoulder"])
    for k, name in enumerate(chosen.names):
        np.testing.assert_array_equal(
            chosen.position[:, k], states.position[:, states.names.index(name)]
        )


def test_all_storages_give_identical_arrays(tmp_path, recording):
    read = []
    for kind in STORAGES:
        path, storage = bag_path(tmp_path, kind)
        write_recording(path, storage, recording)
        read.append(bags.read_joint_states(path, joints=NAMES))
    for other in read[1:]:
        for field in ("t", "position", "velocity", "effort", "message"):
            np.testing.assert_array_equal(getattr(other, field), getattr(read[0], field))


@pytest.mark.parametrize("kind", ("ros1", "sqlite3", "bare.mcap"))
def test_zero_stamps_use_the_receive_time(tmp_path, kind):
    path, storage = bag_path(tmp_path, kind)
    receive = seconds(stamps(30, 3))
    q = np.random.default_rng(3).normal(size=(30, 3))
    write_joint_states(path, storage, receive + 7.0, NAMES, q, zero_stamps=True, receive_t=receive)
    states = bags.read_joint_states(path)
    assert_times(states.t, receive)
    np.testing.assert_array_equal(states.position, q)


def test_duplicate_stamps_are_kept_in_recorded_order(tmp_path):
    path, storage = bag_path(tmp_path, "ros1")
    t = np.array([1.0, 1.5, 1.5, 2.0])
    q = np.arange(12.0).reshape(4, 3)
    write_joint_states(path, storage, t, NAMES, q, receive_t=[1.0, 1.6, 1.7, 2.0])
    states = bags.read_joint_states(path)
    np.testing.assert_array_equal(states.t, t)
    np.testing.assert_array_equal(states.position, q)


# --------------------------------------------------------------------- poses
@pytest.mark.parametrize("kind", STORAGES)
@pytest.mark.parametrize(
    "msgtype", ("PoseStamped", "TransformStamped", "TFMessage", "PoseWithCovarianceStamped",
                "Odometry"),
)  # fmt: skip
def test_poses_are_the_written_arrays(tmp_path, kind, msgtype):
    rng = np.random.default_rng(11)
    t = seconds(stamps(40, 5, period_ns=10_000_000))
    p, quat = rng.normal(size=(40, 3)), random_quaternions(rng, 40)
    path, storage = bag_path(tmp_path, kind)
    write_poses(path, storage, "/mocap", t, p, quat, msgtype, child_frame="tool")
    poses = bags.read_poses(path, "/mocap")
    assert_times(poses.t, t)
    np.testing.assert_array_equal(poses.position, p)
    np.testing.assert_array_equal(poses.quaternion_xyzw, quat)
    table = bags.pose_table(path, "/mocap")
    assert table.header == ("t", "x", "y", "z", "qx", "qy", "qz", "qw")
    np.testing.assert_array_equal(table.values[:, 1:], np.column_stack([p, quat]))
    assert table.where(4) == f"{path}: line 5"


@pytest.mark.parametrize("kind", ("ros1", "mcap"))
def test_tf_topic_with_several_children(tmp_path, kind):
    rng = np.random.default_rng(2)
    t = seconds(stamps(25, 9, period_ns=10_000_000))
    streams = {
        child: (rng.normal(size=(25, 3)), random_quaternions(rng, 25))
        for child in ("tool", "marker")
    }
    path, storage = bag_path(tmp_path, kind)
    write_bag(path, storage, [
        PoseStream("/tf", t, p, quat, "TFMessage", child_frame=child)
        for child, (p, quat) in streams.items()
    ])  # fmt: skip
    for child, (p, quat) in streams.items():
        poses = bags.read_poses(path, "/tf", child_frame=child)
        assert poses.child_frame == child
        assert_times(poses.t, t)
        np.testing.assert_array_equal(poses.position, p)
        np.testing.assert_array_equal(poses.quaternion_xyzw, quat)
    with pytest.raises(WorkbenchError, match=rf"{path}: topic /tf carries .*tool, marker"):
        bags.read_poses(path, "/tf")
    with pytest.raises(WorkbenchError, match=r"no transform to child frame .camera.*tool, marker"):
        bags.read_poses(path, "/tf", child_frame="camera")


def test_joint_states_and_poses_in_one_bag(tmp_path, recording):
    path, storage = bag_path(tmp_path, "sqlite3")
    rng = np.random.default_rng(4)
    t = recording["receive_t"][::4]
    p, quat = rng.normal(size=(t.size, 3)), random_quaternions(rng, t.size)
    write_bag(path, storage, [
        JointStateStream(recording["t"], NAMES, recording["position"],
                         receive_t=recording["receive_t"]),
        PoseStream("/mocap/tool", t, p, quat),
    ])  # fmt: skip
    table = bags.bag_table(path, "/joint_states", "position", joints=NAMES)
    order = np.argsort(recording["t"], kind="stable")
    assert table.header == ("t", *NAMES)
    assert_times(table.values[:, 0], recording["t"][order])
    np.testing.assert_array_equal(table.values[:, 1:], recording["position"][order])
    np.testing.assert_array_equal(table.lines, order + 1)
    np.testing.assert_array_equal(bags.read_poses(path, "/mocap/tool").position, p)
    with pytest.raises(WorkbenchError, match="no message carries velocity"):
        bags.bag_table(path, "/joint_states", "velocity")


def test_topics_count_rate_and_span(tmp_path, recording):
    path, storage = bag_path(tmp_path, "ros1")
    write_recording(path, storage, recording)
    (info,) = bags.topics(path)
    receive = recording["receive_t"]
    assert (info.name, info.msgtype, info.count) == ("/joint_states", JOINT, receive.size)
    assert info.rate_hz == pytest.approx(1.0 / np.median(np.diff(receive)), rel=1e-9)
    assert (info.start, info.end) == pytest.approx((receive[0], receive[-1]), rel=1e-15)


JOINT = "sensor_msgs/msg/JointState"


def test_info_lists_the_topics(tmp_path, recording, capsys):
    path, storage = bag_path(tmp_path, "bare.mcap")
    rng = np.random.default_rng(5)
    t = seconds(stamps(50, 6, period_ns=10_000_000))
    write_bag(path, storage, [
        JointStateStream(recording["t"], NAMES, recording["position"],
                         receive_t=recording["receive_t"]),
        PoseStream("/mocap", t, rng.normal(size=(50, 3)), random_quaternions(rng, 50)),
    ])  # fmt: skip
    assert cli.main(["info", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in lines[2:4]}
    assert set(rows) == {"/joint_states", "/mocap"}
    assert lines[4] == f"/joint_states joints: {', '.join(NAMES)}"
    assert lines[5].startswith("/joint_states joints that move: ")
    expected = {
        "/joint_states": (JOINT, recording["receive_t"]),
        "/mocap": ("geometry_msgs/msg/PoseStamped", t),
    }
    for topic, (msgtype, times) in expected.items():
        _, kind, count, rate = rows[topic]
        assert (kind, int(count)) == (msgtype, times.size)
        assert float(rate) == pytest.approx(1.0 / np.median(np.diff(times)), abs=1e-3)
    assert cli.main(["info", "planar_2r"]) == 0  # models still work
    assert "planar_2r" in capsys.readouterr().out


# -------------------------------------------------------------------- errors
@pytest.fixture()
def small_bag(tmp_path, recording) -> Path:
    path, storage = bag_path(tmp_path, "mcap")
    t = recording["t"][:10]
    return write_bag(path, storage, [
        JointStateStream(t, NAMES, recording["position"][:10]),
        PoseStream("/mocap", t, np.zeros((10, 3)), np.tile([0.0, 0.0, 0.0, 1.0], (10, 1))),
    ])  # fmt: skip


def test_missing_topic_lists_the_topics(small_bag):
    with pytest.raises(WorkbenchError) as error:
        bags.read_joint_states(small_bag, "/joints")
    message = str(error.value)
    assert str(small_bag) in message and "no topic /joints" in message
    assert f"/joint_states ({JOINT})" in message
    assert "/mocap (geometry_msgs/msg/PoseStamped)" in message


def test_wrong_message_type(small_bag):
    with pytest.raises(WorkbenchError, match=rf"{small_bag}: topic /mocap carries geometry_msgs"):
        bags.read_joint_states(small_bag, "/mocap")
    with pytest.raises(WorkbenchError, match=f"topic /joint_states carries {JOINT}"):
        bags.read_poses(small_bag, "/joint_states")


def test_missing_joint_is_named(small_bag):
    with pytest.raises(WorkbenchError) as error:
        bags.read_joint_states(small_bag, joints=["elbow", "finger"])
    message = str(error.value)
    assert str(small_bag) in message and "'finger'" in message
    assert "shoulder, elbow, wrist" in message
    with pytest.raises(WorkbenchError, match="must be distinct"):
        bags.read_joint_states(small_bag, joints=["elbow", "elbow"])


def test_pose_stamped_has_no_child_frame(small_bag):
    with pytest.raises(WorkbenchError, match="no child frame"):
        bags.read_poses(small_bag, "/mocap", child_frame="tool")


@pytest.mark.parametrize("kind", STORAGES)
def test_damaged_bags(tmp_path, kind, recording):
    path, storage = bag_path(tmp_path, kind)
    write_recording(path, storage, recording)
    data = path if path.is_file() else next(f for f in path.iterdir() if f.suffix != ".yaml")
    data.write_bytes(data.read_bytes()[: data.stat().st_size // 2])
    with pytest.raises(WorkbenchError, match=f"cannot read ROS bag {path}"):
        bags.read_joint_states(path)
    garbage = tmp_path / f"garbage{path.suffix or '.mcap'}"
    garbage.write_bytes(b"not a bag at all" * 8)
    with pytest.raises(WorkbenchError, match=f"cannot read ROS bag {garbage}"):
        bags.topics(garbage)


def test_missing_bag_and_not_a_bag(tmp_path, capsys):
    with pytest.raises(WorkbenchError, match="ROS bag not found"):
        bags.read_joint_states(tmp_path / "none.bag")
    with pytest.raises(WorkbenchError, match="is not a ROS bag"):
        bags.read_joint_states(tmp_path)
    assert cli.main(["info", str(tmp_path / "none.mcap")]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_empty_topic_and_inconsistent_message(tmp_path):
    typestore = get_typestore(Stores.ROS1_NOETIC)
    types = typestore.types
    path = tmp_path / "bad.bag"
    header = types["std_msgs/msg/Header"](seq=0, stamp=types["builtin_interfaces/msg/Time"](1, 0),
                                          frame_id="")  # fmt: skip
    msg = types[JOINT](header, ["a", "b"], np.array([1.0]), np.zeros(0), np.zeros(0))
    with Writer1(path) as writer:
        writer.add_connection("/empty", JOINT, typestore=typestore)
        bad = writer.add_connection("/joint_states", JOINT, typestore=typestore)
        writer.write(bad, 10**9, typestore.serialize_ros1(msg, JOINT))
    with pytest.raises(WorkbenchError, match=f"{path}: topic /empty has no messages"):
        bags.read_joint_states(path, "/empty")
    with pytest.raises(WorkbenchError, match="message 1 has 2 names but 1 position values"):
        bags.read_joint_states(path)


# ---------------------------------------------------------------- standstill
def step_and_hold(rng, holds: int, dt: float, speed: float, sigma: float):
    """Holds of 1-2 s at random postures joined by straight moves at joint speed ``speed``."""
    postures = rng.uniform(-1.5, 1.5, size=(holds, 3))
    knots_t, knots_q, spans = [0.0], [postures[0]], []
    for k in range(holds):
        a = knots_t[-1]
        b = a + rng.uniform(1.0, 2.0)
        spans.append((a, b))
        knots_t.append(b)
        knots_q.append(postures[k])
        if k + 1 < holds:
            move = np.abs(postures[k + 1] - postures[k]).max() / speed
            knots_t.append(b + move)
            knots_q.append(postures[k + 1])
    t = np.arange(0.0, knots_t[-1], dt)
    knots_q = np.array(knots_q)
    q = np.column_stack([np.interp(t, knots_t, knots_q[:, j]) for j in range(3)])
    return t, q + rng.normal(scale=sigma, size=q.shape), postures, np.array(spans)


def test_standstill_segments_on_step_and_hold():
    rng = np.random.default_rng(21)
    dt, move_speed, sigma, threshold = 0.002, 0.5, 2e-5, 0.01
    t, q, _, spans = step_and_hold(rng, 6, dt, move_speed, sigma)
    window = 10 * sigma / threshold  # noise speed < 7 sigma / window < threshold
    segments = standstill.standstill_segments(
        t, q, speed=threshold, min_duration=0.5, window=window
    )
    assert len(segments) == len(spans)
    shrink = window + 2 * dt  # a crossing interval spans at most window + dt
    grow = (threshold * (window + dt) + 7 * sigma) / move_speed + dt
    for s, (a, b) in zip(segments, spans, strict=True):
        start, end = t[s.start], t[s.stop - 1]
        assert a - grow <= start <= a + shrink
        assert b - shrink <= end <= b + grow
    without_window = standstill.standstill_segments(t, q, speed=threshold, min_duration=0.5)
    assert len(without_window) != len(spans)  # noise speed sigma sqrt(2) / dt is above threshold


def test_average_postures_and_poses():
    rng = np.random.default_rng(22)
    dt, sigma, threshold = 0.002, 2e-5, 0.01
    t, q, postures, spans = step_and_hold(rng, 4, dt, 0.5, sigma)
    segments = standstill.standstill_segments(
        t, q, speed=threshold, min_duration=0.5, window=10 * sigma / threshold
    )
    truth = Rotation.random(len(spans), random_state=3)
    pose_t = np.arange(0.0, t[-1], 0.01)  # mocap at 100 Hz
    hold = np.searchsorted((spans[:-1, 1] + spans[1:, 0]) / 2, pose_t)  # a hold until mid-move
    noise = Rotation.from_rotvec(rng.normal(scale=1e-3, size=(pose_t.size, 3)))
    quat = (truth[hold] * noise).as_quat()
    quat[rng.random(pose_t.size) < 0.5] *= -1  # q and -q: one rotation
    position = rng.normal(scale=1e-4, size=(pose_t.size, 3)) + hold[:, None]
    result = standstill.average_postures(
        t, q, segments, pose_t=pose_t, position=position, quaternion_xyzw=quat
    )
    np.testing.assert_allclose(result.q, postures, atol=5 * sigma)
    for k, s in enumerate(segments):
        inside = (pose_t >= t[s.start]) & (pose_t <= t[s.stop - 1])
        assert result.pose_count[k] == inside.sum()
        np.testing.assert_allclose(result.position[k], position[inside].mean(axis=0), atol=1e-14)
        reference = Rotation.from_quat(quat[inside]).mean().as_quat()
        mean = result.quaternion_xyzw[k]
        np.testing.assert_allclose(mean, np.sign(mean @ reference) * reference, atol=1e-12)
        assert mean @ quat[inside][0] >= 0  # signed like the first sample
        angle = (Rotation.from_quat(mean) * truth[k].inv()).magnitude()
        assert angle < 5 * 1e-3 / np.sqrt(inside.sum())


def test_standstill_rejects_bad_input():
    with pytest.raises(WorkbenchError, match="non-decreasing"):
        standstill.standstill_segments([0.0, 2.0, 1.0], np.zeros((3, 2)), speed=1, min_duration=0)
    with pytest.raises(WorkbenchError, match="speed > 0"):
        standstill.standstill_segments([0.0, 1.0], np.zeros((2, 2)), speed=0, min_duration=0)
    with pytest.raises(WorkbenchError, match="q contains nan"):
        standstill.standstill_segments([0.0, 1.0], [[0.0], [np.nan]], speed=1, min_duration=0)


def test_standstill_rule_on_a_single_step():
    """One step between samples 4 and 5 at window 0: the interval [4, 5] moves, so samples
    4 and 5 move (both ends), leaving 0-3 and 6-9 (0.3 s each); a repeated time adds no
    zero-length interval."""
    t = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.7, 0.9])
    q = np.repeat([[0.0, 2.0], [1.0, 2.0]], 5, axis=0)
    q[8] += 1e-3  # a change at the repeated time 0.7: below speed * 0.2 over [7, 9]
    segments = standstill.standstill_segments(t, q, speed=0.1, min_duration=0.25)
    assert segments == [slice(0, 4), slice(6, 10)]
    assert standstill.standstill_segments(t, q, speed=0.1, min_duration=0.35) == []


def test_static_postures_from_one_bag(tmp_path):
    """Joint states and mocap poses written to one MCAP bag, read back, held postures found."""
    rng = np.random.default_rng(23)
    dt, sigma, threshold = 0.002, 2e-5, 0.01
    t, q, postures, spans = step_and_hold(rng, 3, dt, 0.5, sigma)
    t = t + 1000.0
    pose_t = np.arange(t[0], t[-1], 0.01)
    middles = (spans[:-1, 1] + spans[1:, 0]) / 2 + 1000.0  # poses of a hold until mid-move
    hold = np.searchsorted(middles, pose_t)
    truth = Rotation.random(len(spans), random_state=4)
    path, storage = bag_path(tmp_path, "mcap")
    write_bag(path, storage, [
        JointStateStream(t, NAMES, q, shuffle_names=True),
        PoseStream("/mocap/tool", pose_t, hold[:, None] * np.ones(3), truth[hold].as_quat()),
    ])  # fmt: skip
    states = bags.read_joint_states(path, joints=NAMES)
    poses = bags.read_poses(path, "/mocap/tool")
    segments = standstill.standstill_segments(
        states.t, states.position, speed=threshold, min_duration=0.5, window=10 * sigma / threshold
    )
    result = standstill.average_postures(
        states.t, states.position, segments, pose_t=poses.t, position=poses.position,
        quaternion_xyzw=poses.quaternion_xyzw,
    )  # fmt: skip
    np.testing.assert_allclose(result.q, postures, atol=5 * sigma)
    np.testing.assert_allclose(result.position, np.arange(len(spans))[:, None] * np.ones(3))
    angles = (Rotation.from_quat(result.quaternion_xyzw) * truth.inv()).magnitude()
    assert angles.max() < 1e-12
