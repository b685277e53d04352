"""Write joint states and poses into ROS bags, for tests and simulated recordings.

``storage`` is ``"ros1"`` (a ROS 1 ``.bag`` file), ``"sqlite3"`` or ``"mcap"``
(a ROS 2 bag folder with that storage). With ``"sqlite3"``/``"mcap"`` and a
path ending in ``.db3``/``.mcap`` the storage file alone is written, without
its ``metadata.yaml`` (a bare file). Bags are written with ``rosbags`` in a
temporary path beside the target, then renamed (the target must not exist).

Times are seconds (float64), or integer nanoseconds when given as an integer
array (written exactly, e.g. epoch stamps); a float time's header stamp is
``sec = floor(t)``, ``nanosec = round((t - sec) * 1e9)``, so that times on a
nanosecond grid come back exactly. The receive time (the bag's own timestamp) is ``receive_t``,
``t`` when not given; messages are written in order of receive time (stable),
so header stamps may be out of order when ``t`` is.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike
from rosbags.rosbag1 import Writer as Writer1
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Writer2
from rosbags.typesys import Stores, get_types_from_msg, get_typestore

from workbench.errors import WorkbenchError

STORAGES = ("ros1", "sqlite3", "mcap")
POSE_MESSAGES = {
    "PoseStamped": "geometry_msgs/msg/PoseStamped",
    "TransformStamped": "geometry_msgs/msg/TransformStamped",
    "TFMessage": "tf2_msgs/msg/TFMessage",
    "PoseWithCovarianceStamped": "geometry_msgs/msg/PoseWithCovarianceStamped",
    "Odometry": "nav_msgs/msg/Odometry",
}


@dataclass(frozen=True)
class JointStateStream:
    """sensor_msgs/JointState messages: one per sample of ``t`` (N,), fields (N, n) or None.

    ``shuffle_names``: each message lists the joints in a random order
    (``seed``); ``drop`` (N, n) bool: True leaves that joint out of that
    message; ``zero_stamps``: header stamps are zero (readers then use the
    receive time).
    """

    t: ArrayLike
    names: Sequence[str]
    position: ArrayLike | None = None
    velocity: ArrayLike | None = None
    effort: ArrayLike | None = None
    topic: str = "/joint_states"
    shuffle_names: bool = False
    drop: ArrayLike | None = None
    zero_stamps: bool = False
    receive_t: ArrayLike | None = None
    seed: int = 0


@dataclass(frozen=True)
class PoseStream:
    """Poses of ``child_frame`` in ``frame_id``: ``position`` (N, 3) m, ``quaternion_xyzw`` (N, 4).

    ``msgtype`` is PoseStamped, TransformStamped, TFMessage (one transform
    per message; several TFMessage streams may share a topic, as on /tf),
    PoseWithCovarianceStamped or Odometry (zero covariance and twist).
    """

    topic: str
    t: ArrayLike
    position: ArrayLike
    quaternion_xyzw: ArrayLike
    msgtype: str = "PoseStamped"
    child_frame: str = "tool"
    frame_id: str = "world"
    zero_stamps: bool = False
    receive_t: ArrayLike | None = None


def write_joint_states(
    path: str | os.PathLike,
    storage: str,
    t: ArrayLike,
    names: Sequence[str],
    position: ArrayLike | None = None,
    velocity: ArrayLike | None = None,
    effort: ArrayLike | None = None,
    *,
    topic: str = "/joint_states",
    shuffle_names: bool = False,
    drop: ArrayLike | None = None,
    zero_stamps: bool = False,
    receive_t: ArrayLike | None = None,
    seed: int = 0,
) -> Path:
    """A bag with one joint-state topic (:class:`JointStateStream`)."""
    stream = JointStateStream(
        t, names, position, velocity, effort, topic, shuffle_names, drop, zero_stamps,
        receive_t, seed,
    )  # fmt: skip
    return write_bag(path, storage, [stream])


def write_poses(
    path: str | os.PathLike,
    storage: str,
    topic: str,
    t: ArrayLike,
    position: ArrayLike,
    quaternion_xyzw: ArrayLike,
    msgtype: str = "PoseStamped",
    child_frame: str = "tool",
    *,
    frame_id: str = "world",
    zero_stamps: bool = False,
    receive_t: ArrayLike | None = None,
) -> Path:
    """A bag with one pose topic (:class:`PoseStream`)."""
    stream = PoseStream(
        topic, t, position, quaternion_xyzw, msgtype, child_frame, frame_id, zero_stamps, receive_t
    )
    return write_bag(path, storage, [stream])


def write_bag(
    path: str | os.PathLike, storage: str, streams: Sequence[JointStateStream | PoseStream]
) -> Path:
    """Write every stream into one bag (module docstring for ``storage`` and paths)."""
    path = Path(path)
    if storage not in STORAGES:
        raise WorkbenchError(f"unknown bag storage '{storage}'; use one of {', '.join(STORAGES)}")
    if path.exists():
        raise WorkbenchError(f"{path} exists already; bags are written to new paths")
    ros1 = storage == "ros1"
    typestore = get_typestore(Stores.ROS1_NOETIC if ros1 else Stores.ROS2_HUMBLE)
    if "tf2_msgs/msg/TFMessage" not in typestore.types:
        typestore.register(
            get_types_from_msg(
                "geometry_msgs/TransformStamped[] transforms", "tf2_msgs/msg/TFMessage"
            )
        )
    messages = []  # (receive ns, topic, msgtype, message)
    for stream in streams:
        build = _joint_messages if isinstance(stream, JointStateStream) else _pose_messages
        messages.extend(build(stream, typestore, ros1))
    messages.sort(key=lambda m: m[0])
    bare = not ros1 and path.suffix.lower() in (".db3", ".mcap")
    path.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        target = stage / ("bag.bag" if ros1 else "bag")
        if ros1:
            writer = Writer1(target)
        else:
            plugin = StoragePlugin.MCAP if storage == "mcap" else StoragePlugin.SQLITE3
            writer = Writer2(target, version=9, storage_plugin=plugin)
        with writer:
            connections = {}
            for _, topic, msgtype, _ in messages:
                if topic not in connections:
                    connections[topic] = writer.add_connection(topic, msgtype, typestore=typestore)
            serialize = typestore.serialize_ros1 if ros1 else typestore.serialize_cdr
            for ns, topic, msgtype, msg in messages:
                writer.write(connections[topic], ns, serialize(msg, msgtype))
        if bare:
            (data,) = [f for f in target.iterdir() if f.name != "metadata.yaml"]
            os.replace(data, path)
        else:
            os.replace(target, path)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return path


def _nanoseconds(t: ArrayLike) -> np.ndarray:
    """Times as int64 ns: integer arrays as they are, float seconds on the nearest ns."""
    t = np.asarray(t)
    if t.dtype.kind in "iu":
        return t.astype(np.int64)
    t = t.astype(float)
    sec = np.floor(t)
    return sec.astype(np.int64) * 1_000_000_000 + np.rint((t - sec) * 1e9).astype(np.int64)


def _header(typestore, ros1: bool, ns: int, zero: bool, frame_id: str = "", seq: int = 0):
    sec, nanosec = divmod(int(ns), 1_000_000_000)
    stamp = typestore.types["builtin_interfaces/msg/Time"](
        sec=0 if zero else sec, nanosec=0 if zero else nanosec
    )
    header = typestore.types["std_msgs/msg/Header"]
    return header(seq=seq, stamp=stamp, frame_id=frame_id) if ros1 else header(stamp, frame_id)


def _receive_ns(ns: np.ndarray, receive_t: ArrayLike | None) -> list[int]:
    return (ns if receive_t is None else _nanoseconds(receive_t)).tolist()


def _joint_messages(stream: JointStateStream, typestore, ros1: bool) -> list[tuple]:
    t = _nanoseconds(stream.t)
    n, names = len(stream.names), list(stream.names)
    fields = {
        field: None if value is None else np.asarray(value, dtype=float).reshape(t.size, n)
        for field, value in (
            ("position", stream.position),
            ("velocity", stream.velocity),
            ("effort", stream.effort),
        )
    }
    drop = np.zeros((t.size, n), bool) if stream.drop is None else np.asarray(stream.drop, bool)
    rng = np.random.default_rng(stream.seed)
    cls = typestore.types["sensor_msgs/msg/JointState"]
    out = []
    for k, ns in enumerate(_receive_ns(t, stream.receive_t)):
        order = rng.permutation(n) if stream.shuffle_names else np.arange(n)
        order = order[~drop[k, order]]
        arrays = {
            field: np.zeros(0) if value is None else value[k, order].copy()
            for field, value in fields.items()
        }
        header = _header(typestore, ros1, t[k], stream.zero_stamps, seq=k)
        msg = cls(header=header, name=[names[i] for i in order], **arrays)
        out.append((ns, stream.topic, "sensor_msgs/msg/JointState", msg))
    return out


def _pose_messages(stream: PoseStream, typestore, ros1: bool) -> list[tuple]:
    if stream.msgtype not in POSE_MESSAGES:
        raise WorkbenchError(
            f"unknown pose message '{stream.msgtype}'; use one of {', '.join(POSE_MESSAGES)}"
        )
    msgtype = POSE_MESSAGES[stream.msgtype]
    types = typestore.types
    t = _nanoseconds(stream.t)
    p = np.asarray(stream.position, dtype=float).reshape(t.size, 3)
    q = np.asarray(stream.quaternion_xyzw, dtype=float).reshape(t.size, 4)
    out = []
    for k, ns in enumerate(_receive_ns(t, stream.receive_t)):
        header = _header(typestore, ros1, t[k], stream.zero_stamps, stream.frame_id, seq=k)
        quaternion = types["geometry_msgs/msg/Quaternion"](*q[k])
        if stream.msgtype in ("TransformStamped", "TFMessage"):
            translation = types["geometry_msgs/msg/Vector3"](*p[k])
            transform = types["geometry_msgs/msg/Transform"](translation, quaternion)
            msg = types["geometry_msgs/msg/TransformStamped"](header, stream.child_frame, transform)
            if stream.msgtype == "TFMessage":
                msg = types[msgtype]([msg])
        else:
            point = types["geometry_msgs/msg/Point"](*p[k])
            pose = types["geometry_msgs/msg/Pose"](point, quaternion)
            if stream.msgtype == "PoseStamped":
                msg = types[msgtype](header, pose)
            else:
                covariant = types["geometry_msgs/msg/PoseWithCovariance"](pose, np.zeros(36))
                if stream.msgtype == "PoseWithCovarianceStamped":
                    msg = types[msgtype](header, covariant)
                else:
                    zero = types["geometry_msgs/msg/Vector3"](0.0, 0.0, 0.0)
                    twist = types["geometry_msgs/msg/TwistWithCovariance"](
                        types["geometry_msgs/msg/Twist"](zero, zero), np.zeros(36)
                    )
                    msg = types[msgtype](header, stream.child_frame, covariant, twist)
        out.append((ns, stream.topic, msgtype, msg))
    return out
