"""What ``workbench view`` shows: a robot and a trajectory read from a results file.

A result is a results directory holding ``trajectory.npz`` or such a file
itself, with arrays ``t`` (K,) in seconds and ``q`` (K, n) joint values. For
the five-bar (the default model) n = 5 in joint order 1..5 and the spanning
tree is drawn with all five values, which draws the closed loop; for any
other model (a URDF path or a name known to :mod:`workbench.models`) q holds
Pinocchio configurations (K, nq).
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from workbench import closed_chains, models
from workbench.errors import WorkbenchError
from workbench.io import check_input_file
from workbench.viz.scene import Robot, check_trajectory

Array = NDArray[np.float64]

FIVEBAR = "fivebar"
TRAJECTORY_FILE = "trajectory.npz"


@dataclass(frozen=True)
class Playback:
    """A robot and its configurations q (K, nq) at increasing times t (K,) in seconds."""

    robot: Robot
    t: Array
    q: Array


def load_playback(result: str | os.PathLike, model: str | None = None) -> Playback:
    """Read ``result`` (directory or .npz) for ``model``.

    Default model: the one named in the result's ``summary.json`` (a
    ``workbench reach`` result), else the spherical five-bar. A closed
    chain's trajectories hold its tree's joint values, the robot's.
    """

    path = trajectory_file(result)
    t, q = _read_t_q(path)
    model = model or _summary_model(path) or FIVEBAR
    if closed_chains.is_closed_chain(model):
        closed = closed_chains.load(model)
        if q.ndim != 2 or q.shape[1] != closed.n:
            raise WorkbenchError(
                f"{path}: q has shape {q.shape}; {closed.name} expects (K, {closed.n}), joints "
                f"{', '.join(closed.tree.joint_names)}"
            )
        if not np.isfinite(q).all():
            raise WorkbenchError(f"{path}: q contains NaN or inf")
        robot = Robot.from_urdf(closed.urdf_path)
    else:
        robot = robot_by_name(model)
    check_trajectory(robot, t, q, str(path))
    return Playback(robot, t, q)


def _summary_model(path: Path) -> str | None:
    """The model named in ``summary.json`` beside a trajectory file, if any."""
    import json

    summary = path.parent / "summary.json"
    try:
        model = json.loads(summary.read_text(encoding="utf-8")).get("model")
    except (OSError, ValueError, AttributeError):
        return None
    return model if isinstance(model, str) else None


def robot_by_name(model: str) -> Robot:
    """A :class:`Robot` from a URDF path or a name known to :mod:`workbench.models`."""

    if model.endswith(".urdf") or Path(model).is_file():
        return Robot.from_urdf(model)
    urdf = models.urdf_path(model)
    return Robot.from_urdf(urdf, models.package_dirs(model), models.MODELS[model].locked_prefixes)


def trajectory_file(result: str | os.PathLike) -> Path:
    """``result`` itself if it is a file, else ``result/trajectory.npz``."""
    path = Path(result)
    if path.is_dir():
        path = path / TRAJECTORY_FILE
    return check_input_file(path, "trajectory file")


def _read_t_q(path: Path) -> tuple[Array, Array]:
    try:
        with np.load(path, allow_pickle=False) as data:
            names = list(data.files)
            arrays = {k: np.asarray(data[k], dtype=float) for k in ("t", "q") if k in names}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise WorkbenchError(f"{path}: not a readable .npz of numeric arrays: {exc}") from exc
    missing = [k for k in ("t", "q") if k not in arrays]
    if missing:
        raise WorkbenchError(
            f"{path}: missing array(s) {', '.join(missing)}; it has {', '.join(names) or 'none'}"
        )
    return arrays["t"], arrays["q"]
