"""Inertial parameters of closed triangle meshes and their vertex derivatives ([Kwon] §4).

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
``[m, h_x, h_y, h_z, I_xx, I_yy, I_zz, I_xy, I_xz, I_yz]`` (docs/conventions.md order,
tensor entries, about the mesh frame origin).

Every per-face quantity is ``det(F) p(F)`` with p a polynomial, so its
derivative with respect to corner i is ``p d det / d v_i + det d p / d v_i``
with ``d det / d v_i = v_j x v_k`` for (i, j, k) cyclic (eq. 16); this is
eq. 18, 21, 23-24 and 27-28 written for the tetrahedral form. One compiled
pass over the faces (numba, :func:`_face_pass`) sums phi and adds each
face's per-corner gradients into its vertices, giving ``dphi_dvertices``
(10, V, 3). The mesh checks run in compiled code as well: index range,
finite vertices and degenerate faces in the same pass, watertightness and
winding by bucketing the directed edges by their first vertex
(:func:`_edges_paired`, linear in the faces, no global sort).

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
from workbench.inertia import rotational_inertia
from workbench.io import check_input_file
from workbench.lie import Array
from workbench.runtime import jit, leaf

UNITS = {"m": 1.0, "cm": 1e-2, "mm": 1e-3, "in": 0.0254}


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
    seen from outside. ``validate`` runs the checks of :func:`check_mesh`
    (it raises WorkbenchError naming the failed check); ``fix_winding``
    first repairs inconsistent or inward winding through trimesh. Face
    indices outside 0..V-1 are an error even with ``validate=False``.
    Inputs are never modified.
    """
    vertices, faces = _arrays(vertices, faces)
    if fix_winding:
        vertices, faces = repaired(vertices, faces)
    if not np.isfinite(density) or density <= 0.0:
        if validate:
            check_mesh(vertices, faces)
        raise WorkbenchError(f"mesh density must be a positive number; got {density}")
    if validate and len(faces) == 0:
        _check_mesh_with_messages(vertices, faces)
    finite, tolerance = _vertex_scan(vertices) if validate else (True, -1.0)
    sums = np.zeros(10)
    gradient = np.zeros((10, len(vertices) if derivatives else 0, 3))
    bad_faces, degenerate = _face_pass(vertices, faces, float(density), tolerance, sums, gradient)
    if validate:
        # in this order: the edge check may only see indices known to be in range
        if (
            not finite
            or bad_faces
            or degenerate
            or not _edges_paired(faces, len(vertices))
            or not sums[0] > 0.0
        ):
            _check_mesh_with_messages(vertices, faces)
    elif bad_faces:
        _check_face_indices(faces, len(vertices))
    phi = _phi_from_sums(sums)
    if not derivatives:
        return MassProperties(phi)
    return MassProperties(phi, gradient)


def _phi_from_sums(sums: Array) -> Array:
    """phi from ``[sum det, sum det s, sum det P_ab (xx, yy, zz, xy, xz, yz)]`` times density."""
    Q = sums[4:] / 120.0
    return np.array(
        [
            sums[0] / 6.0,
            *(sums[1:4] / 24.0),
            Q[1] + Q[2],
            Q[0] + Q[2],
            Q[0] + Q[1],
            -Q[3],
            -Q[4],
            -Q[5],
        ]
    )


@jit
def _vertex_scan(vertices):
    """(all coordinates finite, degenerate-face tolerance on |cross|^2: (1e-14 extent^2)^2)."""
    finite = True
    extent = 0.0
    for k in range(3):
        lo, hi = np.inf, -np.inf
        for v in range(vertices.shape[0]):
            x = vertices[v, k]
            if not np.isfinite(x):
                finite = False
            lo = min(lo, x)
            hi = max(hi, x)
        extent = max(extent, hi - lo)
    tol = 1e-14 * extent * extent
    return finite, tol * tol


_BLOCK = 512  # faces summed into a block total before the grand total (rounding)


@jit
def _face_pass(vertices, faces, density, tolerance, sums, gradient):
    """Moments of all faces, added into ``sums`` (times ``density``), and their vertex gradients.

    ``sums`` (10,) receives ``[sum det, sum det s, sum det P_ab]`` with
    ``P = s s^T + S`` in the order xx, yy, zz, xy, xz, yz (module
    docstring); if ``gradient`` is (10, V, 3) it receives d phi / d vertices
    (V = 0: phi only) (eq. 16-28, see :func:`_corner_gradient`). Faces with an
    index outside 0..V-1 are skipped and counted (first return value); the
    second counts degenerate faces (a repeated index or |cross| <= 1e-14
    extent^2, i.e. squared area test against ``tolerance``; < 0 skips it).
    """
    V = vertices.shape[0]
    F = faces.shape[0]
    with_gradient = gradient.shape[1] > 0
    bad = 0
    degenerate = 0
    block = np.zeros(10)
    x = np.empty((3, 3))  # corners
    d = np.empty((3, 3))  # d det / d corner
    s = np.empty(3)
    P = np.empty(6)
    for f0 in range(0, F, _BLOCK):
        block[:] = 0.0
        for f in range(f0, min(F, f0 + _BLOCK)):
            i0, i1, i2 = faces[f, 0], faces[f, 1], faces[f, 2]
            if i0 < 0 or i0 >= V or i1 < 0 or i1 >= V or i2 < 0 or i2 >= V:
                bad += 1
                continue
            for k in range(3):
                x[0, k] = vertices[i0, k]
                x[1, k] = vertices[i1, k]
                x[2, k] = vertices[i2, k]
            if tolerance >= 0.0:
                e1 = (x[1, 0] - x[0, 0], x[1, 1] - x[0, 1], x[1, 2] - x[0, 2])
                e2 = (x[2, 0] - x[0, 0], x[2, 1] - x[0, 1], x[2, 2] - x[0, 2])
                n0 = e1[1] * e2[2] - e1[2] * e2[1]
                n1 = e1[2] * e2[0] - e1[0] * e2[2]
                n2 = e1[0] * e2[1] - e1[1] * e2[0]
                if i0 == i1 or i1 == i2 or i0 == i2 or n0 * n0 + n1 * n1 + n2 * n2 <= tolerance:
                    degenerate += 1
            for c in range(3):  # d det / d x_c = x_(c+1) x x_(c+2)
                a, b = x[(c + 1) % 3], x[(c + 2) % 3]
                d[c, 0] = a[1] * b[2] - a[2] * b[1]
                d[c, 1] = a[2] * b[0] - a[0] * b[2]
                d[c, 2] = a[0] * b[1] - a[1] * b[0]
            det = x[0, 0] * d[0, 0] + x[0, 1] * d[0, 1] + x[0, 2] * d[0, 2]
            for k in range(3):
                s[k] = x[0, k] + x[1, k] + x[2, k]
            for r, (a, b) in enumerate(((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))):
                P[r] = s[a] * s[b] + x[0, a] * x[0, b] + x[1, a] * x[1, b] + x[2, a] * x[2, b]
            block[0] += det
            for k in range(3):
                block[1 + k] += det * s[k]
            for r in range(6):
                block[4 + r] += det * P[r]
            if with_gradient:
                for c, i in enumerate((i0, i1, i2)):
                    _corner_gradient(x[c], d[c], det, s, P, density, gradient[:, i, :])
        for r in range(10):
            sums[r] += density * block[r]
    return bad, degenerate


@leaf
def _corner_gradient(xc, dd, det, s, P, density, g):
    """Add one face's d phi / d corner (10, 3) into ``g``.

    With ``dd = d det / d corner`` and ``w = s + corner``:
    ``d(det s_a) = s_a dd + det e_a`` and
    ``d(det P_ab) = P_ab dd + det (w_b e_a + w_a e_b)``; phi rows from
    ``I_aa = tr Q - Q_aa`` and ``I_ab = -Q_ab``.
    """
    c6, c24, c120 = density / 6.0, density / 24.0, density / 120.0
    trace = P[0] + P[1] + P[2]
    w0 = 2.0 * c120 * det * (s[0] + xc[0])
    w1 = 2.0 * c120 * det * (s[1] + xc[1])
    w2 = 2.0 * c120 * det * (s[2] + xc[2])
    h = c24 * det
    for k in range(3):
        g[0, k] += c6 * dd[k]
        g[1, k] += c24 * s[0] * dd[k]
        g[2, k] += c24 * s[1] * dd[k]
        g[3, k] += c24 * s[2] * dd[k]
    g[1, 0] += h
    g[2, 1] += h
    g[3, 2] += h
    # I_aa: (tr P - P_aa) dd + 2 det w - 2 det w_a e_a
    t = c120 * (trace - P[0])
    g[4, 0] += t * dd[0]
    g[4, 1] += t * dd[1] + w1
    g[4, 2] += t * dd[2] + w2
    t = c120 * (trace - P[1])
    g[5, 0] += t * dd[0] + w0
    g[5, 1] += t * dd[1]
    g[5, 2] += t * dd[2] + w2
    t = c120 * (trace - P[2])
    g[6, 0] += t * dd[0] + w0
    g[6, 1] += t * dd[1] + w1
    g[6, 2] += t * dd[2]
    # I_pr = -Q_pr: -P_pr dd - det w_r e_p - det w_p e_r
    t = -c120 * P[3]  # xy
    g[7, 0] += t * dd[0] - 0.5 * w1
    g[7, 1] += t * dd[1] - 0.5 * w0
    g[7, 2] += t * dd[2]
    t = -c120 * P[4]  # xz
    g[8, 0] += t * dd[0] - 0.5 * w2
    g[8, 1] += t * dd[1]
    g[8, 2] += t * dd[2] - 0.5 * w0
    t = -c120 * P[5]  # yz
    g[9, 0] += t * dd[0]
    g[9, 1] += t * dd[1] - 0.5 * w2
    g[9, 2] += t * dd[2] - 0.5 * w1


@jit
def _edges_paired(faces, V):
    """True if every directed edge occurs once and its reverse occurs once.

    Equivalent to watertight (each edge shared by exactly two faces) and
    consistently wound (the two traverse it in opposite directions), given
    faces without repeated indices. Outgoing edges are bucketed by their
    first vertex (a counting sort, linear in the faces), each vertex's few
    targets sorted, and every reverse edge looked up by bisection in its
    bucket: no global sort of the 3F edges. Indices must be in 0..V-1.
    """
    F = faces.shape[0]
    start = np.zeros(V + 1, np.int64)
    for f in range(F):
        for k in range(3):
            start[faces[f, k] + 1] += 1
    for v in range(V):
        start[v + 1] += start[v]
    fill = start[:V].copy()
    target = np.empty(3 * F, np.int64)
    for f in range(F):
        for k in range(3):
            a = faces[f, k]
            target[fill[a]] = faces[f, (k + 1) % 3]
            fill[a] += 1
    for v in range(V):
        lo, hi = start[v], start[v + 1]
        if hi - lo > 32:
            target[lo:hi] = np.sort(target[lo:hi])
        else:  # insertion sort: a vertex has ~6 neighbours
            for i in range(lo + 1, hi):
                t = target[i]
                j = i - 1
                while j >= lo and target[j] > t:
                    target[j + 1] = target[j]
                    j -= 1
                target[j + 1] = t
        for i in range(lo + 1, hi):
            if target[i] == target[i - 1]:
                return False
    for a in range(V):
        for i in range(start[a], start[a + 1]):
            b = target[i]
            lo, hi = start[b], start[b + 1]
            while lo < hi:
                mid = (lo + hi) // 2
                if target[mid] < a:
                    lo = mid + 1
                else:
                    hi = mid
            if lo == start[b + 1] or target[lo] != a:
                return False
    return True


# ------------------------------------------------------------------ validation
def check_mesh(vertices: ArrayLike, faces: ArrayLike) -> None:
    """Raise WorkbenchError unless the mesh is a valid closed, outward-oriented surface.

    Checks, in order, each with its own message: face indices in range,
    finite vertices, no degenerate faces (repeated indices or zero area),
    watertight (every edge shared by exactly two faces), consistent winding
    (the two faces traverse a shared edge in opposite directions), positive
    signed volume (outward normals). A valid mesh passes through compiled
    code only (:func:`_face_pass`, :func:`_edges_paired`); an invalid one
    is examined again in numpy to say what is wrong.
    """
    vertices, faces = _arrays(vertices, faces)
    if len(faces):
        finite, tolerance = _vertex_scan(vertices)
        sums = np.zeros(10)
        bad, degenerate = _face_pass(vertices, faces, 1.0, tolerance, sums, np.zeros((10, 0, 3)))
        if (
            finite
            and not bad
            and not degenerate
            and _edges_paired(faces, len(vertices))
            and sums[0] > 0.0
        ):
            return
    _check_mesh_with_messages(vertices, faces)


def _check_face_indices(faces: np.ndarray, V: int) -> None:
    out_of_range = np.any((faces < 0) | (faces >= V), axis=1)
    if out_of_range.any():
        raise WorkbenchError(
            f"mesh check 'face indices' failed: {int(out_of_range.sum())} faces index vertices "
            f"outside 0..{V - 1}"
        )


def _check_mesh_with_messages(vertices: Array, faces: np.ndarray) -> None:
    """The checks of :func:`check_mesh` in numpy, raising the first that fails with its counts."""
    V = len(vertices)
    if len(faces) == 0:
        raise WorkbenchError("mesh has no faces")
    _check_face_indices(faces, V)
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
    """Watertight and consistently wound, counting the edges that are not (numpy, sorts)."""
    edges = np.stack([faces, np.roll(faces, -1, axis=1)], axis=-1).reshape(-1, 2)
    low, high = edges.min(axis=1), edges.max(axis=1)
    keys = np.sort((low * V + high) * 2 + (edges[:, 0] > edges[:, 1]))
    _, undirected_count = np.unique(keys >> 1, return_counts=True)
    if np.any(undirected_count != 2):
        raise WorkbenchError(
            f"mesh check 'watertight' failed: {int(np.sum(undirected_count != 2))} edges are not "
            f"shared by exactly two faces (of {len(faces)} faces)"
        )
    _, directed_count = np.unique(keys, return_counts=True)
    if np.any(directed_count != 1):
        raise WorkbenchError(
            f"mesh check 'consistent winding' failed: {int(np.sum(directed_count != 1))} edges "
            f"are traversed in the same direction by both of their faces (of {len(faces)} "
            "faces); pass fix_winding=True to repair"
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
    # C-contiguous float64 / int64: the layouts the compiled passes are compiled for
    return np.ascontiguousarray(vertices), np.ascontiguousarray(faces_in, dtype=np.int64)


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
    check_input_file(path, "mesh file")  # a FIFO would block the reader
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
