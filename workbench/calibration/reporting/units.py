"""Units of calibration figures by joint type: revolute N m and kg m^2, prismatic N and kg.

A revolute joint's effort is a torque (N m), its rotor inertia reflected to
the joint a moment of inertia (kg m^2), its viscous friction N m s/rad; a
prismatic joint's effort is a force (N), its reflected rotor inertia a mass
(kg), its viscous friction N s/m. Reports print the unit of each joint's
figure from the joint's type (:func:`joint_units`), and one unit for pooled
figures only when every joint has it (:func:`effort_unit`).

Efforts logged in another unit (motor currents without their torque constants: a log
description's ``[torques] unit = "A"``) keep it: every effort-derived unit is then that unit
over the joint's motion (:func:`logged_units`: friction "A", viscous friction "A s/rad", rotor
inertia "A s^2/rad"; "A s/m" and "A s^2/m" for a prismatic joint).
"""

from __future__ import annotations

from collections.abc import Sequence

from workbench.chain import PRISMATIC, Chain

REVOLUTE_UNITS = {
    "position": "rad", "velocity": "rad/s", "effort": "N m", "rotor_inertia": "kg m^2",
    "viscous_friction": "N m s/rad", "coulomb_friction": "N m", "offset": "N m",
}  # fmt: skip
PRISMATIC_UNITS = {
    "position": "m", "velocity": "m/s", "effort": "N", "rotor_inertia": "kg",
    "viscous_friction": "N s/m", "coulomb_friction": "N", "offset": "N",
}  # fmt: skip


def joint_kinds(chain: Chain, labels: Sequence[str]) -> list[str]:
    """The kind (revolute, prismatic) of each joint named in ``labels`` (a chain's or a closed
    chain's tree's joints)."""
    tree = getattr(chain, "tree", chain)
    kinds = dict(zip(tree.joint_names, tree.joint_kinds, strict=True))
    return [kinds[label] for label in labels]


def logged_units(kind: str, effort: str) -> dict[str, str]:
    """The units of a joint of ``kind`` whose efforts are logged in ``effort`` (module
    docstring)."""
    position = "m" if kind == PRISMATIC else "rad"
    return {
        "position": position, "velocity": f"{position}/s", "effort": effort,
        "rotor_inertia": f"{effort} s^2/{position}", "viscous_friction": f"{effort} s/{position}",
        "coulomb_friction": effort, "offset": effort,
    }  # fmt: skip


def joint_units(
    chain: Chain, labels: Sequence[str], effort: str | None = None
) -> dict[str, dict[str, str]]:
    """Per joint in ``labels``: the unit of its position, effort, rotor inertia, friction;
    ``effort``: the unit the efforts were logged in when not N m / N (module docstring)."""
    kinds = joint_kinds(chain, labels)
    if effort is not None:
        return {label: logged_units(k, effort) for label, k in zip(labels, kinds, strict=True)}
    return {
        label: dict(PRISMATIC_UNITS if kind == PRISMATIC else REVOLUTE_UNITS)
        for label, kind in zip(labels, kinds, strict=True)
    }


def effort_unit(chain: Chain, labels: Sequence[str], effort: str | None = None) -> str:
    """The unit of efforts pooled over the joints ``labels``: one when they share it
    (``effort``, when the efforts were logged in it)."""
    if effort is not None:
        return effort
    kinds = set(joint_kinds(chain, labels))
    if kinds == {PRISMATIC}:
        return "N"
    if PRISMATIC in kinds:
        return "N m (revolute joints), N (prismatic joints)"
    return "N m"
