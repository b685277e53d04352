"""Evaluating Pinocchio: inverse dynamics with a tool wrench given in the tool frame, (m, f)
order, a simulated truth's joint torques, the tool poses of a chain, and a configuration
given by joint names in Pinocchio's order."""

from __future__ import annotations

import numpy as np
import pinocchio as pin

import workbench as wb


def configuration(model, joint_names, q: np.ndarray) -> np.ndarray:
    """Pinocchio's q (nq,) of ``model`` (one-coordinate joints) with the values ``q`` of the
    joints ``joint_names`` (the others zero)."""
    x = np.zeros(model.nq)
    for joint, value in zip(joint_names, q, strict=True):
        x[model.joints[model.getJointId(joint)].idx_q] = value
    return x


def tool_fext(model, tool_name: str, f_tool: np.ndarray) -> list:
    """Pinocchio's per-joint external forces for a wrench (m, f) acting on the tool frame."""
    frame = model.frames[model.getFrameId(tool_name)]
    fext = [pin.Force.Zero() for _ in range(model.njoints)]
    fext[frame.parentJoint] = frame.placement.act(pin.Force(wb.lie.pinocchio_vector(f_tool)))
    return fext


def rnea(model, q, dq, ddq, tool_name=None, f_tool=None) -> np.ndarray:
    """pinocchio.rnea over samples (rows), with an optional tool wrench per sample."""
    data = model.createData()
    out = []
    for s in range(len(q)):
        if f_tool is None:
            out.append(pin.rnea(model, data, q[s], dq[s], ddq[s]))
        else:
            fext = tool_fext(model, tool_name, f_tool[s])
            out.append(pin.rnea(model, data, q[s], dq[s], ddq[s], fext))
    return np.array(out)


def truth_torques(truth, log) -> np.ndarray:
    """Joint torques (m, n) of a simulated truth (``simulate_log``'s second result) at the
    log's states: Pinocchio's RNEA of its chain plus its viscous and Coulomb friction."""
    tau = rnea(wb.to_pinocchio(truth.chain), log.q, log.dq, log.ddq)
    return tau + truth.viscous * log.dq + truth.coulomb * np.sign(log.dq)


def tool_poses(chain: wb.Chain, q: np.ndarray) -> np.ndarray:
    """Tool poses (N, 4, 4) of ``chain`` at the rows of q, by Pinocchio's forward kinematics."""
    model = wb.to_pinocchio(chain)
    data = model.createData()
    frame = model.getFrameId(chain.tool_name)
    out = np.empty((len(q), 4, 4))
    for s, sample in enumerate(q):
        pin.framesForwardKinematics(model, data, sample)
        out[s] = data.oMf[frame].homogeneous
    return out
