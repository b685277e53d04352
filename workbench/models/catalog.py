"""Robot models by name: the project's shipped models and example-robot-data URDFs.

``load("iiwa")`` returns a :class:`~workbench.chain.Chain`; ``load_pinocchio``
returns the Pinocchio model it was built from. Names:

* shipped under ``models/``: ``iiwa`` (KUKA LBR iiwa 14 R820, identified
  inertial parameters of [Mueller]), ``planar_2r`` (the 2R of [Mueller] §6.1),
  ``staubli_tx40`` and ``ur10e`` (real robots with recordings to calibrate
  from, see their README files; the UR10e's are in ``models/ur10``);
* from the ``example-robot-data`` wheel (found under its installed prefix,
  the wheel has no Python loader): ``ur3``, ``ur5``, ``ur10_cb3`` (the
  CB3-series UR10, not the UR10e), ``panda``,
  ``panda_arm`` (fingers locked), ``talos`` (fixed-base), ``talos_upper_body``
  (legs locked), ``kinova``, ``z1``, ``double_pendulum``; whole robots
  with wheels, heads and grippers, calibrated a part at a time (name the
  joints to keep): ``tiago``, ``tiago_pro``, ``pr2``, ``baxter``,
  ``talos_full``.

Every name has a one-line :attr:`ModelSpec.description` (``workbench info``
lists them). A name that was given up because it was ambiguous (``ur10``,
which loaded the CB3-series UR10 beside the UR10e of ``models/ur10``) is
refused with a message naming the new names (:data:`RETIRED`).

A whole robot (any URDF: continuous joints, mimic joints, a floating or
planar root, wheels) is cut to the joints named in ``joints``, every other
movable joint locked at its ``locked`` value or zero
(:func:`workbench.models.urdf.load_robot`); the chain writes back as the whole
robot (:func:`workbench.models.urdf.write_urdf`).
"""

from __future__ import annotations

import functools
import importlib.metadata
import numbers
import os
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from workbench.chain import Chain
from workbench.errors import WorkbenchError
from workbench.models.pinocchio_conversion import from_pinocchio, load_urdf_model
from workbench.models.urdf import load_robot
from workbench.resources import shipped


@dataclass(frozen=True)
class ModelSpec:
    """Where a named model comes from, which joints are locked at zero, and what it is."""

    source: str  # "shipped" or "example-robot-data"
    path: str  # relative to models/ or to example-robot-data's robots/
    description: str
    locked_prefixes: tuple[str, ...] = ()
    tool_frame: str | None = None


_ERD = "example-robot-data"
MODELS: dict[str, ModelSpec] = {
    "iiwa": ModelSpec(
        "shipped", "iiwa/iiwa14.urdf",
        "KUKA LBR iiwa 14 R820 with the identified inertial parameters of [Mueller] "
        "(models/iiwa)",
    ),
    "planar_2r": ModelSpec(
        "shipped", "planar_2r/planar_2r.urdf", "the planar 2R arm of [Mueller] §6.1 "
        "(models/planar_2r)",
    ),
    "staubli_tx40": ModelSpec(
        "shipped", "staubli_tx40/tx40.urdf",
        "Staubli TX40 with its identification recording (models/staubli_tx40)",
    ),
    "ur10e": ModelSpec(
        "shipped", "ur10/ur10e.urdf",
        "Universal Robots UR10e in its cell, with the camera measurements of models/ur10",
        tool_frame="flange",
    ),
    "ur3": ModelSpec(_ERD, "ur_description/urdf/ur3_robot.urdf", "Universal Robots UR3, CB3 "
                     "series (example-robot-data)"),
    "ur5": ModelSpec(_ERD, "ur_description/urdf/ur5_robot.urdf", "Universal Robots UR5, CB3 "
                     "series (example-robot-data)"),
    "ur10_cb3": ModelSpec(
        _ERD, "ur_description/urdf/ur10_robot.urdf",
        "Universal Robots UR10, CB3 series (example-robot-data); not the UR10e of models/ur10, "
        "which is ur10e",
    ),
    "panda": ModelSpec(_ERD, "panda_description/urdf/panda.urdf", "Franka Emika Panda with its "
                       "gripper fingers (example-robot-data)"),
    "panda_arm": ModelSpec(
        _ERD, "panda_description/urdf/panda.urdf",
        "Franka Emika Panda, fingers locked (example-robot-data)", ("panda_finger",),
    ),
    "talos": ModelSpec(_ERD, "talos_data/robots/talos_reduced.urdf", "PAL TALOS humanoid, "
                       "fixed base (example-robot-data)"),
    "talos_upper_body": ModelSpec(
        _ERD, "talos_data/robots/talos_reduced.urdf",
        "PAL TALOS humanoid, legs locked (example-robot-data)", ("leg_",),
    ),
    "kinova": ModelSpec(_ERD, "kinova_description/robots/kinova.urdf", "Kinova arm "
                        "(example-robot-data)"),
    "z1": ModelSpec(_ERD, "z1_description/urdf/z1.urdf", "Unitree Z1 arm (example-robot-data)"),
    "double_pendulum": ModelSpec(
        _ERD, "double_pendulum_description/urdf/double_pendulum.urdf",
        "a double pendulum (example-robot-data)",
    ),
    "tiago": ModelSpec(_ERD, "tiago_description/robots/tiago.urdf", "PAL TIAGo, whole robot "
                       "(example-robot-data)"),
    "tiago_pro": ModelSpec(_ERD, "tiago_pro_description/robots/tiago_pro.urdf", "PAL TIAGo "
                           "Pro, whole robot (example-robot-data)"),
    "pr2": ModelSpec(_ERD, "pr2_description/urdf/pr2.urdf", "Willow Garage PR2, whole robot "
                     "(example-robot-data)"),
    "baxter": ModelSpec(_ERD, "baxter_description/urdf/baxter.urdf", "Rethink Robotics "
                        "Baxter, whole robot (example-robot-data)"),
    "talos_full": ModelSpec(_ERD, "talos_data/robots/talos_full_v2.urdf", "PAL TALOS "
                            "humanoid, whole robot (example-robot-data)"),
}  # fmt: skip

# names given up because they were ambiguous: what to type instead
RETIRED: dict[str, str] = {
    "ur10": "'ur10' named example-robot-data's CB3-series UR10, not the UR10e whose recordings "
    "are in models/ur10: use 'ur10e' for the UR10e of models/ur10 or 'ur10_cb3' for the "
    "CB3-series UR10",
}


@functools.cache
def example_robot_data_dir() -> Path:
    """The ``robots/`` directory of the installed example-robot-data wheel."""
    try:
        dist = importlib.metadata.distribution("example-robot-data")
    except importlib.metadata.PackageNotFoundError:
        raise WorkbenchError(
            "example-robot-data is not installed (pip install example-robot-data)"
        ) from None
    marker = "/share/example-robot-data/robots/"
    for f in dist.files or ():
        text = str(f)
        if marker in text:
            return Path(dist.locate_file(text[: text.index(marker) + len(marker)]))
    raise WorkbenchError("cannot find the robots/ directory of the example-robot-data package")


def package_dirs(name: str) -> list[Path]:
    """Where the ``package://`` mesh names of a named model's URDF resolve.

    example-robot-data's URDFs name their meshes
    ``package://example-robot-data/robots/...``, so the package directory is
    the ``share/`` directory two levels above :func:`example_robot_data_dir`.
    """
    if _is_path(name) or _spec(name).source != "example-robot-data":
        return []
    return [example_robot_data_dir().parents[1]]


def urdf_path(name: str) -> Path:
    """The URDF file behind a model name (or the path itself, for a URDF path)."""
    if _is_path(name):
        return Path(name)
    spec = _spec(name)
    root = shipped("models") if spec.source == "shipped" else example_robot_data_dir()
    path = root / spec.path
    if not path.is_file():
        raise WorkbenchError(f"model '{name}': URDF not found at {path}")
    return path


def movable_joints(name: str) -> tuple[str, ...]:
    """The revolute, continuous and prismatic joints of a model's URDF, in file order (the
    joints a log may name); empty when the file does not parse (loading it says why)."""
    kinds = ("revolute", "continuous", "prismatic")
    return tuple(j.get("name") for j in _joints(name) if j.get("type") in kinds)


def _joints(name: str) -> list[ET.Element]:
    """The ``<joint>`` elements of a model's URDF; empty when the file does not parse."""
    try:
        return list(ET.parse(urdf_path(name)).getroot().iter("joint"))
    except (ET.ParseError, OSError):
        return []


def joint_children(name: str) -> dict[str, str]:
    """Every joint of a model's URDF (fixed ones too) and its child link, by joint name; empty
    when the file does not parse (loading it says why)."""
    return {
        j.get("name"): j.find("child").get("link")
        for j in _joints(name)
        if j.find("child") is not None
    }


def path_joints(name: str, link: str) -> list[str]:
    """The joints of a model's URDF from its root link down to ``link``, root first; empty
    when ``link`` is no link of the file or the file does not parse."""
    above = {
        j.find("child").get("link"): (j.get("name"), j.find("parent").get("link"))
        for j in _joints(name)
        if j.find("child") is not None and j.find("parent") is not None
    }
    path, seen = [], set()
    while link in above and link not in seen:
        seen.add(link)
        joint, link = above[link]
        path.append(joint)
    return path[::-1]


def load_pinocchio(name: str):
    """The Pinocchio model of a named robot (locked joints removed at q = 0)."""
    import pinocchio as pin

    spec = _spec(name)
    model = load_urdf_model(urdf_path(name))
    if spec.locked_prefixes:
        locked = [
            jid
            for jid in range(1, model.njoints)
            if model.names[jid].startswith(spec.locked_prefixes)
        ]
        model = pin.buildReducedModel(model, locked, pin.neutral(model))
    return model


def load(
    name: str,
    tool_frame: str | None = None,
    *,
    moving: bool = False,
    joints: Sequence[str] | None = None,
    locked: Mapping[str, float] | None = None,
    held: Mapping[str, float] | None = None,
) -> Chain:
    """A named model (see the module docstring), or a path to a URDF file, as a Chain.

    ``joints`` keeps only the named joints of a whole robot and ``locked``
    gives the others their values, ``held`` the values a log held joints
    still at (used for the joints the model has; module docstring); ``moving=True``
    refuses a model without joints (nothing to simulate or calibrate).
    """
    if not isinstance(name, str | os.PathLike):
        raise WorkbenchError(f"model must be a model name or a URDF path; got {name!r:.60}")
    name = os.fspath(name)
    _check_joint_values(locked, "locked")
    _check_joint_values(held, "held")
    if joints is not None and (
        isinstance(joints, str) or not all(isinstance(j, str) for j in joints)
    ):
        raise WorkbenchError(f"joints must be a list of joint names; got {joints!r:.60}")
    tool_frame = tool_frame or _tool(name)
    whole = joints is not None or bool(locked)
    chain = None
    if not _is_path(name) and _spec(name).locked_prefixes:
        chain = from_pinocchio(load_pinocchio(name), tool_frame=tool_frame)
    elif not whole:
        chain = load_robot(urdf_path(name), None, None, tool_frame)
    if whole and (chain is None or locked or set(joints) != set(chain.joint_names)):
        chain = load_robot(urdf_path(name), joints, locked, tool_frame, held=held)
    if moving and chain.n == 0:
        raise WorkbenchError(
            f"model {name} has no revolute or prismatic joints: nothing moves "
            "(its URDF joints are all fixed)"
        )
    return chain


def _check_joint_values(values: object, what: str) -> None:
    """``values`` None or a mapping of joint names to real numbers, else an error naming it."""
    if values is None:
        return
    if not isinstance(values, Mapping) or not all(
        isinstance(k, str) and isinstance(v, numbers.Real) and not isinstance(v, bool)
        for k, v in values.items()
    ):
        raise WorkbenchError(
            f"{what} must map joint names to positions (e.g. {{'joint_1': 0.0}}); "
            f"got {values!r:.60}"
        )


def _tool(name: str) -> str | None:
    return None if _is_path(name) else _spec(name).tool_frame


def _is_path(name: str) -> bool:
    return name.endswith(".urdf") or Path(name).is_file()


def _spec(name: str) -> ModelSpec:
    if name in RETIRED:
        raise WorkbenchError(f"model {RETIRED[name]}")
    try:
        return MODELS[name]
    except KeyError:
        raise WorkbenchError(
            f"unknown model '{name}'; known models: {', '.join(sorted(MODELS))}, or a .urdf path"
        ) from None
