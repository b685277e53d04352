"""A calibrated model against its nominal one, link by link and in the joint-space mass matrix.

A fit that predicts the torques well can still hold links no robot has: a
mass the log never sees (on its joint's axis, or regrouped with the links
after it) taken to thousands of kilograms. :func:`compare_links` compares
each link of the calibrated chain with the nominal one:

* its mass, as the ratio fitted / nominal: implausible outside
  [1 / :data:`MASS_FACTOR`, :data:`MASS_FACTOR`];
* its largest principal moment of inertia about the centre of mass, as the
  ratio fitted / nominal: implausible outside [1 / :data:`INERTIA_FACTOR`,
  :data:`INERTIA_FACTOR`];
* its centre of mass, as the distance between the fitted and the nominal one
  (reported, not judged: a link's size is not known here);

and the joint-space mass matrix ``M(q)`` of both models (Pinocchio's CRBA
through :func:`workbench.dynamics.matrices.mass_matrix`) at the
given configurations, as the median ratio of its diagonal (each joint's
apparent inertia), reported per joint. Links whose nominal mass is below
1e-3 of the robot's (virtual or massless links) have no mass ratio; links
whose nominal largest moment is below 1e-6 of that scale (point masses)
have no inertia ratio. The judgement compares both values raised to
:data:`FLOOR` of the robot's largest nominal link mass (for moments: of the
largest moment of a nominal link about its joint origin, which point masses
have too): a
wrist link of 1e-4 kg m^2 fitted at 2e-3 kg m^2 is noise on a robot whose arm
links have 0.1 kg m^2, not an implausible model.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workbench import inertia
from workbench.chain import Chain
from workbench.dynamics.matrices import mass_matrix
from workbench.lie import Array

MASS_FACTOR = 3.0
"""A fitted link mass more than this many times its nominal one, or less than its inverse,
is implausible (identification errors of a link the log excites are tens of percent; a unit
mistake is a factor of 57 to 1000)."""

INERTIA_FACTOR = 10.0
"""The same bound for a link's largest principal moment of inertia about its centre of mass
(less well determined than a mass: it goes with the square of a size)."""


FLOOR = 0.01
"""Masses and moments below this fraction of the robot's largest nominal link's are judged as
if they were that large (module docstring)."""


def _outside(fitted: float, nominal: float, floor: float, factor: float) -> bool:
    """Whether fitted / nominal, both raised to ``floor``, lies outside [1 / factor, factor]."""
    ratio = max(fitted, floor) / max(nominal, floor)
    return not 1 / factor <= ratio <= factor


def compare_links(nominal: Chain, fitted: Chain, q: Array | None = None) -> dict[str, Any]:
    """The comparison of the module docstring: ``{"links": {link: figures}, "mass_matrix_
    diagonal_ratio": {joint: median ratio} (with ``q`` (N, n)), "implausible": [messages]}``."""
    phi0 = inertia.phi_from_matrix(nominal.local_inertias())
    m0, c0, I0 = inertia.com_from_phi(phi0)
    m1, c1, I1 = inertia.com_from_phi(inertia.phi_from_matrix(fitted.local_inertias()))
    moment0 = np.linalg.eigvalsh(I0)[:, -1]
    moment1 = np.linalg.eigvalsh(I1)[:, -1]
    # the robot's inertia scale: the largest moment of a nominal link about its joint origin
    reach = float(np.abs(np.linalg.eigvalsh(inertia.rotational_inertia(phi0))).max(initial=0.0))
    weighed = m0 > 1e-3 * m0.sum()
    shaped = moment0 > 1e-6 * reach
    links, implausible = {}, []
    for i, link in enumerate(fitted.link_names):
        mass_ratio = m1[i] / m0[i] if weighed[i] else None
        inertia_ratio = moment1[i] / moment0[i] if shaped[i] else None
        links[link] = {
            "mass": float(m1[i]),
            "nominal_mass": float(m0[i]),
            "mass_ratio": mass_ratio,
            "com_shift": float(np.linalg.norm(c1[i] - c0[i])) if m1[i] > 0 else None,
            "largest_moment": float(moment1[i]),
            "nominal_largest_moment": float(moment0[i]),
            "moment_ratio": inertia_ratio,
        }
        if mass_ratio is not None and _outside(m1[i], m0[i], FLOOR * m0.max(), MASS_FACTOR):
            implausible.append(
                f"link '{link}' has mass {m1[i]:.4g} kg, {mass_ratio:.3g} times its nominal "
                f"{m0[i]:.4g} kg (plausible: 1/{MASS_FACTOR:g} to {MASS_FACTOR:g} times)"
            )
        floor = FLOOR * reach
        if inertia_ratio is not None and _outside(moment1[i], moment0[i], floor, INERTIA_FACTOR):
            implausible.append(
                f"link '{link}' has a largest moment of inertia of {moment1[i]:.4g} kg m^2, "
                f"{inertia_ratio:.3g} times its nominal {moment0[i]:.4g} kg m^2 (plausible: "
                f"1/{INERTIA_FACTOR:g} to {INERTIA_FACTOR:g} times)"
            )
    out: dict[str, Any] = {
        "mass_factor": MASS_FACTOR,
        "inertia_factor": INERTIA_FACTOR,
        "links": links,
    }
    if q is not None and len(q):
        diagonal0 = np.diagonal(mass_matrix(nominal, q), axis1=1, axis2=2)
        diagonal1 = np.diagonal(mass_matrix(fitted, q), axis1=1, axis2=2)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.median(diagonal1 / diagonal0, axis=0)
        out["mass_matrix_diagonal_ratio"] = {
            joint: float(r) if np.isfinite(r) else None
            for joint, r in zip(fitted.joint_names, ratio, strict=True)
        }
    out["implausible"] = implausible
    return out
