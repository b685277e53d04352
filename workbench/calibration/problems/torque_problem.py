"""What the torque calibration problems share: drives, figures from residual sums, units.

The dynamic (in memory and accumulated) and twist problems predict joint
efforts; their held-out figures come from per-joint sums of squares of a
block's residuals (:class:`workbench.calibration.problems.problem.Residuals`), so
that figures of a log in memory and of a large log's accumulated factors are
one computation: the pooled relative RMS ``sqrt(sum e^2 / sum tau^2)``, per
joint the relative RMS ``|e_j| / |tau_j|`` and the RMS in the joint's effort
unit (N m revolute, N prismatic, or the unit the log declares its efforts in:
``[torques] unit``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from workbench.calibration.problems.problem import Options, Residuals, relative_rms_of
from workbench.calibration.reporting.units import effort_unit, joint_units
from workbench.chain import Chain
from workbench.identification.drives import DEFAULT_TERMS, Drives
from workbench.lie import Array
from workbench.recordings.chunked_logs import ChunkedLog
from workbench.recordings.log import Log


def log_drives(log: Log | ChunkedLog, terms: tuple[str, ...] | None = None) -> Drives:
    """The drives of ``log`` with ``terms`` (default: the log description's, else friction)."""
    terms = tuple(terms if terms is not None else log.defaults.terms or DEFAULT_TERMS)
    return Drives(len(log.joint_names), terms, log.transmission, log.min_speed)


def nominal_drive_values(drives: Drives, options: Options) -> Array:
    """The drive file's values of the drive parameters (zero where it has none)."""
    given = options.nominal_drives or {}
    return np.array([given.get(name, 0.0) for name in drives.names])


def _ratio(error2: Array, measured2: Array) -> Array:
    """sqrt(error2 / measured2) per joint (inf where nothing was measured)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(measured2 > 0, np.sqrt(error2 / measured2), np.inf)


class TorqueProblem:
    """What the torque kinds share: one candidate, channels and RMS in each joint's unit."""

    candidates: tuple[None, ...] = (None,)
    nominal_candidate = None
    nominal_model = (
        "the model as loaded, with the drive file's drive terms (zero where it has none): "
        "nothing fitted"
    )
    rms_convention = "RMS over the joints' samples, each in its joint's effort unit"

    joint_chain: Chain  # the chain whose joints ``labels`` name
    labels: tuple[str, ...]
    logged_unit: str | None = None  # the log's [torques] unit, when not N m / N

    @property
    def unit(self) -> str:
        return effort_unit(self.joint_chain, self.labels, self.logged_unit)

    def units(self) -> dict[str, Any]:
        joints = joint_units(self.joint_chain, self.labels, self.logged_unit)
        return {"effort": self.unit, "joints": joints}

    def channels(self, errors: Array) -> tuple[Array, tuple[str, ...], str]:
        units = self.units()
        labels = tuple(f"{j} [{units['joints'][j]['effort']}]" for j in self.labels)
        return errors, labels, units["effort"]

    def figures(self, residuals: Sequence[Residuals]) -> dict[str, Any]:
        """Pooled relative RMS, then per joint: relative RMS |e_j| / |tau_j| and RMS (its unit)."""
        error2 = sum(r.error2 for r in residuals)
        measured2 = sum(r.measured2 for r in residuals)
        counts = sum(r.counts for r in residuals)
        return {
            "relative_rms": relative_rms_of(residuals),
            "relative_rms_per_joint": dict(
                zip(self.labels, _ratio(error2, measured2).tolist(), strict=True)
            ),
            "rms": dict(
                zip(self.labels, np.sqrt(error2 / np.maximum(counts, 1)).tolist(), strict=True)
            ),
        }

    def rms(self, residuals: Sequence[Residuals]) -> float:
        """RMS over every joint's samples of the blocks."""
        error2 = sum(float(r.error2.sum()) for r in residuals)
        return float(np.sqrt(error2 / sum(int(r.counts.sum()) for r in residuals)))

    def loss(self, errors: Array) -> Array:
        """Per sample, the squared torque errors summed over the joints (the pooled score's)."""
        return np.nansum(np.square(errors), axis=1)


def prismatic_note(units: dict[str, Any]) -> str:
    """A sentence giving the units of the prismatic joints' drive terms ('' when none), or of
    every joint's when the efforts were logged in another unit than N m / N."""
    joints = units["joints"]
    if any(u["effort"] not in ("N m", "N") for u in joints.values()):
        e = units["effort"]
        return (
            f" The efforts were logged in {e} ([torques] unit), not N m: read N m above as {e} "
            f"(fv in {e} s/rad, Ia in {e} s^2/rad; per m for a prismatic joint)."
        )
    prismatic = [j for j, u in joints.items() if u["effort"] == "N"]
    if not prismatic:
        return ""
    return (
        f" Prismatic joint(s) {', '.join(prismatic)}: fv in N s/m, fs and off in N, Ia in kg "
        "(the units above are those of revolute joints)."
    )


def urdf_dynamics(drives: Drives, values: Array, joints) -> dict[str, tuple[float, float]]:
    """URDF <dynamics> of each joint: (damping = fv, friction = fs) when identified.

    URDF friction cannot be negative (Pinocchio refuses it): a negative
    estimate (noise around zero) is written as 0; the drive file keeps it.
    """
    lookup = dict(zip(drives.names, values, strict=True))
    out = {}
    for j, joint in enumerate(joints):
        if f"fv{j + 1}" in lookup:
            out[joint] = (
                max(float(lookup[f"fv{j + 1}"]), 0.0),
                max(float(lookup[f"fs{j + 1}"]), 0.0),
            )
    return out
