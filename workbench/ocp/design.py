"""Design variables of the five-bar: link shape and part placement -> link inertias.

Each variable p_j is a change from the nominal design (p = 0) and moves the
tree links' inertial parameters phi (5, 10) (base frame at home, docs/conventions.md
order) through a derivative the project computes:

* ``arc_width`` (m): the four arcs grow wider by p; their "top" and
  "bottom" vertex groups move by +-p/2 along each arc's normal
  (:class:`workbench.models.mesh.MeshShape`, mesh vertex derivatives of [Kwon]
  §4, eq. 15-28).
* ``<part>_offset`` (m), part in ``payload``, ``rotor_1``, ``rotor_4``: the
  rigid part slides by p along its axis; its inertia is the moved inertia
  of eq. 29, and ``d phi / d p = (d phi / d eta) [0; axis]`` (eq. 30-34)
  since a translation along the axis composes additively. A rotor is
  axially symmetric on its motor's fixed axis, so its offset leaves the
  motor torques unchanged (a physical identity the tests check); the
  payload is carried around by link 3 and its placement matters.

phi(p) is not linear in p (mesh inertia is cubic in the vertices, a moved
inertia quadratic in the translation); :meth:`DesignSpace.link_phi`
returns phi and its exact Jacobian, and the moving mass (sum of the link
masses) enters the optimisation as the mass budget.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from workbench import inertia
from workbench.config import Section
from workbench.errors import WorkbenchError
from workbench.lie import Array
from workbench.models.fivebar_design import TREE_LINKS, FiveBarDesign, Part
from workbench.models.mesh import MeshShape, mass_properties
from workbench.resources import shipped

PLACEABLE = {"payload": 2, "rotor_1": 0, "rotor_4": 3}  # part -> index of its axis in w1..w5
VARIABLES = ("arc_width", *(f"{part}_offset" for part in PLACEABLE))


@dataclass(frozen=True)
class DesignVariable:
    """A design variable: a change from the nominal design within [lower, upper] (m)."""

    name: str
    lower: float
    upper: float


class DesignSpace:
    """The design variables of a five-bar and the map p -> link phi with its Jacobian."""

    def __init__(
        self,
        design: FiveBarDesign,
        variables: list[DesignVariable],
        mass_budget: float = np.inf,
    ):
        names = [v.name for v in variables]
        unknown = sorted(set(names) - set(VARIABLES))
        if unknown or len(set(names)) != len(names):
            raise WorkbenchError(
                f"design variables {names}: unknown or repeated {unknown}; known: {list(VARIABLES)}"
            )
        for v in variables:
            if not v.lower <= 0.0 <= v.upper:
                raise WorkbenchError(
                    f"design variable '{v.name}': bounds [{v.lower}, {v.upper}] must contain 0 "
                    "(the nominal design)"
                )
        for v in variables:
            if v.name == "arc_width" and design.width + v.lower <= 0.0:
                raise WorkbenchError(
                    f"design variable 'arc_width': lower bound {v.lower} m would make the arcs "
                    f"{design.width + v.lower:.4g} m wide (nominal {design.width} m); the "
                    f"physical range is above {-design.width} m"
                )
        self.design = design
        self.variables = list(variables)
        self.mass_budget = float(mass_budget)
        self._parts = design.parts()
        self._axes = design.axes()
        self._nominal = np.array([self._part_phi(part) for part in self._parts])

    @classmethod
    def from_section(cls, section: Section, model: str, base: Path) -> DesignSpace:
        """From a problem file's ``[design]`` table: ``file`` (the design file, relative
        to the problem file; default the shipped ``models/fivebar/design.toml``),
        ``mass_budget`` (kg) and ``[design.variables]`` mapping names to
        [lower, upper] bounds (m)."""

        if model != "fivebar":
            raise WorkbenchError(
                f"{section.where('variables')}: co-design works on the spherical five-bar "
                f"(model = \"fivebar\"), not on '{model}'"
            )
        file = section.string("file", None)
        path = shipped("models") / "fivebar" / "design.toml" if file is None else base / file
        budget = section.number("mass_budget", np.inf, positive=True)
        table = section.section("variables")
        variables = []
        for name in list(table.table):
            bounds = table.array(name, shape=(2,))
            variables.append(DesignVariable(name, float(bounds[0]), float(bounds[1])))
        table.done()
        section.done()
        if not variables:
            raise WorkbenchError(
                f"{section.where('variables')}: a [design] table needs at least one design "
                f"variable (known: {', '.join(VARIABLES)})"
            )
        design = FiveBarDesign.from_toml(path)
        try:
            return cls(design, variables, budget)
        except WorkbenchError as exc:
            raise WorkbenchError(f"{section.source}: [design] {exc}") from None

    @property
    def names(self) -> list[str]:
        return [v.name for v in self.variables]

    @property
    def size(self) -> int:
        return len(self.variables)

    def bounds(self) -> tuple[Array, Array]:
        return (
            np.array([v.lower for v in self.variables]),
            np.array([v.upper for v in self.variables]),
        )

    def nominal_values(self) -> Array:
        """The designed quantities at p = 0 (m): the arcs' width, a part's distance from the
        centre along its axis; the design at p is ``nominal_values() + p``."""
        values = []
        for name in self.names:
            if name == "arc_width":
                values.append(self.design.width)
            else:
                part = next(x for x in self._parts if f"{x.name}_offset" == name)
                values.append(float(part.vertices.mean(axis=0) @ self._axes[PLACEABLE[part.name]]))
        return np.array(values)

    def _part_phi(self, part: Part) -> Array:
        return mass_properties(part.vertices, part.faces, part.density).phi

    def link_phi(self, p: ArrayLike) -> tuple[Array, Array]:
        """phi (5, 10) of the tree links at design p (m,) and d phi / d p (5, 10, m)."""
        p = np.asarray(p, dtype=float).reshape(-1)
        if p.shape != (self.size,) or not np.all(np.isfinite(p)):
            raise WorkbenchError(f"design p has shape {p.shape}; expected ({self.size},) finite")
        value = dict(zip(self.names, p, strict=True))
        column = {name: j for j, name in enumerate(self.names)}
        phi = np.zeros((len(TREE_LINKS), 10))
        dphi = np.zeros((len(TREE_LINKS), 10, self.size))
        for part, nominal in zip(self._parts, self._nominal, strict=True):
            if part.kind == "arc" and "arc_width" in value:
                shape = MeshShape(part.vertices, part.faces, part.density, part.groups)
                shape = shape.displace("top", "top", part.normal / 2)
                shape = shape.displace("bottom", "bottom", -part.normal / 2)
                w = value["arc_width"]
                part_phi, d = shape.mass_properties([w, w])
                dphi[part.link, :, column["arc_width"]] += d.sum(axis=1)
            elif f"{part.name}_offset" in value:
                axis = self._axes[PLACEABLE[part.name]]
                T = np.eye(4)
                T[:3, 3] = value[f"{part.name}_offset"] * axis
                part_phi = inertia.moved_phi(nominal, T)
                along = np.concatenate([np.zeros(3), axis])
                dphi[part.link, :, column[f"{part.name}_offset"]] += (
                    inertia.dphi_deta(part_phi) @ along
                )
            else:
                part_phi = nominal
            phi[part.link] += part_phi
        return phi, dphi

    def moving_mass(self, p: ArrayLike) -> float:
        """Total mass (kg) of the moving links at design p."""
        return float(self.link_phi(p)[0][:, 0].sum())

    def summary(self, p: Array) -> dict:
        """Designed quantities before (nominal) and after, their bounds and the moving mass."""
        lower, upper = self.bounds()
        nominal = self.nominal_values()
        phi = self.link_phi(p)[0]
        variables = {
            name: {
                "before": float(v),
                "after": float(v + value),
                "lower": float(v + lo),
                "upper": float(v + up),
            }
            for name, v, value, lo, up in zip(self.names, nominal, p, lower, upper, strict=True)
        }
        return {
            "variables": variables,
            "unit": "m (arc_width: the arcs' width; <part>_offset: its distance from the centre)",
            "moving_mass_kg": {
                "before": self.moving_mass(np.zeros(self.size)),
                "after": float(phi[:, 0].sum()),
            },
            "mass_budget_kg": self.mass_budget,
            "link_phi": phi.tolist(),
        }
