"""Joint and frame placements of a Pinocchio model at its neutral configuration, without Data.

``pinocchio.Data`` holds tensors of size nv^3 (second-order derivative
buffers): about 1.7 GB per tensor for 600 joints, so that creating it for a
long chain takes gigabytes and minutes. What a conversion needs at q =
neutral is only the placements, composed here from the model alone:
``oMi[j] = oMi[parent(j)] jointPlacements[j]`` (every joint's motion is the
identity at its neutral configuration) and ``oMf[f] = oMi[parentJoint(f)]
placement(f)``, in memory linear in the joint and frame counts.
"""

from __future__ import annotations

import numpy as np

from workbench.lie import Array


def neutral_placements(model) -> tuple[Array, Array]:
    """Homogeneous placements in the world frame at ``pinocchio.neutral(model)``.

    Returns the joints' ``oMi`` (njoints, 4, 4), index 0 the universe, and the
    frames' ``oMf`` (nframes, 4, 4), as ``forwardKinematics`` and
    ``updateFramePlacements`` compute them.
    """
    joints = np.empty((model.njoints, 4, 4))
    joints[0] = np.eye(4)
    for j in range(1, model.njoints):
        joints[j] = joints[model.parents[j]] @ model.jointPlacements[j].homogeneous
    frames = np.empty((model.nframes, 4, 4))
    for f, frame in enumerate(model.frames):
        frames[f] = joints[frame.parentJoint] @ frame.placement.homogeneous
    return joints, frames
