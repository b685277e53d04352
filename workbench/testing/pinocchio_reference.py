"""Evaluating Pinocchio with a tool wrench given in the tool frame, (m, f) order."""

from __future__ import annotations

import numpy as np
import pinocchio as pin

import workbench as wb


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
