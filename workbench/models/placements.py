"""What ``pinocchio.Data`` costs, and the placements at q = neutral without it.

``pinocchio.Data`` holds tensors of size nv^3 (second-order derivative
buffers): 64 nv^3 bytes in all, measured (1.7 GB for 300 joints, 14 GB for
600). :func:`create_data` refuses a model whose Data would exceed the
memory budget (:func:`workbench.config.check_memory`) before Pinocchio
allocates it. What a conversion needs at q = neutral is only the
placements, composed by :func:`neutral_placements` from the model alone:
``oMi[j] = oMi[parent(j)] jointPlacements[j]`` (every joint's motion is the
identity at its neutral configuration) and ``oMf[f] = oMi[parentJoint(f)]
placement(f)``, in memory linear in the joint and frame counts.
"""

from __future__ import annotations

import numpy as np

from workbench.config import check_memory
from workbench.lie import Array

DATA_BYTES = 64  # bytes of pinocchio.Data per nv^3


def create_data(model, what: str = "the model"):
    """``model.createData()`` once its memory (``DATA_BYTES nv^3``) is known to fit."""
    check_memory(
        f"{what} ({model.nv} joint velocities)", DATA_BYTES * float(model.nv) ** 3,
        "Pinocchio's Data holds nv^3 derivative tensors",
    )  # fmt: skip
    return model.createData()


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
