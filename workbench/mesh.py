"""Inertial parameters of closed triangle meshes and their vertex derivatives (seed 000 §4).

A closed, outward-oriented mesh of uniform density mu is split into the
tetrahedra (O, v1, v2, v3) spanned by the origin and each face F; with
``det(F) = v1 . (v2 x v3)`` (eq. 15), ``s = v1 + v2 + v3`` and
``S_ab = sum_i v_ia v_ib`` the integrals over one tetrahedron are

* mass ``mu det / 6`` (eq. 17, since ``s . n_F = 3 det``),
* first moment ``h = mu det s / 24`` (eq. 20 up to a divergence-free
  per-face term that cancels on a closed surface),
* second moments ``Q_ab = mu det (s_a s_b + S_ab) / 120``: the diagonal
  ``Q_aa = mu det g_a / 60`` with g of eq. 19, the off-diagonal the
  ``r(v_i) v_j`` sums of eq. 25-26,

and the rotational inertia about the origin is ``I = tr(Q) 1 - Q`` (eq. 22
and 25: ``I_xx = Q_yy + Q_zz``, ``I_xy = -Q_xy``). phi is
``[m, h_x, h_y, h_z, I_xx, I_yy, I_zz, I_xy, I_xz, I_yz]`` (DESIGN.md order,
tensor entries, about the mesh frame origin).

Every per-face quantity is ``det(F) p(F)`` with p a polynomial, so its
derivative with respect to corner i is ``p d det / d v_i + det d p / d v_i``
with ``d det / d v_i = v_j x v_k`` for (i, j, k) cyclic (eq. 16); this is
eq. 18, 21, 23-24 and 27-28 written for the tetrahedral form. Per-corner
gradients are computed for all faces at once and scatter-added to the
vertices (``np.bincount``), giving ``dphi_dvertices`` (10, V, 3).

:class:`MeshShape` is a linear shape basis over a mesh (uniform scale,
per-axis scale, displacement of named vertex groups) with d phi / d p by the
chain rule, for design variables in the optimisation layer.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
from numpy.typing import ArrayLike

from workbench.errors import WorkbenchError
from workbench.lie import Array

UNITS = {"m": 1.0, "cm": 1e-2, "mm": 1e-3, "in": 0.0254}

# phi rows 4..9 from the second moments Q (index pairs into the 3x3 tensor):
# I_xx = Q_yy + Q_zz, ..., I_xy = -Q_xy, I_xz = -Q_xz, I_yz = -Q_yz.
_DIAGONAL_FROM_Q = np.array([[0.0, 1.0, 1.0], [1.0, 0.0, 1.0], [1.0, 1.0, 0.0]])
_OFF_DIAGONAL = ((0, 1), (0, 2), (1, 2))


@dataclass(frozen=True)
class MassProperties:
    """phi (10,) of a mesh about its frame origin and, on request, d phi / d vertices (10, V, 3)."""

    phi: Array
    dphi_dvertices: Array | None = None

    @property
    def mass(self) -> float:
        return float(self.phi[0])

    @property
    def center_of_mass(self) -> Array:
        return self.phi[1:4] / self.phi[0]

    @property
    def inertia(self) -> Array:
        """Rotational inertia (3, 3) about the origin (tensor entries)."""
        from workbench.inertia import rotational_inertia

        return rotational_inertia(self.phi)


def mass_properties(
    vertices: ArrayLike,
    faces: ArrayLike,
    density: float = 1.0,
    derivatives: bool = False,
    validate: bool = True,
    fix_winding: bool = False,
) -> MassProperties:
    """phi of a closed triangle mesh of uniform ``density`` (see the module docstring).

    ``vertices`` (V, 3), ``faces`` (F, 3) vertex indices, counter-clockwise
    seen from outside. ``validate`` runs :func:`check_mesh` first (it
    raises WorkbenchError naming the failed check); ``fix_winding`` first
    repairs inconsistent or inward winding through trimesh. Inputs are
    never modified.
    """
    vertices, faces = _arrays(vertices, faces)
    if fix_winding:
        vertices, faces = repaired(vertices, faces)
    if validate:
        check_mesh(vertices, faces)
    if not np.isfinite(density) or density <= 0.0:
        raise WorkbenchError(f"mesh density must be a positive number; got {density}")
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    bc = np.cross(b, c)
    det = np.einsum("fi,fi->f", a, bc)
    s = a + b + c
    m = density * det.sum() / 6.0
    h = density * (det @ s) / 24.0
    Q = (
        density
        * (
            np.einsum("f,fa,fb->ab", det, s, s)
            + np.einsum("f,fa,fb->ab", det, a, a)
            + np.einsum("f,fa,fb->ab", det, b, b)
            + np.einsum("f,fa,fb->ab", det, c, c)
        )
        / 120.0
    )
    phi = np.concatenate([[m], h, _inertia_rows(Q)])
    if not derivatives:
        return MassProperties(phi)
    return MassProperties(phi, _vertex_gradient(vertices, faces, (a, b, c), bc, det, s, density))


def _inertia_rows(Q: Array) -> Array:
    """[I_xx, I_yy, I_zz, I_xy, I_xz, I_yz] from the second moments Q (..., 3, 3)."""
    diagonal = np.einsum("...aa->...a", Q) @ _DIAGONAL_FROM_Q
    off = np.stack([-Q[..., i, j] for i, j in _OFF_DIAGONAL], axis=-1)
    return np.concatenate([diagonal, off], axis=-1)


def _vertex_gradient(vertices, faces, corners, bc, det, s, density) -> Array:
    """d phi / d vertices (10, V, 3): per-corner gradients (eq. 16-28) scatter-added.

    For corner i with ``d det = v_j x v_k`` and ``w = s + v_i``:
    ``d(det s_a) = s_a d det + det e_a`` and
    ``d(det P_ab) = P_ab d det + det (w_b e_a + w_a e_b)`` with
    ``P = s s^T + S`` the per-face second moments over det.
    """
    a, b, c = corners
    V = len(vertices)
    P = np.einsum("fa,fb->fab", s, s)
    for v in corners:
        P += np.einsum("fa,fb->fab", v, v)
    trace = np.einsum("faa->f", P)
    out = np.zeros((10, V, 3))

    def scatter(row: int, corner: int, gradient: Array) -> None:
        for k in range(3):
            out[row, :, k] += np.bincount(faces[:, corner], gradient[:, k], minlength=V)

    for i, (vi, ddet) in enumerate(((a, bc), (b, np.cross(c, a)), (c, np.cross(a, b)))):
        det_w = det[:, None] * (s + vi)
        scatter(0, i, ddet / 6.0)
        for axis in range(3):
            g = s[:, axis, None] * ddet
            g[:, axis] += det
            scatter(1 + axis, i, g / 24.0)
            g = (trace - P[:, axis, axis])[:, None] * ddet + 2.0 * det_w  # I_aa = tr Q - Q_aa
            g[:, axis] -= 2.0 * det_w[:, axis]
            scatter(4 + axis, i, g / 120.0)
        for row, (p, r) in enumerate(_OFF_DIAGONAL):  # I_pr = -Q_pr
            g = -P[:, p, r, None] * ddet
            g[:, p] -= det_w[:, r]
            g[:, r] -= det_w[:, p]
            scatter(7 + row, i, g / 120.0)
    return density * out


# ------------------------------------------------------------------ validation
def check_mesh(vertices: ArrayLike, faces: ArrayLike) -> None:
    """Raise WorkbenchError unless the mesh is a valid closed, outward-oriented surface.

    Checks, in order, each with its own message: face indices in range,
    finite vertices, no degenerate faces (repeated indices or zero area),
    watertight (every edge shared by exactly two faces), consistent winding
    (the two faces traverse a shared edge in opposite directions), positive
    signed volume (outward normals).
    """
    vertices, faces = _arrays(vertices, faces)
    V = len(vertices)
    if len(faces) == 0:
        raise WorkbenchError("mesh has no faces")
    out_of_range = np.any((faces < 0) | (faces >= V), axis=1)
    if out_of_range.any():
        raise WorkbenchError(
            f"mesh check 'face indices' failed: {int(out_of_range.sum())} faces index vertices "
            f"outside 0..{V - 1}"
        )
    bad = ~np.isfinite(vertices).all(axis=1)
    if bad.any():
        raise WorkbenchError(
            f"mesh check 'finite vertices' failed: {int(bad.sum())} vertices are NaN or infinite "
            f"(first: vertex {int(np.argmax(bad))})"
        )
    a, b, c = (vertices[faces[:, k]] for k in range(3))
    area2 = np.linalg.norm(np.cross(b - a, c - a), axis=1)
    scale = np.ptp(vertices, axis=0).max()
    repeated = (
        (faces[:, 0] == faces[:, 1]) | (faces[:, 1] == faces[:, 2]) | (faces[:, 0] == faces[:, 2])
    )
    degenerate = repeated | (area2 <= 1e-14 * scale**2)
    if degenerate.any():
        raise WorkbenchError(
            f"mesh check 'degenerate faces' failed: {int(degenerate.sum())} faces have zero area "
            f"(first: face {int(np.argmax(degenerate))})"
        )
    _check_edges(faces, V)
    volume = np.einsum("fi,fi->", a, np.cross(b, c)) / 6.0
    if volume <= 0.0:
        raise WorkbenchError(
            f"mesh check 'outward normals' failed: signed volume {volume:.6g} <= 0 "
            f"(all {len(faces)} faces wound inward); pass fix_winding=True to repair"
        )


def _check_edges(faces: np.ndarray, V: int) -> None:
    """Watertight and consistently wound: each edge used once in each direction.

    One sort of the edges keyed by (undirected edge, direction) pairs them
    up on a valid mesh; only an invalid mesh pays for the counting that
    tells the two failures apart.
    """
    edges = np.stack([faces, np.roll(faces, -1, axis=1)], axis=-1).reshape(-1, 2)
    low, high = edges.min(axis=1), edges.max(axis=1)
    keys = np.sort((low * V + high) * 2 + (edges[:, 0] > edges[:, 1]))
    if keys.size % 2 == 0:
        first, second = keys[0::2], keys[1::2]
        paired = np.all(first >> 1 == second >> 1) and np.all(first[1:] >> 1 != second[:-1] >> 1)
        if paired and np.all(first != second):
            return
    _, undirected_count = np.unique(keys >> 1, return_counts=True)
    if np.any(undirected_count != 2):
        raise WorkbenchError(
            f"mesh check 'watertight' failed: {int(np.sum(undirected_count != 2))} edges are not "
            f"shared by exactly two faces (of {len(faces)} faces)"
        )
    _, directed_count = np.unique(keys, return_counts=True)
    raise WorkbenchError(
        f"mesh check 'consistent winding' failed: {int(np.sum(directed_count != 1))} edges are "
        f"traversed in the same direction by both of their faces (of {len(faces)} faces); "
        "pass fix_winding=True to repair"
    )


def repaired(vertices: ArrayLike, faces: ArrayLike) -> tuple[Array, np.ndarray]:
    """Copies of the mesh with consistent, outward winding (trimesh's repair)."""
    import trimesh

    vertices, faces = _arrays(vertices, faces)
    mesh = trimesh.Trimesh(vertices.copy(), faces.copy(), process=False)
    trimesh.repair.fix_normals(mesh, multibody=True)
    return np.asarray(mesh.vertices, dtype=float), np.asarray(mesh.faces, dtype=np.int64)


def _arrays(vertices: ArrayLike, faces: ArrayLike) -> tuple[Array, np.ndarray]:
    vertices = np.asarray(vertices, dtype=float)
    faces_in = np.asarray(faces)
    if vertices.ndim != 2 or vertices.shape[1] != 3:
        raise WorkbenchError(f"mesh vertices have shape {vertices.shape}; expected (V, 3)")
    if faces_in.ndim != 2 or faces_in.shape[1] != 3:
        raise WorkbenchError(f"mesh faces have shape {faces_in.shape}; expected (F, 3)")
    if faces_in.size and not np.issubdtype(faces_in.dtype, np.integer):
        raise WorkbenchError(f"mesh faces must be integer vertex indices; got {faces_in.dtype}")
    return vertices, faces_in.astype(np.int64, copy=False)


# ------------------------------------------------------------------- files
def load_mesh(
    path: str | os.PathLike, scale: float | ArrayLike = 1.0, units: str = "m"
) -> tuple[Array, np.ndarray]:
    """Vertices (V, 3) and faces (F, 3) of a mesh file (STL, OBJ, PLY, DAE, ... via trimesh).

    Coincident vertices are merged (STL stores each face's corners
    separately), so that the watertightness check sees shared edges. The
    vertices are multiplied by ``scale`` (a number or per-axis (3,), as a
    URDF ``<mesh scale>``) and by the factor of ``units`` ("m", "cm",
    "mm", "in") into metres. A scene of several meshes is concatenated.
    """
    import trimesh

    path = Path(path)
    if units not in UNITS:
        raise WorkbenchError(f"unknown mesh units '{units}'; known: {sorted(UNITS)}")
    if not path.is_file():
        raise WorkbenchError(f"mesh file not found: {path}")
    try:
        mesh = trimesh.load(str(path), force="mesh", process=True)
    except Exception as exc:  # trimesh raises many kinds on unreadable files
        raise WorkbenchError(f"{path}: cannot read mesh: {exc}") from exc
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
        raise WorkbenchError(f"{path}: no triangles found")
    factor = np.broadcast_to(np.asarray(scale, dtype=float), (3,)) * UNITS[units]
    return np.asarray(mesh.vertices, dtype=float) * factor, np.asarray(mesh.faces, dtype=np.int64)


def mesh_file_properties(
    path: str | os.PathLike,
    density: float,
    scale: float | ArrayLike = 1.0,
    units: str = "m",
    fix_winding: bool = False,
) -> MassProperties:
    """:func:`mass_properties` of a mesh file (errors name the file)."""
    vertices, faces = load_mesh(path, scale, units)
    try:
        return mass_properties(vertices, faces, density, fix_winding=fix_winding)
    except WorkbenchError as exc:
        raise WorkbenchError(f"{path}: {exc}") from None


# -------------------------------------------------------------- design shapes
@dataclass(frozen=True)
class MeshShape:
    """A mesh deformed linearly by shape parameters p: ``v(p) = v0 + sum_k p_k B_k``.

    Each mode B_k (V, 3) is a vertex displacement field: a uniform scale
    (``B = v0``, so p is the relative size change), a scale along one axis
    (``B = v0 * e_axis``) or a displacement of a named vertex group along a
    direction (``B = 1_group d``, p in metres). p = 0 is the nominal mesh.
    Since v is linear in p, ``d phi / d p_k = <d phi / d v, B_k>`` exactly.
    """

    vertices: Array
    faces: np.ndarray
    density: float = 1.0
    groups: dict[str, np.ndarray] = field(default_factory=dict)
    names: tuple[str, ...] = ()
    modes: Array = field(default_factory=lambda: np.zeros((0, 0, 3)))

    def __post_init__(self) -> None:
        vertices, faces = _arrays(self.vertices, self.faces)
        object.__setattr__(self, "vertices", vertices)
        object.__setattr__(self, "faces", faces)
        if self.modes.shape[0] == 0:
            object.__setattr__(self, "modes", np.zeros((0, len(vertices), 3)))

    def _with_mode(self, name: str, mode: Array) -> MeshShape:
        if name in self.names:
            raise WorkbenchError(f"shape parameter '{name}' is defined twice")
        return replace(self, names=(*self.names, name), modes=np.concatenate([self.modes, [mode]]))

    def uniform_scale(self, name: str) -> MeshShape:
        """Add a parameter scaling the mesh by ``1 + p`` about the mesh origin."""
        return self._with_mode(name, self.vertices.copy())

    def axis_scale(self, name: str, axis: int) -> MeshShape:
        """Add a parameter scaling coordinate ``axis`` (0, 1, 2) by ``1 + p``."""
        if axis not in (0, 1, 2):
            raise WorkbenchError(f"shape parameter '{name}': axis must be 0, 1 or 2; got {axis}")
        mode = np.zeros_like(self.vertices)
        mode[:, axis] = self.vertices[:, axis]
        return self._with_mode(name, mode)

    def displace(self, name: str, group: str, direction: ArrayLike) -> MeshShape:
        """Add a parameter moving the vertices of ``group`` by ``p * direction``."""
        if group not in self.groups:
            raise WorkbenchError(
                f"shape parameter '{name}': unknown vertex group '{group}'; "
                f"known: {sorted(self.groups)}"
            )
        mode = np.zeros_like(self.vertices)
        mode[np.asarray(self.groups[group])] = np.asarray(direction, dtype=float)
        return self._with_mode(name, mode)

    def deformed(self, p: ArrayLike) -> Array:
        """Vertices (V, 3) at shape parameters p (k,)."""
        p = self._parameters(p)
        return self.vertices + np.einsum("k,kvc->vc", p, self.modes)

    def mass_properties(self, p: ArrayLike) -> tuple[Array, Array]:
        """phi (10,) and d phi / d p (10, k) of the deformed mesh."""
        mp = mass_properties(self.deformed(p), self.faces, self.density, derivatives=True)
        return mp.phi, np.einsum("rvc,kvc->rk", mp.dphi_dvertices, self.modes)

    def _parameters(self, p: ArrayLike) -> Array:
        p = np.asarray(p, dtype=float).reshape(-1)
        if p.shape != (len(self.names),):
            raise WorkbenchError(
                f"shape parameters have {p.size} values; expected {len(self.names)} {self.names}"
            )
        if not np.isfinite(p).all():
            raise WorkbenchError(f"shape parameters are not finite: {p}")
        return p
