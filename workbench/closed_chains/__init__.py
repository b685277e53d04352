"""Closed-chain mechanisms: spanning tree + loop closures + motors.

``load("planar_fivebar")`` returns a shipped closed chain by name,
``read(path)`` one described by a closure file (format in
:mod:`workbench.closed_chains.model`) and ``load("DIR")`` or
``load("DIR/robot.yaml")`` a folder of example-parallel-robots
(:mod:`workbench.closed_chains.robot_folder`), as a :class:`ClosedChain` whose home
configuration is checked closed and whose motors determine the passive
joints; kinematics, dynamics and derivatives are in the submodules of the
same names, the tool's task space in ``task_space``.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np

from workbench.closed_chains.closures import ROWS
from workbench.closed_chains.kinematics import check_assembly
from workbench.closed_chains.model import TASKS, ClosedChain, Closure
from workbench.closed_chains.robot_folder import is_robot_folder, read_folder
from workbench.closed_chains.robot_folder import warn_open_tree as warn_open_tree
from workbench.config import Section, read_toml
from workbench.errors import WorkbenchError
from workbench.exports import exports
from workbench.models.urdf import load_urdf
from workbench.resources import shipped

# name -> closure file under the shipped models/ directory
SHIPPED = {
    "fivebar": "fivebar/fivebar.toml",
    "planar_fivebar": "planar_fivebar/planar_fivebar.toml",
    "fourbar": "fourbar/fourbar.toml",
    "delta": "delta/delta.toml",
}

_NAMES = {  # the submodules, and their most used functions by name
    "kinematics": None,
    "dynamics": None,
    "derivatives": None,
    "task_space": None,
    "solve_passive": "kinematics",
    "velocities": "kinematics",
    "accelerations": "kinematics",
    "motor_torques": "dynamics",
    "forward_dynamics": "dynamics",
    "simulate": "dynamics",
    "closed_chain_derivatives": "derivatives",
    "write_mjcf": "mjcf",
    "robot_folder": None,
}
__all__, __getattr__ = exports(
    __name__,
    _NAMES,
    (
        "SHIPPED",
        "ClosedChain",
        "Closure",
        "is_closed_chain",
        "is_robot_folder",
        "warn_open_tree",
        "load",
        "read",
        "read_folder",
    ),
)


def is_closed_chain(name: str | os.PathLike) -> bool:
    """Whether ``name`` names a shipped closed chain, a closure file (.toml) or a folder
    of example-parallel-robots (or its robot.yaml)."""
    return str(name) in SHIPPED or str(name).endswith(".toml") or is_robot_folder(name)


def load(name: str | os.PathLike, tool: str | None = None) -> ClosedChain:
    """A shipped closed chain by name, a closure file by path, or a folder of
    example-parallel-robots (``DIR`` or ``DIR/robot.yaml``); ``tool`` names the tool
    frame of a folder's model (default its last frame; the others name theirs)."""
    if is_robot_folder(name):
        path = Path(name).resolve()
        return _load_folder(path, tool, _signature(path))
    if tool is not None:
        raise WorkbenchError(f"{name}: its closure file names the tool; no other tool frame")
    if str(name) in SHIPPED:
        return _load(shipped("models") / SHIPPED[str(name)])
    if str(name).endswith(".toml"):
        return read(name)
    raise WorkbenchError(
        f"unknown closed chain '{name}'; shipped: {', '.join(SHIPPED)}, a closure file "
        "(.toml), or a folder of example-parallel-robots (DIR with robot.urdf and robot.yaml)"
    )


@functools.lru_cache(maxsize=32)
def _load_folder(path: Path, tool: str | None, signature: tuple) -> ClosedChain:
    return read_folder(path, tool)


def _signature(path: Path) -> tuple:
    """Modification times and sizes of the files a folder's model is read from: a file
    edited in a long-lived session (a notebook) is read again, not served from the cache."""
    folder, yaml_file = (path, path / "robot.yaml") if path.is_dir() else (path.parent, path)
    out = []
    for file in (folder / "robot.urdf", yaml_file):
        try:
            status = file.stat()
        except OSError:
            out.append(None)
            continue
        out.append((status.st_mtime_ns, status.st_size))
    return tuple(out)


@functools.cache
def _load(path: Path) -> ClosedChain:
    return read(path)


def read(path: str | os.PathLike) -> ClosedChain:
    """Read a closure file and the URDF it names; refuse a model that does not assemble."""
    path = Path(path)
    top = Section(read_toml(path, "closure file"), str(path))
    urdf = path.parent / top.string("urdf")
    tool = top.string("tool", None)
    try:
        tree = load_urdf(urdf, tool_frame=tool)
    except WorkbenchError as exc:  # a missing URDF or tool frame: say which closure file
        raise WorkbenchError(f"{path}: {exc}") from None
    actuated = tuple(top.strings("actuated"))
    for joint in actuated:
        _named(tree.joint_index, joint, top.where("actuated"))
    task = top.string("task", "position", choices=TASKS)
    home_table = top.section("home")
    home = np.zeros(tree.n)
    for joint in list(home_table.table):
        home[_named(tree.joint_index, joint, home_table.where(joint))] = home_table.number(joint)
    home_table.done()
    closures = []
    for section in top.sections("closure"):
        frames = section.strings("frames", length=2)
        for frame in frames:
            _named(tree.parent_of, frame, section.where("frames"))
        closures.append(
            Closure(
                section.string("name", f"closure_{len(closures) + 1}"),
                section.string("type", choices=ROWS),
                (frames[0], frames[1]),
            )
        )
        section.done()
    if not closures:
        raise WorkbenchError(f"{path}: no [[closure]] tables; a closed chain needs one")
    top.done()
    model = ClosedChain(tree, tuple(closures), actuated, home, task, tree.name, urdf, path)
    return check_assembly(model)


def _named(lookup, name: str, where: str):
    """``lookup(name)`` (a joint's index, a frame's parent), its error naming ``where``."""
    try:
        return lookup(name)
    except WorkbenchError as exc:
        raise WorkbenchError(f"{where}: {exc}") from None
