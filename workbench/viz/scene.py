"""A URDF robot, its animated trajectory and its tool path in a meshcat scene.

The robot is drawn by Pinocchio's :class:`~pinocchio.visualize.MeshcatVisualizer`
from the visual geometry of its URDF; mesh file names relative to the URDF
(``meshes/arc_1.stl``) resolve against the URDF's directory, ``package://``
names against the package directories. The trajectory becomes one meshcat
animation clip per mesh (keyframes at the trajectory times, paused at t[0]),
the tool path a polyline through the tool frame's origins.

Conventions: meshcat's world frame is the robot's base frame (z up, metres);
``q`` holds Pinocchio configurations (K, model.nq) at times ``t`` (K,) in
seconds, increasing.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import meshcat
import meshcat.geometry as mg
import numpy as np
from meshcat.animation import Animation
from numpy.typing import NDArray

from workbench.config import check_memory
from workbench.errors import WorkbenchError
from workbench.models.placements import create_data
from workbench.models.urdf_check import check_urdf, parse_quietly

Array = NDArray[np.float64]

ROOT = "robot"  # meshcat node of the robot's meshes
TOOL_PATH = "tool_path"  # meshcat node of the tool path polyline
# memory per keyframe and mesh of an animation: 7.5 GB for 2,000,000 keyframes of the
# five-bar's 7 meshes measured (about 540 bytes per keyframe and mesh), rounded up
FRAME_NODE_BYTES = 2048
FPS = 30  # animation frame rate: keyframe k sits at frame t[k] * FPS, i.e. at time t[k]
TOOL_PATH_COLOR = 0xE0301E


@dataclass(frozen=True)
class Robot:
    """Pinocchio's kinematic model and visual geometry of a URDF robot."""

    model: object  # pinocchio.Model
    visual_model: object  # pinocchio.GeometryModel
    urdf_path: Path

    @classmethod
    def from_urdf(
        cls,
        path: str | os.PathLike,
        package_dirs: list[Path] | None = None,
        locked_prefixes: tuple[str, ...] = (),
    ) -> Robot:
        """Load a URDF; joints whose names start with ``locked_prefixes`` are locked at zero."""
        import pinocchio as pin

        path = Path(path)
        check_urdf(path)
        dirs = [str(d) for d in [path.parent, *(package_dirs or [])]]

        def parse():
            model = pin.buildModelFromUrdf(str(path))
            return model, pin.buildGeomFromUrdf(
                model, str(path), pin.GeometryType.VISUAL, None, dirs
            )

        model, visual = parse_quietly(path, parse)
        if locked_prefixes:
            locked = [
                j for j in range(1, model.njoints) if model.names[j].startswith(locked_prefixes)
            ]
            model, visual = pin.buildReducedModel(model, visual, locked, pin.neutral(model))
        return cls(model, visual, path)

    @property
    def nq(self) -> int:
        """Size of a configuration vector."""
        return self.model.nq

    def tool_frame(self, name: str | None = None) -> str:
        """``name`` if given, else "end_effector" if the model has it, else the last frame."""
        if name is None:
            return (
                "end_effector"
                if self.model.existFrame("end_effector")
                else self.model.frames[-1].name
            )
        if not self.model.existFrame(name):
            raise WorkbenchError(f"{self.urdf_path}: no frame named '{name}'")
        return name

    def tool_positions(self, q: Array, frame: str | None = None) -> Array:
        """Origins (K, 3) of the tool frame in the base frame along q (K, nq)."""
        import pinocchio as pin

        fid = self.model.getFrameId(self.tool_frame(frame))
        data = create_data(self.model, str(self.urdf_path))
        out = np.empty((len(q), 3))
        for k, qk in enumerate(q):
            pin.framesForwardKinematics(self.model, data, qk)
            out[k] = data.oMf[fid].translation
        return out

    def mesh_placements(self, q: Array) -> list[dict[str, Array]]:
        """Per sample of q (K, nq): meshcat node name -> 4x4 placement (mesh scale applied)."""
        import pinocchio as pin

        data = create_data(self.model, str(self.urdf_path))
        geometry_data = self.visual_model.createData()
        frames = []
        for qk in q:
            pin.forwardKinematics(self.model, data, qk)
            pin.updateGeometryPlacements(self.model, data, self.visual_model, geometry_data)
            frames.append(
                {
                    _node(obj.name): _scaled(geometry_data.oMg[i].homogeneous, obj.meshScale)
                    for i, obj in enumerate(self.visual_model.geometryObjects)
                }
            )
        return frames


def show_trajectory(
    vis: meshcat.Visualizer, robot: Robot, t: Array, q: Array, *, tool_frame: str | None = None
) -> None:
    """Draw the robot at q[0], its animation along (t, q) and the tool path; aim the camera."""
    check_trajectory(robot, t, q)
    nodes = max(1, len(robot.visual_model.geometryObjects))
    check_memory(
        f"an animation of {len(t)} samples", len(t) * nodes * FRAME_NODE_BYTES,
        f"an animation keyframe per sample for {nodes} meshes, {FRAME_NODE_BYTES} bytes each",
    )  # fmt: skip
    viz = _meshcat_visualizer()(robot.model, None, robot.visual_model)
    viz.initViewer(viewer=vis)
    viz.loadViewerModel(rootNodeName=ROOT)
    placements = robot.mesh_placements(q)
    for node, T in placements[0].items():
        vis[node].set_transform(T)
    animation = Animation(default_framerate=FPS)
    for tk, frame in zip(t - t[0], placements, strict=True):
        with animation.at_frame(vis, float(tk * FPS)) as at:
            for node, T in frame.items():
                at[node].set_transform(T)
    vis.set_animation(animation, play=False)
    path = robot.tool_positions(q, tool_frame)
    vis[TOOL_PATH].set_object(
        mg.Line(mg.PointsGeometry(path.T), mg.LineBasicMaterial(color=TOOL_PATH_COLOR, linewidth=3))
    )
    aim_camera(vis, np.vstack([path, np.zeros((1, 3))]))


def aim_camera(vis: meshcat.Visualizer, points: Array) -> None:
    """Place the camera so that the points (N, 3) and the origin are in view, looking at the origin.

    The camera sits on the diagonal (1, 0.6, 0.6) of the base frame, at three
    times the largest distance of a point from the origin (at least 0.3 m).
    meshcat's camera node ``/Cameras/default/rotated`` is y-up: a base-frame
    offset (x, y, z) is (x, z, -y) there.
    """
    reach = max(0.1, float(np.linalg.norm(points, axis=1).max()))
    x, y, z = 3.0 * reach * np.array([1.0, 0.6, 0.6]) / np.linalg.norm([1.0, 0.6, 0.6])
    vis["/Cameras/default/rotated/<object>"].set_property("position", [x, z, -y])


def check_trajectory(robot: Robot, t: Array, q: Array, source: str = "trajectory") -> None:
    """Raise WorkbenchError unless t (K,) is finite and increasing and q (K, nq) finite."""
    t, q = np.asarray(t), np.asarray(q)
    if t.ndim != 1 or len(t) == 0:
        raise WorkbenchError(f"{source}: t has shape {t.shape}; expected (K,) with K >= 1")
    if q.ndim != 2 or q.shape != (len(t), robot.nq):
        raise WorkbenchError(
            f"{source}: q has shape {q.shape}; expected ({len(t)}, {robot.nq}) for "
            f"{robot.urdf_path.name} ({robot.nq} configuration values)"
        )
    for name, x in (("t", t), ("q", q)):
        if not np.isfinite(x).all():
            first = tuple(int(i) for i in np.argwhere(~np.isfinite(x))[0])
            raise WorkbenchError(f"{source}: {name} contains NaN or inf (first at index {first})")
    if np.any(np.diff(t) <= 0):
        raise WorkbenchError(f"{source}: t is not strictly increasing")


def _meshcat_visualizer() -> type:
    """Pinocchio's ``MeshcatVisualizer`` class, imported without trimesh when viser is absent.

    ``pinocchio.visualize`` imports every viewer it ships; its viser viewer imports
    trimesh (about 0.5 s) and is usable only with viser installed. Without viser
    that import is skipped: pinocchio catches the ImportError and marks the viser
    viewer unavailable, as it would have anyway. Nothing else changes.
    """
    if "pinocchio.visualize" in sys.modules or importlib.util.find_spec("viser") is not None:
        from pinocchio.visualize import MeshcatVisualizer

        return MeshcatVisualizer
    blocked = "trimesh" not in sys.modules
    if blocked:
        sys.modules["trimesh"] = None  # makes ``import trimesh`` raise ImportError
    try:
        from pinocchio.visualize import MeshcatVisualizer
    finally:
        if blocked:
            del sys.modules["trimesh"]
    return MeshcatVisualizer


def _node(geometry_name: str) -> str:
    return f"{ROOT}/visuals/{geometry_name}"


def _scaled(T: Array, scale: Array) -> Array:
    """The placement with the mesh scale applied to its rotation columns."""
    out = T.copy()
    out[:3, :3] = T[:3, :3] * np.asarray(scale)[None, :]
    return out
