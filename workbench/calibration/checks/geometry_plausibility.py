"""A kinematic calibration's geometry against the nominal one, joint by joint.

Calibration corrects a robot's geometry by millimetres and tenths of a degree:
on the shipped recordings (the UR10e's camera poses, the MUKCa Panda and
Kinova sockets, offsets or twists kept) no distance below compares beyond
4.9 mm and no angle beyond 0.27 deg. A log with one joint's sign flipped, or
a known fixture distance in the wrong unit, still fits, to links moved by
decimetres or metres (0.29-13 m and 1-65 deg on the same data so degraded),
and the residuals alone do not say so. For every joint and its parent joint,
:func:`compare_geometry` compares quantities that neither the base frame, nor
joint offsets, nor a frame's slide along its own axis change:

* the distance between their frame origins (each on its joint's axis, in the
  zero-reference normal form): implausible when it changes by more than
  :data:`LENGTH_CHANGE`;
* the angle between their axes: implausible when it changes by more than
  :data:`ANGLE_CHANGE`.

Both bounds are ten times and more what the real calibrations above need;
they judge plausibility, not accuracy. So does :func:`position_misfit`: a calibrated model
whose held-out positions miss by more than :data:`LENGTH_CHANGE` (the poses of another frame
than the tool, a joint the log does not give that moved) explains the log by no geometry
a calibration could find.
"""

from __future__ import annotations

import numpy as np

from workbench.calibration.checks.fit_plausibility import Diagnosis
from workbench.chain import Chain
from workbench.lie import Array

LENGTH_CHANGE = 0.05  # m
ANGLE_CHANGE = np.deg2rad(5.0)  # rad


def joint_pairs(chain: Chain) -> dict[str, tuple[float, float]]:
    """Per joint with a parent joint (by name): the distance between the two joint frames'
    origins (m) and the angle between their axes (rad), at q = 0 in the base frame."""
    origins, axes = _lines(chain)
    out = {}
    for i, j in enumerate(chain.parents.tolist()):
        if j >= 0:
            cosine = float(np.clip(axes[i] @ axes[j], -1.0, 1.0))
            length = float(np.linalg.norm(origins[i] - origins[j]))
            out[chain.joint_names[i]] = (length, float(np.arccos(cosine)))
    return out


def compare_geometry(nominal: Chain, calibrated: Chain) -> list[Diagnosis]:
    """The joints whose distance to, or angle with, their parent joint the calibration changed
    beyond :data:`LENGTH_CHANGE` or :data:`ANGLE_CHANGE` (module docstring); [] when none."""
    before, after = joint_pairs(nominal), joint_pairs(calibrated)
    parents = {
        name: nominal.joint_names[j]
        for name, j in zip(nominal.joint_names, nominal.parents.tolist(), strict=True)
    }
    found = []
    for name, (length, angle) in before.items():
        if name not in after:
            continue
        moved, turned = after[name][0] - length, after[name][1] - angle
        if abs(moved) > LENGTH_CHANGE or abs(turned) > ANGLE_CHANGE:
            found.append(
                f"joint '{name}' moved {1000 * moved:+.1f} mm and turned "
                f"{np.rad2deg(turned):+.2f} deg relative to '{parents[name]}'"
            )
    if not found:
        return []
    evidence = (
        f"the calibrated geometry moves joints by more than {1000 * LENGTH_CHANGE:.0f} mm or "
        f"{np.rad2deg(ANGLE_CHANGE):.0f} deg from the nominal ({'; '.join(found)}): a joint "
        "column with the wrong sign or unit, a known distance in the wrong unit, or a marker on "
        "another frame?"
    )
    return [Diagnosis("unknown", evidence)]


def _lines(chain: Chain) -> tuple[Array, Array]:
    """Joint frame origins (n, 3) and unit axes (n, 3) in the base frame at q = 0."""
    frames = chain.joint_frames
    return frames[:, :3, 3], np.einsum("nij,nj->ni", frames[:, :3, :3], chain.axes)


def position_misfit(summary: dict) -> list[Diagnosis]:
    """A kinematic calibration whose held-out position RMS exceeds :data:`LENGTH_CHANGE`
    (module docstring), from its ``summary``; [] otherwise."""
    rms = summary.get("heldout", {}).get("calibrated", {}).get("position_rms_m")
    if rms is None or not rms > LENGTH_CHANGE:
        return []
    evidence = (
        f"the calibrated model misses the held-out positions by {1000 * rms:.0f} mm RMS, more "
        f"than the {1000 * LENGTH_CHANGE:.0f} mm any calibration corrects: are the poses those "
        "of the --tool frame, and does the log give every joint that moved?"
    )
    return [Diagnosis("unknown", evidence)]
