"""meshcat servers: a self-contained HTML export and a live viewer of a robot trajectory.

meshcat keeps the scene in a server process (zmq for commands, HTTP and
websockets for browsers). :func:`static_html` needs no server: meshcat's own
server code (its command handler, which keeps the scene tree, and its static
export: one HTML page with meshcat's JavaScript inlined, so it opens
offline) runs on a scene tree in this process (:class:`SceneWindow`).
:func:`serve` sends the scene to a server that keeps running: a new one on
localhost, or an existing one at ``zmq_url``; the caller closes it with
:func:`close`.

A server this module starts dies with the process that started it, however
that process ends (Ctrl-C, SIGTERM, even SIGKILL: on Linux the kernel sends
it SIGTERM when its parent dies), so that it never keeps port 7000 busy.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import meshcat
import numpy as np
import umsgpack
import zmq
from meshcat.servers.tree import SceneTree
from meshcat.servers.zmqserver import ZMQWebSocketBridge
from numpy.typing import NDArray

from workbench.errors import WorkbenchError
from workbench.io import atomic_write_text
from workbench.viz.scene import Robot, show_trajectory

Array = NDArray[np.float64]

CONNECT_TIMEOUT_MS = 3000
_PR_SET_PDEATHSIG = 1  # prctl option: a signal for this process when its parent dies


def static_html(robot: Robot, t: Array, q: Array, *, tool_frame: str | None = None) -> str:
    """The animated scene of the robot along (t, q) as one self-contained HTML page."""
    vis = meshcat.Visualizer(window=SceneWindow())
    show_trajectory(vis, robot, t, q, tool_frame=tool_frame)
    return vis.static_html()


class SceneWindow:
    """A meshcat window whose scene stays in this process (module docstring).

    Commands go to meshcat's server handler (``ZMQWebSocketBridge.handle_zmq``)
    run on a local scene tree, with no browser connected; ``get_scene`` is
    that handler's static export, the page a server would send.
    """

    server_proc = None

    def __init__(self) -> None:
        self._replies: list[bytes] = []
        self._server = _LocalServer(
            tree=SceneTree(),
            zmq_socket=_Replies(self._replies),
            forward_to_websockets=lambda frames: None,
        )

    def send(self, command) -> None:
        data = command.lower()
        self._handle([data["type"].encode(), data["path"].encode(), umsgpack.packb(data)])

    def get_scene(self) -> str:
        return self._handle([b"get_scene"]).decode("utf-8")

    def _handle(self, frames: list[bytes]) -> bytes:
        ZMQWebSocketBridge.handle_zmq(self._server, frames)
        return self._replies.pop()


@dataclass
class _LocalServer:
    """The attributes of a meshcat server that its command handler uses."""

    tree: SceneTree
    zmq_socket: _Replies
    forward_to_websockets: Callable


@dataclass
class _Replies:
    """Collects what the handler would send back over zmq."""

    replies: list[bytes]

    def send(self, data: bytes) -> None:
        self.replies.append(data)


def write_html(
    path: str | os.PathLike, robot: Robot, t: Array, q: Array, *, tool_frame: str | None = None
) -> Path:
    """Write :func:`static_html` to ``path`` atomically; return the path."""
    return atomic_write_text(path, static_html(robot, t, q, tool_frame=tool_frame))


def write_urdf_html(
    path: str | os.PathLike, urdf: str, t: Array, q: Array, *, tool_frame: str | None = None
) -> Path:
    """:func:`write_html` of the robot of the URDF file ``urdf`` (a drawing job's form,
    :mod:`workbench.viz.drawing`)."""
    return write_html(path, Robot.from_urdf(urdf), t, q, tool_frame=tool_frame)


def serve(
    robot: Robot,
    t: Array,
    q: Array,
    *,
    zmq_url: str | None = None,
    tool_frame: str | None = None,
) -> meshcat.Visualizer:
    """Send the animated scene to a live meshcat server and return its visualizer.

    Without ``zmq_url`` a new server starts on localhost; its page is at
    ``vis.url()``. The server runs until :func:`close` (or interpreter exit).
    """
    vis = connect(zmq_url)
    try:
        show_trajectory(vis, robot, t, q, tool_frame=tool_frame)
    except BaseException:
        close(vis)
        raise
    return vis


@contextlib.contextmanager
def local_visualizer() -> Iterator[meshcat.Visualizer]:
    """A visualizer on a fresh meshcat server on localhost, stopped on exit."""
    vis = connect(None)
    try:
        yield vis
    finally:
        close(vis)


def connect(zmq_url: str | None) -> meshcat.Visualizer:
    """A visualizer on a new local server (``zmq_url`` None) or on the server at ``zmq_url``.

    An existing server must answer within ``CONNECT_TIMEOUT_MS`` (meshcat itself
    would wait forever).
    """
    proc = None
    if zmq_url is None:
        proc, zmq_url = start_server()
    else:
        _check_server(zmq_url)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # meshcat prints the URL
            vis = meshcat.Visualizer(zmq_url=zmq_url)
    except BaseException:
        if proc is not None:
            _stop(proc)
        raise
    vis.window.server_proc = proc  # close() stops it
    return vis


def start_server() -> tuple[subprocess.Popen, str]:
    """A new meshcat server on localhost that dies with this process; it and its zmq URL.

    meshcat's own start (``meshcat.Visualizer()``) runs the server in a new
    session, which outlives a killed parent; this one asks the kernel to end
    it with its parent (Linux ``PR_SET_PDEATHSIG``).
    """
    from meshcat.servers.zmqserver import match_zmq_url

    prctl = ctypes.CDLL(None).prctl if sys.platform.startswith("linux") else None
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "meshcat.servers.zmqserver"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        preexec_fn=None if prctl is None else lambda: prctl(_PR_SET_PDEATHSIG, signal.SIGTERM),
    )
    try:
        for raw in proc.stdout:
            url = match_zmq_url(raw.decode("utf-8", "replace").strip())
            if url:
                return proc, url
    except BaseException:
        _stop(proc)
        raise
    _stop(proc)
    raise WorkbenchError(f"cannot start a meshcat server (exit code {proc.returncode})")


def close(vis: meshcat.Visualizer) -> None:
    """Close the visualizer's connection and stop its server if it started one."""
    window = vis.window
    window.zmq_socket.close(linger=0)
    if window.server_proc is not None:
        _stop(window.server_proc)


def _stop(proc: subprocess.Popen) -> None:
    """Kill a server process, reap it and close its pipes."""
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()


def _check_server(zmq_url: str) -> None:
    socket = zmq.Context.instance().socket(zmq.REQ)
    socket.setsockopt(zmq.LINGER, 0)
    try:
        socket.connect(zmq_url)
        socket.send(b"url")
        if not socket.poll(CONNECT_TIMEOUT_MS):
            raise WorkbenchError(
                f"no meshcat server answers at {zmq_url} (start one with `meshcat-server`)"
            )
        socket.recv()
    except zmq.ZMQError as exc:
        raise WorkbenchError(f"cannot connect to a meshcat server at {zmq_url}: {exc}") from exc
    finally:
        socket.close()
