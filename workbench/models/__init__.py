"""Robot models: one pipeline from a name or a URDF to a :class:`~workbench.chain.Chain`,
and back out to URDF and MJCF.

The way in is :func:`load` (also ``workbench.load``)::

    import workbench as wb

    chain = wb.load("iiwa")  # a shipped or example-robot-data name, or a URDF path
    arm = wb.load("tiago", joints=["arm_1_joint", "arm_2_joint"], locked={"torso_lift_joint": 0.15})

It runs, in order: ``catalog`` (the name to its URDF and the joints it locks) ->
``urdf_check`` (the file checked before Pinocchio parses it) -> ``pinocchio_conversion``
(Pinocchio's model, reduced to the joints kept, as a Chain; ``placements`` without
``pinocchio.Data``) -> ``urdf`` (whole robots: locked and mimic joints, the chain
remembering where it came from). Back out: ``urdf.write_urdf`` (the whole robot again)
and ``mjcf.write_mjcf``; ``mesh`` gives link inertias from meshes, ``fivebar_design``
the spherical five-bar's geometry from its design parameters.

- ``catalog``: models by name: the shipped ones and example-robot-data's
- ``urdf_check``: a URDF checked before Pinocchio's parser sees it
- ``placements``: what ``pinocchio.Data`` costs, and placements at q = neutral without it
- ``pinocchio_conversion``: a Chain to and from a Pinocchio model, reduced models
- ``urdf``: URDF files in and out for whole robots, link inertias from meshes
- ``mjcf``: MuJoCo MJCF files of a Chain
- ``mesh``: inertial parameters of closed triangle meshes and their vertex derivatives
- ``fivebar_design``: the spherical five-bar's geometry from design parameters
"""

from __future__ import annotations

from workbench.exports import exports

_NAMES: dict[str, str | None] = {
    "catalog": None,
    "fivebar_design": None,
    "mesh": None,
    "mjcf": None,
    "pinocchio_conversion": None,
    "placements": None,
    "urdf": None,
    "urdf_check": None,
    "MODELS": "catalog",
    "load": "catalog",
    "load_pinocchio": "catalog",
    "movable_joints": "catalog",
    "joint_children": "catalog",
    "path_joints": "catalog",
    "package_dirs": "catalog",
    "urdf_path": "catalog",
    "from_pinocchio": "pinocchio_conversion",
    "to_pinocchio": "pinocchio_conversion",
    "write_urdf": "urdf",
    "reload_urdf": "urdf",
    "write_mjcf": "mjcf",
}

__all__, __getattr__ = exports(__name__, _NAMES)
