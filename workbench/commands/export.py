"""Write a model as a MuJoCo MJCF file (and, with --urdf, as URDF).

MODEL is a shipped or example-robot-data model name (iiwa, staubli_tx40,
ur5, ...), a URDF path, a closed chain (fivebar, planar_fivebar, fourbar,
delta, a closure file .toml, or a folder DIR of example-parallel-robots or its
DIR/robot.yaml, whose tool --tool names), or a calibration results folder (its
calibrated.urdf, with calibrated.drives.toml and, for a closed chain,
calibrated.toml when present).

Drive terms: the drive file beside the URDF (ROBOT.drives.toml, or the
results folder's calibrated.drives.toml) gives each joint's rotor inertia
(MuJoCo armature), viscous friction (damping) and Coulomb friction
(frictionloss), and coupled motors as fixed tendons; the URDF's
<dynamics damping friction> give damping and frictionloss where the drive
file has no friction term (the drive file wins). Joint stiffnesses ``k<j>``
(a kinematic calibration's compliance under gravity) become MuJoCo joint
``stiffness``, a spring toward ``qpos_spring`` (set it to the motor
positions). Torque offsets are not written (a bias of the measurement, no
force). Visual meshes that MuJoCo
reads (STL, OBJ, MSH) and that exist become geoms without contacts (a link
without such visual meshes takes its collision meshes); others are left
out. The output may not be one of the inputs.

A whole robot's results folder (summary.json "locked_joints") gets a <keyframe> "calibration"
holding the values the calibration locked each joint at (the calibrated joints at 0).
A results folder whose calibration exited 1 (summary.json "exit": an implausible
fit, or a calibration that did not help) is refused, naming why, unless --force.

With --urdf FILE the same model (the spanning tree, for a closed chain) is
also written as URDF, its viscous and Coulomb friction in <dynamics>.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from workbench.errors import WorkbenchError

HELP = "write a model (named, URDF, closed chain or calibration results) as MuJoCo MJCF"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="model name, URDF, closed chain or results")
    parser.add_argument("--mjcf", metavar="FILE", required=True, help="MJCF file to write")
    parser.add_argument("--urdf", metavar="FILE", help="also write the model as URDF")
    parser.add_argument("--tool", metavar="FRAME", help="tool frame (default: the last frame)")
    parser.add_argument(
        "--force", action="store_true",
        help="export a results folder whose calibration exited 1 (implausible, or did not help)",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    import os
    import sys
    import warnings
    from dataclasses import replace

    import numpy as np

    from workbench import closed_chains, models
    from workbench.closed_chains import mjcf as closed_mjcf
    from workbench.identification.drives import (
        check_model_order,
        numbered_joints,
        read_drive_file,
        sidecar_path,
        simulator_terms,
    )
    from workbench.identification.term_names import FURTHER_TERMS
    from workbench.io import check_output_file
    from workbench.models.mjcf import MESH_FORMATS, Mesh, write_mjcf
    from workbench.models.pinocchio_conversion import from_pinocchio, load_urdf_model
    from workbench.models.urdf import link_meshes, write_urdf

    outputs = {"--mjcf": Path(args.mjcf)}
    if args.urdf:
        outputs["--urdf"] = Path(args.urdf)
    for option, path in outputs.items():
        check_output_file(path, option)
    if args.urdf and _same(args.mjcf, args.urdf):
        raise WorkbenchError(f"--mjcf and --urdf name the same file {args.mjcf}")

    source = Path(args.model)
    closed, drive_file, package_dirs, calibrated, keyframe = None, None, [], None, None
    if source.is_dir() and not closed_chains.is_robot_folder(source):
        urdf = source / "calibrated.urdf"
        if not urdf.is_file():
            raise WorkbenchError(f"{source} is a folder without calibrated.urdf")
        if not args.force:
            _refuse_untrusted(source)
        keyframe = _locked_joints(source)
        drive_file = source / "calibrated.drives.toml"
        calibrated = numbered_joints(drive_file)
        if (source / "calibrated.toml").is_file():
            closed = closed_chains.read(source / "calibrated.toml")
        inputs = [urdf, drive_file, source / "calibrated.toml", source / "summary.json"]
    elif closed_chains.is_closed_chain(args.model):
        folder = closed_chains.is_robot_folder(args.model)
        closed = closed_chains.load(args.model, tool=args.tool if folder else None)
        urdf = closed.urdf_path
        inputs = [urdf, closed.source]
    else:
        closed_chains.warn_open_tree(args.model)
        urdf = models.urdf_path(args.model)
        package_dirs = models.package_dirs(args.model)
        inputs = [urdf]
    if drive_file is None:
        drive_file = sidecar_path(urdf)
    inputs.append(drive_file)
    for option, path in outputs.items():
        if any(p is not None and _same(path, Path(p)) for p in inputs):
            raise WorkbenchError(f"{option} {path} is an input of this export; choose another file")

    if closed is not None:
        chain = closed.tree
        pinocchio_model = load_urdf_model(urdf)
    else:
        named = args.model in models.MODELS
        pinocchio_model = models.load_pinocchio(args.model) if named else load_urdf_model(urdf)
        spec_tool = models.MODELS[args.model].tool_frame if named else None
        chain = from_pinocchio(pinocchio_model, tool_frame=args.tool or spec_tool)
    viscous = np.array(pinocchio_model.damping, dtype=float)  # the URDF's <dynamics>
    coulomb = np.array(pinocchio_model.friction, dtype=float)
    if len(viscous) != chain.n:  # a folder whose yaml replaced joints: <dynamics> not read
        viscous, coulomb = np.zeros(chain.n), np.zeros(chain.n)
    damping, frictionloss = viscous.copy(), coulomb.copy()  # MuJoCo's joint terms
    armature, stiffness, couplings = np.zeros(chain.n), np.zeros(chain.n), []
    if drive_file.is_file():  # per joint, or per motor of a closed chain
        driven = closed.active if closed is not None else np.arange(chain.n)
        if closed is None and calibrated is not None:  # a whole robot: the calibrated joints
            driven = np.array([_joint_index(chain, name, drive_file) for name in calibrated])
            check_model_order(calibrated, chain.joint_names, str(source / "summary.json"))
        drives, values = read_drive_file(drive_file, len(driven))
        own = simulator_terms(drives, values)
        unwritten = [t for t in drives.terms if t in FURTHER_TERMS]
        if unwritten:
            print(
                f"workbench export: warning: {drive_file}: the drive terms {', '.join(unwritten)} "
                "have no MuJoCo counterpart and are not written (MuJoCo has armature, damping "
                "and frictionloss)",
                file=sys.stderr,
            )

        def on_tree(x) -> np.ndarray:
            out = np.zeros(chain.n)
            out[driven] = x
            return out

        if "friction" in drives.terms:  # the drive file wins over <dynamics>
            numbers = range(1, len(driven) + 1)
            viscous[driven] = [values.get(f"fv{j}", 0.0) for j in numbers]
            coulomb[driven] = [values.get(f"fs{j}", 0.0) for j in numbers]
            damping[driven] = frictionloss[driven] = 0.0
        armature = on_tree(own["armature"])
        damping += on_tree(own["damping"])
        frictionloss += on_tree(own["frictionloss"])
        stiffness = on_tree(own["stiffness"])
        couplings = [replace(c, coefficients=on_tree(c.coefficients)) for c in own["couplings"]]
    terms = _nonnegative(
        chain.joint_names,
        {"armature": armature, "damping": damping, "frictionloss": frictionloss},
        couplings,
    )
    if closed is None:  # joint springs (a kinematic calibration's compliance)
        terms["stiffness"] = stiffness

    directory = Path(args.mjcf).resolve().parent
    meshes = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for source_kind in ("collision", "visual"):  # visual meshes first, else collision ones
            for frame, entries in link_meshes(urdf, source_kind, tuple(package_dirs)).items():
                readable = [
                    Mesh(os.path.relpath(file.resolve(), directory), origin, tuple(scale))
                    for file, origin, scale in entries
                    if file.suffix.lower() in MESH_FORMATS
                ]
                if readable and _has_frame(chain, frame):
                    meshes[frame] = readable
        if closed is not None:
            path = closed_mjcf.write_mjcf(closed, args.mjcf, meshes=meshes, **terms)
        else:
            path = write_mjcf(chain, args.mjcf, meshes=meshes, keyframe=keyframe, **terms)
    for warning in caught:
        print(f"workbench export: warning: {warning.message}", file=sys.stderr)
    written = [str(path)]
    if args.urdf:
        friction = {
            joint: (float(viscous[i]), float(coulomb[i]))
            for i, joint in enumerate(chain.joint_names)
        }
        written.append(str(write_urdf(chain, args.urdf, dynamics=friction)))
    print(f"wrote {' and '.join(written)} ({chain.n} joints, {sum(map(len, meshes.values()))} "
          f"meshes{', closed chain' if closed is not None else ''})")  # fmt: skip
    return 0


def _nonnegative(joints, per_joint: dict, couplings: list) -> dict:
    """The joint and tendon terms for MuJoCo, which holds none below zero: a negative
    identified value (e.g. a viscous friction that other terms compensate) is written as 0,
    with a warning naming it."""
    import sys
    from dataclasses import replace

    import numpy as np

    def clipped(value: float, what: str) -> float:
        if value < 0:
            print(
                f"workbench export: warning: {what} is {value:.6g}; MuJoCo holds no negative "
                "value, written as 0",
                file=sys.stderr,
            )
            return 0.0
        return value

    terms = {
        name: np.array(
            [clipped(float(v), f"{name} of joint '{j}'") for j, v in zip(joints, x, strict=True)]
        )
        for name, x in per_joint.items()
    }
    terms["couplings"] = [
        replace(c, **{
            name: clipped(float(getattr(c, name)), f"{name} of coupling '{c.name}'")
            for name in ("armature", "damping", "frictionloss")
        })
        for c in couplings
    ]  # fmt: skip
    return terms


def _refuse_untrusted(folder: Path) -> None:
    """Refuse a results folder whose summary.json says the calibration exited 1."""
    import json

    summary = folder / "summary.json"
    if not summary.is_file():
        return
    try:
        verdict = json.loads(summary.read_text()).get("exit") or {}
    except (ValueError, AttributeError) as exc:
        raise WorkbenchError(f"{summary}: not a calibration summary ({exc})") from None
    if verdict.get("code", 0) != 0:
        reasons = "; ".join(str(r) for r in verdict.get("reasons", [])) or "no reason recorded"
        raise WorkbenchError(
            f"{folder}: its calibration exited {verdict['code']} ({reasons}); the model is not "
            "exported (pass --force to export it anyway)"
        )


def _locked_joints(folder: Path) -> dict[str, float] | None:
    """The values a whole robot's calibration locked its other joints at (summary.json
    ``locked_joints``), for the MJCF's keyframe; None for a chain calibrated whole."""
    import json
    import math

    summary = folder / "summary.json"
    if not summary.is_file():
        return None
    locked = json.loads(summary.read_text()).get("locked_joints")
    if locked is None:
        return None
    if not isinstance(locked, dict) or not all(
        isinstance(v, int | float) and math.isfinite(v) for v in locked.values()
    ):
        raise WorkbenchError(f"{summary}: locked_joints is not a table of finite joint values")
    return {str(name): float(value) for name, value in locked.items()}


def _same(a, b) -> bool:
    """Whether two paths name the same file (existing or not)."""
    import os

    return os.path.realpath(a) == os.path.realpath(b)


def _has_frame(chain, name: str) -> bool:
    try:
        chain.parent_of(name)
    except WorkbenchError:
        return False
    return True


def _joint_index(chain, name: str, drive_file: Path) -> int:
    """The index in ``chain`` of a joint the drive file numbers."""
    if name not in chain.joint_names:
        raise WorkbenchError(f"{drive_file}: calibrated joint '{name}' is not a joint of the model")
    return chain.joint_names.index(name)
