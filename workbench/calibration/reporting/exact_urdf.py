"""The calibrated URDF is exactly the calibrated model, or it is not written.

A URDF stores per link a mass, a centre of mass and an inertia about it:
link inertias that no body has (a negative mass, whose centre of mass the
round trip loses, a rotational inertia that is not positive semi-definite)
cannot be written faithfully, and any model is checked by reading its URDF
back with Pinocchio.
"""

from __future__ import annotations

import math
import tempfile
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from workbench.chain import Chain, impossible_inertias
from workbench.errors import WorkbenchError, WorkbenchWarning
from workbench.urdf import reload_urdf, urdf_string

URDF_TOLERANCE = 1e-9  # largest difference between the model and its URDF read back


def calibrated_urdf(
    chain: Chain, dynamics: dict[str, tuple[float, float]]
) -> tuple[str | None, dict[str, Any]]:
    """The URDF text of ``chain`` if it is exactly ``chain``, else None and a warning.

    Refused: link inertias that no body has (a negative mass, ...: URDF
    stores a mass, a centre of mass and an inertia about it, and such links
    do not survive the trip), every such link named; and any model whose URDF,
    read back by Pinocchio, differs from it by more than
    :data:`URDF_TOLERANCE` in twists, tool frame or inertial parameters. The
    parameters stay in ``parameters.csv`` and ``summary.json``. Returns the
    text (or None) and the check for ``summary.json``.
    """
    impossible = impossible_inertias(chain)
    if impossible:
        reason = (
            f"the calibrated model has {len(impossible)} link(s) with physically impossible "
            f"inertias ({'; '.join(impossible)}); no URDF can hold them, so calibrated.urdf "
            "is not written (the identified parameters are in parameters.csv and "
            "summary.json; calibrate with --physical for a physically consistent model)"
        )
        warnings.warn(reason, WorkbenchWarning, stacklevel=3)
        return None, {"written": False, "reason": reason, "impossible_links": impossible}
    try:
        text = urdf_string(chain, dynamics=dynamics)
    except WorkbenchError as exc:  # a whole robot whose own links cannot take the change
        reason = f"{exc}; calibrated.urdf is not written (the parameters are in parameters.csv)"
        warnings.warn(reason, WorkbenchWarning, stacklevel=3)
        return None, {"written": False, "reason": reason}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "calibrated.urdf"
        path.write_text(text)
        reloaded = reload_urdf(chain, path)
    difference = {"joint_names": 0.0 if reloaded.joint_names == chain.joint_names else math.inf}
    if math.isfinite(difference["joint_names"]):
        difference |= {
            "twists": float(np.abs(reloaded.twists - chain.twists).max()),
            "tool_frame": float(np.abs(reloaded.tool_frame - chain.tool_frame).max()),
            "phi": float(np.abs(reloaded.phi - chain.phi).max()),
        }
    worst = max(difference.values())
    check = {"written": worst <= URDF_TOLERANCE, "reload_max_difference": difference,
             "tolerance": URDF_TOLERANCE}  # fmt: skip
    if worst <= URDF_TOLERANCE:
        return text, check
    reason = (
        f"calibrated.urdf read back differs from the calibrated model by {worst:.3g} (more than "
        f"{URDF_TOLERANCE:g}: {difference}); it is not written"
    )
    warnings.warn(reason, WorkbenchWarning, stacklevel=3)
    return None, check | {"reason": reason}
