"""Joint states and poses from ROS bags: ROS 1 ``.bag`` files, ROS 2 bags and bare storage files.

A *bag* is a ROS 1 ``.bag`` file, a ROS 2 bag folder (one holding
``metadata.yaml``, with sqlite3 or MCAP storage), or a ROS 2 storage file on
its own (a ``.db3`` or ``.mcap`` file without its ``metadata.yaml``, e.g. an
MCAP file written by ``ros2 bag record -s mcap`` or by Foxglove). All are read
with the ``rosbags`` package (bare storage files since its version 0.11);
message definitions come from the bag, or from the ROS 2 Humble type store
when a ROS 2 bag carries none.

Time. Every sample's time is its header stamp, kept exactly as integer
nanoseconds since the epoch (``sec * 10**9 + nanosec``, :attr:`JointStates.stamp_ns`);
when a stamp is zero the time the recorder received the message (the bag's
own timestamp) is used instead. ``t`` is the same in float seconds since the
epoch (about 0.24 µs resolution at today's stamps): a log description makes
the stamps relative to the recording's first one before they become float
seconds (:mod:`workbench.recordings.stamps`). Samples are sorted by time
(messages may be recorded out of order); equal times are kept, in recorded
order, as they are (no sample is dropped or merged).

Messages are numbered from 1 in the order the bag yields them on their topic
(receive time); :attr:`JointStates.message` and :attr:`Poses.message` keep each
sample's number, and the ``lines`` of a bag's :class:`Table` are these
message numbers, so an error "BAG: line 7" means the 7th message on the topic.

Every problem (missing file or topic, wrong message type, unknown joint or
child frame, empty topic, corrupt or truncated bag) raises
:class:`~workbench.errors.WorkbenchError` naming the bag and the topic.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from rosbags.highlevel import AnyReader
from rosbags.typesys import Stores, get_typestore

from workbench.config import check_memory
from workbench.errors import WorkbenchError
from workbench.io import check_input_file
from workbench.lie import Array
from workbench.recordings.clock import check_no_jump_back
from workbench.recordings.stamps import NS_PER_S
from workbench.recordings.tables import Table

JOINT_STATE = "sensor_msgs/msg/JointState"
POSE_TYPES = (
    "geometry_msgs/msg/PoseStamped",
    "geometry_msgs/msg/PoseWithCovarianceStamped",
    "geometry_msgs/msg/TransformStamped",
    "nav_msgs/msg/Odometry",
    "tf2_msgs/msg/TFMessage",
)
FIELDS = ("position", "velocity", "effort")
BAG_SUFFIXES = (".bag", ".db3", ".mcap")
POSE_HEADER = ("t", "x", "y", "z", "qx", "qy", "qz", "qw")


@dataclass(frozen=True)
class TopicInfo:
    """One topic of a bag: receive times in seconds; ``rate_hz`` = 1 / the median positive
    period between receive times (messages received at one instant, as on /tf, count once)."""

    name: str
    msgtype: str
    count: int
    rate_hz: float  # NaN with fewer than two distinct receive times
    start: float
    end: float


@dataclass(frozen=True)
class JointStates:
    """sensor_msgs/JointState samples by joint name (module docstring for time).

    ``position``, ``velocity`` and ``effort`` are (N, n) in the order of
    ``names`` (rad or m, rad/s or m/s, N m or N), NaN where a message lacks
    the joint or leaves the field empty.
    """

    path: Path
    topic: str
    t: Array  # (N,) s since the epoch, sorted
    names: tuple[str, ...]
    position: Array
    velocity: Array
    effort: Array
    message: np.ndarray  # (N,) message number on the topic (from 1)
    stamp_ns: np.ndarray  # (N,) int64 ns since the epoch, exactly (t in integer nanoseconds)


@dataclass(frozen=True)
class Poses:
    """Poses of ``child_frame`` (None for PoseStamped topics): metres, quaternions x y z w."""

    path: Path
    topic: str
    child_frame: str | None
    t: Array  # (N,) s since the epoch, sorted
    position: Array  # (N, 3) m
    quaternion_xyzw: Array  # (N, 4) as recorded
    message: np.ndarray  # (N,) message number on the topic (from 1)
    stamp_ns: np.ndarray  # (N,) int64 ns since the epoch, exactly


def is_bag(path: str | os.PathLike) -> bool:
    """A ``.bag``, ``.db3`` or ``.mcap`` path (existing or not) or a folder with metadata.yaml."""
    path = Path(path)
    if path.is_dir():
        return (path / "metadata.yaml").is_file()
    return path.suffix.lower() in BAG_SUFFIXES


def topics(path: str | os.PathLike) -> list[TopicInfo]:
    """Every topic of the bag, sorted by name (reads the whole bag once, without decoding)."""
    path = Path(path)
    with _open(path) as reader:
        stamps: dict[str, list[int]] = {name: [] for name in reader.topics}
        for connection, ns, _ in _guarded(path, "", reader.messages()):
            stamps[connection.topic].append(ns)
        infos = []
        for name, info in sorted(reader.topics.items()):
            t = _seconds_of_ns(np.sort(np.asarray(stamps[name], dtype=np.int64)))
            periods = np.diff(t)[np.diff(t) > 0]
            period = float(np.median(periods)) if periods.size else 0.0
            infos.append(
                TopicInfo(
                    name=name,
                    msgtype=info.msgtype or "(several types)",
                    count=int(t.size),
                    rate_hz=1.0 / period if period > 0 else float("nan"),
                    start=float(t[0]) if t.size else float("nan"),
                    end=float(t[-1]) if t.size else float("nan"),
                )
            )
    return infos


def read_joint_states(
    path: str | os.PathLike,
    topic: str = "/joint_states",
    joints: Sequence[str] | None = None,
) -> JointStates:
    """The sensor_msgs/JointState messages of ``topic`` as arrays by joint name.

    ``joints`` selects and orders the columns (each must appear in some
    message); None keeps every joint seen, in order of first appearance.
    Messages may list their joints in any order and leave some out.
    """
    path = Path(path)
    where = f"{path}: topic {topic}"
    messages, names, values, stamps = [], [], {f: [] for f in FIELDS}, []
    with _open(path) as reader:
        _topic_type(reader, path, topic, (JOINT_STATE,))
        for number, ns, msg in _topic_messages(reader, path, topic):
            n = len(msg.name)
            for field in FIELDS:
                if len(getattr(msg, field)) not in (0, n):
                    raise WorkbenchError(
                        f"{where}: message {number} has {n} names but "
                        f"{len(getattr(msg, field))} {field} values"
                    )
                values[field].append(np.asarray(getattr(msg, field), dtype=float))
            if len(set(msg.name)) != n:
                raise WorkbenchError(f"{where}: message {number} names a joint twice")
            messages.append(number)
            names.append(tuple(msg.name))
            stamps.append((msg.header.stamp.sec, msg.header.stamp.nanosec, ns))
    seen = list(dict.fromkeys(name for row in names for name in row))
    if joints is None:
        selected = tuple(seen)
    else:
        selected = tuple(joints)
        if not selected or len(set(selected)) != len(selected):
            raise WorkbenchError(f"{where}: joints {list(selected)} must be distinct and not none")
        if missing := [name for name in selected if name not in seen]:
            raise WorkbenchError(
                f"{where}: joint '{missing[0]}' is in no message; the joints are {', '.join(seen)}"
            )
    column = {name: k for k, name in enumerate(selected)}
    layouts: dict[tuple[str, ...], np.ndarray] = {}  # messages mostly repeat one name order
    for row in names:
        if row not in layouts:
            layouts[row] = np.array([column.get(name, -1) for name in row], dtype=np.int64)
    cols = [layouts[row] for row in names]
    ns = _stamp_ns(np.asarray(stamps, dtype=np.int64))
    check_no_jump_back(_seconds_of_ns(ns), f"{where}: time stamps")
    order = np.argsort(ns, kind="stable")
    arrays = {
        field: _scatter(values[field], cols, len(messages), len(selected))[order]
        for field in FIELDS
    }
    return JointStates(
        path, topic, _seconds_of_ns(ns[order]), selected, **arrays,
        message=np.asarray(messages)[order], stamp_ns=ns[order],
    )  # fmt: skip


def read_poses(path: str | os.PathLike, topic: str, child_frame: str | None = None) -> Poses:
    """Poses from PoseStamped, PoseWithCovarianceStamped, TransformStamped, Odometry or TFMessage.

    ``child_frame`` selects the transforms (or odometry messages) whose
    ``child_frame_id`` it is; it is required when the topic carries several
    child frames (a ``/tf`` topic) and not allowed for PoseStamped topics.
    """
    path = Path(path)
    where = f"{path}: topic {topic}"
    rows = []  # (message, child, sec, nanosec, receive ns, x, y, z, qx, qy, qz, qw)
    with _open(path) as reader:
        msgtype = _topic_type(reader, path, topic, POSE_TYPES)
        for number, ns, msg in _topic_messages(reader, path, topic):
            rows.extend((number, *pose, ns) for pose in _poses_of(msgtype, msg))
    if not rows:
        raise WorkbenchError(f"{where}: the {msgtype} messages hold no transforms")
    children = list(dict.fromkeys(row[1] for row in rows))
    if children == [None]:
        if child_frame is not None:
            raise WorkbenchError(
                f"{where}: {msgtype} messages have no child frame; leave out child_frame "
                f"('{child_frame}')"
            )
    elif child_frame is None:
        if len(children) > 1:
            raise WorkbenchError(
                f"{where} carries several child frames ({', '.join(children)}); choose one"
            )
    elif child_frame not in children:
        raise WorkbenchError(
            f"{where}: no transform to child frame '{child_frame}'; the child frames are "
            f"{', '.join(children)}"
        )
    else:
        rows = [row for row in rows if row[1] == child_frame]
    numbers = np.array([row[0] for row in rows], dtype=np.int64)
    stamps = np.array([(row[2], row[3], row[-1]) for row in rows], dtype=np.int64)
    values = np.array([row[4:11] for row in rows], dtype=float)
    ns = _stamp_ns(stamps)
    order = np.argsort(ns, kind="stable")
    child = child_frame if child_frame is not None else children[0]
    return Poses(
        path, topic, child, _seconds_of_ns(ns[order]), values[order, :3], values[order, 3:],
        numbers[order], ns[order],
    )  # fmt: skip


def bag_table(
    path: str | os.PathLike,
    topic: str,
    field: str,
    joints: Sequence[str] | None = None,
) -> Table:
    """A joint-state field as a table ``t, joint...`` (NaN where a message lacks a value).

    ``lines`` are message numbers (module docstring). An error if no
    message carries the field.
    """
    if field not in FIELDS:
        raise WorkbenchError(f"unknown joint-state field '{field}'; use one of {', '.join(FIELDS)}")
    return states_table(read_joint_states(path, topic, joints), field)


def states_table(states: JointStates, field: str) -> Table:
    """One field of joint states already read, as :func:`bag_table` returns it."""
    values = getattr(states, field)
    if np.isnan(values).all():
        raise WorkbenchError(
            f"{states.path}: topic {states.topic}: no message carries {field} values"
        )
    return Table(
        states.path, ("t", *states.names), np.column_stack([states.t, values]), states.message,
        time_ns=states.stamp_ns,
    )  # fmt: skip


def pose_table(path: str | os.PathLike, topic: str, child_frame: str | None = None) -> Table:
    """Poses as a table ``t, x, y, z, qx, qy, qz, qw``; ``lines`` are message numbers."""
    poses = read_poses(path, topic, child_frame)
    values = np.column_stack([poses.t, poses.position, poses.quaternion_xyzw])
    return Table(poses.path, POSE_HEADER, values, poses.message, time_ns=poses.stamp_ns)


# ------------------------------------------------------------------ reading
@contextlib.contextmanager
def _open(path: Path) -> Iterator[AnyReader]:
    """The open reader of a bag; every failure of the bag's parser becomes a WorkbenchError."""
    if not is_bag(path):
        raise WorkbenchError(
            f"{path} is not a ROS bag (a .bag, .db3 or .mcap file, or a folder with metadata.yaml)"
        )
    if not path.exists():
        raise WorkbenchError(f"ROS bag not found: {path}")
    _check_bag_files(path)
    reader = None
    try:
        reader = AnyReader([path], default_typestore=get_typestore(Stores.ROS2_HUMBLE))
        reader.open()
    except Exception as exc:  # the parser raises many types on damaged files
        raise _unreadable(path, "", exc) from None
    try:
        yield reader
    finally:
        with contextlib.suppress(Exception):
            reader.close()


BAG_MEMORY_FACTOR = 8  # bytes of memory per byte of bag: decoded rows, the table, the fits


def _check_bag_files(path: Path) -> None:
    """Refuse a bag whose files are not regular files (a FIFO would block the reader, a link to
    ``/dev/zero`` never end) or would not fit in memory once read, before opening it."""
    if path.is_dir():
        files = [path / "metadata.yaml"]
        files += sorted(p for p in path.iterdir() if p.suffix.lower() in BAG_SUFFIXES)
    else:
        files = [path]
    size = sum(check_input_file(file, "ROS bag file").stat().st_size for file in files)
    check_memory(
        f"ROS bag {path} ({size / 2**20:.0f} MiB)",
        BAG_MEMORY_FACTOR * size,
        f"{BAG_MEMORY_FACTOR} bytes per byte of bag once its messages are decoded",
    )


def _guarded(path: Path, topic: str, items: Iterator) -> Iterator:
    """``items`` with the parser's exceptions turned into WorkbenchError naming bag and topic."""
    while True:
        try:
            item = next(items, None)
        except Exception as exc:  # damaged chunks raise assorted types
            raise _unreadable(path, topic, exc) from None
        if item is None:
            return
        yield item


def _unreadable(path: Path, topic: str, exc: Exception) -> WorkbenchError:
    reason = " ".join(str(exc).split()) or type(exc).__name__
    context = f" (topic {topic})" if topic else ""
    return WorkbenchError(f"cannot read ROS bag {path}{context}: {reason}")


def _topic_type(reader: AnyReader, path: Path, topic: str, accepted: tuple[str, ...]) -> str:
    """The message type of ``topic``, with errors listing the topics or the accepted types."""
    available = reader.topics
    if topic not in available:
        listing = ", ".join(f"{name} ({info.msgtype})" for name, info in sorted(available.items()))
        raise WorkbenchError(f"{path}: no topic {topic}; the topics are {listing or 'none'}")
    info = available[topic]
    if info.msgtype not in accepted:
        raise WorkbenchError(
            f"{path}: topic {topic} carries {info.msgtype or 'several message types'}, "
            f"not {' or '.join(accepted)}"
        )
    if info.msgcount == 0:
        raise WorkbenchError(f"{path}: topic {topic} has no messages")
    return info.msgtype


def _topic_messages(reader: AnyReader, path: Path, topic: str) -> Iterator[tuple[int, int, object]]:
    """(message number from 1, receive time ns, decoded message) of ``topic`` (checked before)."""
    connections = [c for c in reader.connections if c.topic == topic]
    number = 0
    for connection, ns, raw in _guarded(path, topic, reader.messages(connections)):
        number += 1
        try:
            msg = reader.deserialize(raw, connection.msgtype)
        except Exception as exc:  # a damaged message
            raise _unreadable(path, f"{topic}, message {number}", exc) from None
        yield number, ns, msg
    if number == 0:
        raise WorkbenchError(f"{path}: topic {topic} has no messages")


def _poses_of(msgtype: str, msg) -> list[tuple]:
    """(child frame or None, sec, nanosec, x, y, z, qx, qy, qz, qw) of each pose in ``msg``."""

    def row(child, stamp, p, q) -> tuple:
        return (child, stamp.sec, stamp.nanosec, p.x, p.y, p.z, q.x, q.y, q.z, q.w)

    def transform(m) -> tuple:
        return row(m.child_frame_id, m.header.stamp, m.transform.translation, m.transform.rotation)

    extract: dict[str, Callable[[object], list[tuple]]] = {
        "geometry_msgs/msg/PoseStamped": lambda m: [
            row(None, m.header.stamp, m.pose.position, m.pose.orientation)
        ],
        "geometry_msgs/msg/PoseWithCovarianceStamped": lambda m: [
            row(None, m.header.stamp, m.pose.pose.position, m.pose.pose.orientation)
        ],
        "nav_msgs/msg/Odometry": lambda m: [
            row(m.child_frame_id, m.header.stamp, m.pose.pose.position, m.pose.pose.orientation)
        ],
        "geometry_msgs/msg/TransformStamped": lambda m: [transform(m)],
        "tf2_msgs/msg/TFMessage": lambda m: [transform(x) for x in m.transforms],
    }
    return extract[msgtype](msg)


# ------------------------------------------------------------- arrays, time
def _seconds_of_ns(ns: np.ndarray) -> Array:
    """Integer nanoseconds as float seconds (whole seconds and fraction added once)."""
    sec, nsec = np.divmod(ns, NS_PER_S)
    return sec.astype(float) + nsec / 1e9


def _stamp_ns(stamps: np.ndarray) -> np.ndarray:
    """(N, 3) int rows (sec, nanosec, receive ns) -> (N,) int64 ns: the stamp, or the receive
    time if the stamp is zero."""
    stamps = stamps.reshape(-1, 3)
    zero = (stamps[:, 0] == 0) & (stamps[:, 1] == 0)
    return np.where(zero, stamps[:, 2], stamps[:, 0] * NS_PER_S + stamps[:, 1])


def _scatter(values: list[np.ndarray], cols: list[np.ndarray], rows: int, width: int) -> Array:
    """(rows, width) with NaN, each message's values put in the columns of its names."""
    out = np.full((rows, width), np.nan)
    sizes = np.array([v.size for v in values], dtype=np.int64)
    filled = np.flatnonzero(sizes)
    if filled.size == 0:
        return out
    row = np.repeat(filled, sizes[filled])
    col = np.concatenate([cols[k] for k in filled])
    val = np.concatenate([values[k] for k in filled])
    keep = col >= 0
    out[row[keep], col[keep]] = val[keep]
    return out
