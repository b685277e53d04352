"""Mesh inertia (seed 000 §4) against trimesh, closed forms, finite differences and CasADi AD."""

from __future__ import annotations

import casadi as ca
import numpy as np
import pinocchio as pin
import pytest
import trimesh

import workbench as wb
from workbench import inertia, lie
from workbench.testing import central_differences

DENSITY = 2700.0


def _trimesh_phi(mesh: trimesh.Trimesh, density: float) -> np.ndarray:
    """phi about the origin from trimesh: mass, mass * COM and the inertia moved to the origin."""
    props = trimesh.triangles.mass_properties(mesh.triangles, density=density)
    m, c = props["mass"], props["center_mass"]
    I_origin = trimesh.triangles.mass_properties(
        mesh.triangles, density=density, center_mass=np.zeros(3)
    )["inertia"]
    return np.concatenate(
        [[m], m * c, np.diag(I_origin), [I_origin[0, 1], I_origin[0, 2], I_origin[1, 2]]]
    )


def _bumpy_sphere() -> trimesh.Trimesh:
    """A non-convex closed mesh: an icosphere with random radial dents."""
    mesh = trimesh.creation.icosphere(subdivisions=3)
    radii = np.random.default_rng(3).uniform(0.6, 1.2, len(mesh.vertices))
    return trimesh.Trimesh(mesh.vertices * radii[:, None], mesh.faces, process=False)


def _moved(mesh: trimesh.Trimesh) -> trimesh.Trimesh:
    T = lie.exp_se3(np.array([0.4, -1.1, 0.7, 0.3, -0.5, 0.8]))
    out = mesh.copy()
    out.apply_transform(T)
    return out


SHAPES = {
    "box": lambda: trimesh.creation.box(extents=[0.3, 0.1, 0.05]),
    "cylinder": lambda: trimesh.creation.cylinder(radius=0.04, height=0.2, sections=40),
    "icosphere": lambda: trimesh.creation.icosphere(subdivisions=3, radius=0.1),
    "torus": lambda: trimesh.creation.torus(major_radius=0.1, minor_radius=0.02),
    "non_convex": _bumpy_sphere,
    "rotated_off_centre": lambda: _moved(trimesh.creation.box(extents=[0.3, 0.1, 0.05])),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_phi_matches_trimesh(shape):
    mesh = SHAPES[shape]()
    phi = wb.mesh.mass_properties(mesh.vertices, mesh.faces, DENSITY).phi
    expected = _trimesh_phi(mesh, DENSITY)
    scale = np.abs(expected).max(initial=0.0)
    assert np.abs(phi - expected).max() <= 1e-10 * scale


def test_box_and_cylinder_closed_forms():
    a, b, c, mu = 0.3, 0.1, 0.05, DENSITY
    box = trimesh.creation.box(extents=[a, b, c])
    m = mu * a * b * c
    phi = wb.mesh.mass_properties(box.vertices, box.faces, mu).phi
    expected = [m, 0, 0, 0, m * (b**2 + c**2) / 12, m * (a**2 + c**2) / 12, m * (a**2 + b**2) / 12]
    np.testing.assert_allclose(phi[:7], expected, rtol=1e-12, atol=1e-15 * m)
    np.testing.assert_allclose(phi[7:], 0.0, atol=1e-15 * m)

    # a prism with many sides converges to the solid cylinder as (sides)^-2
    r, length, sides = 0.04, 0.2, 2048
    cylinder = trimesh.creation.cylinder(radius=r, height=length, sections=sides)
    phi = wb.mesh.mass_properties(cylinder.vertices, cylinder.faces, mu).phi
    m = mu * np.pi * r**2 * length
    expected = [m, m * (3 * r**2 + length**2) / 12, m * (3 * r**2 + length**2) / 12, m * r**2 / 2]
    np.testing.assert_allclose(phi[[0, 4, 5, 6]], expected, rtol=1e-5)


def _random_mesh(seed: int) -> tuple[np.ndarray, np.ndarray]:
    mesh = trimesh.creation.icosphere(subdivisions=1)
    rng = np.random.default_rng(seed)
    vertices = mesh.vertices * rng.uniform(0.7, 1.3, (len(mesh.vertices), 1))
    return vertices + rng.normal(size=3), np.asarray(mesh.faces)


@pytest.mark.parametrize("seed", [0, 1])
def test_vertex_derivatives_match_finite_differences(seed):
    vertices, faces = _random_mesh(seed)
    mp = wb.mesh.mass_properties(vertices, faces, DENSITY, derivatives=True)
    assert mp.dphi_dvertices.shape == (10, len(vertices), 3)
    h = 1e-6
    fd = central_differences(
        lambda V: wb.mesh.mass_properties(V, faces, DENSITY).phi, vertices, h
    )  # (10, V, 3)
    scale = np.abs(fd).max(axis=(1, 2), keepdims=True)
    assert np.abs(mp.dphi_dvertices - fd).max(axis=(1, 2)).max() <= 1e-6 * scale.max()
    assert np.all(np.abs(mp.dphi_dvertices - fd) <= 1e-6 * scale)


def _casadi_phi(faces: np.ndarray, n_vertices: int):
    """phi of seed 000 eq. 17, 20, 22, 25 as printed (n_F form), in CasADi SX."""
    X = ca.SX.sym("X", n_vertices, 3)
    mu = DENSITY
    m, h, I_diag, I_off = 0, ca.SX.zeros(3), ca.SX.zeros(3), ca.SX.zeros(3)
    ones = np.ones((3, 3)) - np.eye(3)
    for f in faces:
        v = [X[int(i), :].T for i in f]
        n = ca.cross(v[1] - v[0], v[2] - v[0])
        det = ca.dot(v[0], ca.cross(v[1], v[2]))
        g = sum(v[i] * v[j] for i in range(3) for j in range(i, 3))
        r = sum(_r(v[i]) @ v[j] for i in range(3) for j in range(i, 3))
        m += mu / 18 * ca.dot(v[0] + v[1] + v[2], n)
        h += mu / 24 * g * n
        I_diag += mu / 60 * det * (ones @ g)
        I_off += -mu / 120 * det * r
    phi = ca.vertcat(m, h, I_diag, I_off)
    x = ca.vec(X.T)  # vertex-major, like dphi_dvertices.reshape(10, -1)
    return ca.Function("phi", [x], [phi, ca.jacobian(phi, x)])


def _r(v):
    x, y, z = v[0], v[1], v[2]
    return ca.vertcat(ca.horzcat(y, x, 0), ca.horzcat(z, 0, x), ca.horzcat(0, z, y))


@pytest.mark.parametrize("seed", [0, 1])
def test_vertex_derivatives_match_casadi_ad(seed):
    vertices, faces = _random_mesh(seed)
    mp = wb.mesh.mass_properties(vertices, faces, DENSITY, derivatives=True)
    phi_ad, J_ad = (np.array(x) for x in _casadi_phi(faces, len(vertices))(vertices.ravel()))
    scale = np.abs(mp.phi).max()
    assert np.abs(mp.phi - phi_ad.ravel()).max() <= 1e-12 * scale
    J = mp.dphi_dvertices.reshape(10, -1)
    assert np.abs(J - J_ad).max() <= 1e-10 * np.abs(J_ad).max()


def test_translation_obeys_parallel_axis_theorem():
    vertices, faces = _random_mesh(4)
    phi0 = wb.mesh.mass_properties(vertices, faces, DENSITY).phi
    d = np.array([0.3, -0.7, 1.1])
    phi = wb.mesh.mass_properties(vertices + d, faces, DENSITY).phi
    m, c, I_c = inertia.com_from_phi(phi0)
    # Steiner's rule written out: I_o = I_c + m (|c + d|^2 1 - (c + d)(c + d)^T)
    p = c + d
    I_expected = I_c + m * (p @ p * np.eye(3) - np.outer(p, p))
    np.testing.assert_allclose(phi[0], m, rtol=1e-13)
    np.testing.assert_allclose(phi[1:4], m * p, rtol=1e-12)
    np.testing.assert_allclose(inertia.rotational_inertia(phi), I_expected, rtol=1e-11)


def test_rotation_gives_R_I_RT():
    vertices, faces = _random_mesh(5)
    R = pin.rpy.rpyToMatrix(0.3, -1.2, 2.0)
    phi0 = wb.mesh.mass_properties(vertices, faces, DENSITY).phi
    phi = wb.mesh.mass_properties(vertices @ R.T, faces, DENSITY).phi
    np.testing.assert_allclose(phi[1:4], R @ phi0[1:4], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(
        inertia.rotational_inertia(phi),
        R @ inertia.rotational_inertia(phi0) @ R.T,
        atol=1e-12 * np.abs(phi0[4:]).max(),
    )


def test_two_disjoint_parts_sum():
    a_v, a_f = _random_mesh(6)
    b_v, b_f = _random_mesh(7)
    b_v = b_v + np.array([5.0, 0.0, 0.0])
    both = wb.mesh.mass_properties(np.vstack([a_v, b_v]), np.vstack([a_f, b_f + len(a_v)]), 3.0)
    parts = sum(wb.mesh.mass_properties(v, f, 3.0).phi for v, f in ((a_v, a_f), (b_v, b_f)))
    np.testing.assert_allclose(both.phi, parts, rtol=1e-13)


# ------------------------------------------------------------------ bad meshes
def _box() -> tuple[np.ndarray, np.ndarray]:
    box = trimesh.creation.box()
    return np.array(box.vertices), np.array(box.faces)


def _open(v, f):
    return v, f[:-1]


def _flip_one(v, f):
    f = f.copy()
    f[0] = f[0, ::-1]
    return v, f


def _inward(v, f):
    return v, f[:, ::-1]


def _degenerate(v, f):
    f = f.copy()
    f[0, 1] = f[0, 0]
    return v, f


def _nan(v, f):
    v = v.copy()
    v[2, 1] = np.nan
    return v, f


def _out_of_range(v, f):
    f = f.copy()
    f[3, 2] = len(v) + 4
    return v, f


@pytest.mark.parametrize(
    "corrupt, check",
    [
        (_open, "watertight"),
        (_flip_one, "consistent winding"),
        (_inward, "outward normals"),
        (_degenerate, "degenerate faces"),
        (_nan, "finite vertices"),
        (_out_of_range, "face indices"),
    ],
)
def test_bad_mesh_names_the_failed_check(corrupt, check):
    vertices, faces = corrupt(*_box())
    before = vertices.copy(), faces.copy()
    with pytest.raises(wb.WorkbenchError, match=f"mesh check '{check}' failed: "):
        wb.mesh.mass_properties(vertices, faces)
    np.testing.assert_array_equal(vertices, before[0])  # inputs untouched
    np.testing.assert_array_equal(faces, before[1])


def _corrupted(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A closed mesh with high-degree fan vertices, some faces removed, flipped or doubled."""
    rng = np.random.default_rng(seed)
    mesh = trimesh.creation.cylinder(radius=0.05, height=0.1, sections=int(rng.integers(3, 80)))
    faces = np.array(mesh.faces)
    for _ in range(int(rng.integers(0, 3))):
        k = int(rng.integers(len(faces)))
        action = rng.integers(3)
        if action == 0:
            faces = np.delete(faces, k, axis=0)
        elif action == 1:
            faces[k] = faces[k, ::-1]
        else:
            faces = np.vstack([faces, faces[k][rng.permutation(3)]])
    return np.array(mesh.vertices), faces[rng.permutation(len(faces))]


@pytest.mark.parametrize("seed", range(40))
def test_edge_checks_agree_with_trimesh(seed):
    """Watertight and winding verdicts equal trimesh.graph.is_watertight on the directed edges."""
    vertices, faces = _corrupted(seed)
    edges = np.stack([faces, np.roll(faces, -1, axis=1)], axis=-1).reshape(-1, 2)
    watertight, winding = trimesh.graph.is_watertight(edges)
    if watertight and winding:
        wb.mesh.check_mesh(vertices, faces)
        assert wb.mesh.mass_properties(vertices, faces).mass > 0.0
        return
    check = "watertight" if not watertight else "consistent winding"
    with pytest.raises(wb.WorkbenchError, match=f"mesh check '{check}' failed: "):
        wb.mesh.check_mesh(vertices, faces)
    with pytest.raises(wb.WorkbenchError, match=f"mesh check '{check}' failed: "):
        wb.mesh.mass_properties(vertices, faces, derivatives=True)


@pytest.mark.parametrize("index", [-1, 8, 10**9])
def test_out_of_range_index_is_refused_without_validation(index):
    vertices, faces = _box()
    faces[5, 1] = index
    with pytest.raises(wb.WorkbenchError, match="mesh check 'face indices' failed: 1 faces"):
        wb.mesh.mass_properties(vertices, faces, validate=False, derivatives=True)


@pytest.mark.parametrize("corrupt", [_flip_one, _inward])
def test_fix_winding_repairs(corrupt):
    vertices, faces = corrupt(*_box())
    good = wb.mesh.mass_properties(*_box()).phi
    np.testing.assert_allclose(
        wb.mesh.mass_properties(vertices, faces, fix_winding=True).phi, good, atol=1e-15
    )


# ----------------------------------------------------------------- files, URDF
@pytest.mark.parametrize("file_type", ["stl", "obj", "ply"])
def test_mesh_files_with_units(tmp_path, file_type):
    mesh = _moved(trimesh.creation.box(extents=[300.0, 100.0, 50.0]))  # millimetres
    path = tmp_path / f"part.{file_type}"
    mesh.export(path)
    mp = wb.mesh.mesh_file_properties(path, DENSITY, units="mm")
    metres = trimesh.load(path, force="mesh")  # the file's own (float32 for STL, PLY) numbers
    metres.apply_scale(1e-3)
    expected = _trimesh_phi(metres, DENSITY)
    assert np.abs(mp.phi - expected).max() <= 1e-9 * np.abs(expected).max()


def test_unreadable_mesh_file(tmp_path):
    path = tmp_path / "broken.stl"
    path.write_text("solid nothing here\n")
    with pytest.raises(wb.WorkbenchError, match=r"broken\.stl"):
        wb.mesh.mesh_file_properties(path, DENSITY)
    with pytest.raises(wb.WorkbenchError, match="not found"):
        wb.mesh.mesh_file_properties(tmp_path / "missing.stl", DENSITY)


def test_urdf_link_inertia_from_its_mesh(tmp_path):
    from workbench.models.urdf import with_mesh_inertias

    mesh = trimesh.creation.box(extents=[0.2, 0.05, 0.03])
    mesh.export(tmp_path / "link.stl")
    origin = "0.1 0.02 -0.03"
    rpy = "0.3 -0.2 0.9"
    urdf = tmp_path / "robot.urdf"
    urdf.write_text(
        f"""<robot name="r">
  <link name="base"/>
  <joint name="j" type="revolute"><parent link="base"/><child link="arm"/>
    <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
  <link name="arm">
    <inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1" ixy="0" ixz="0" iyz="0"/></inertial>
    <collision><origin xyz="{origin}" rpy="{rpy}"/>
      <geometry><mesh filename="link.stl" scale="2 1 1"/></geometry></collision>
  </link>
</robot>"""
    )
    original = urdf.read_text()
    out = tmp_path / "robot_mesh_inertia.urdf"
    with_mesh_inertias(urdf, out, density=DENSITY)
    assert urdf.read_text() == original
    model = pin.buildModelFromUrdf(str(out))
    placed = trimesh.load(tmp_path / "link.stl", force="mesh")  # float32, as stored
    placed.apply_scale([2.0, 1.0, 1.0])
    T = np.eye(4)
    T[:3, :3] = pin.rpy.rpyToMatrix(np.array(rpy.split(), dtype=float))
    T[:3, 3] = np.array(origin.split(), dtype=float)
    placed.apply_transform(T)
    expected = _trimesh_phi(placed, DENSITY)
    got = inertia.phi_from_pinocchio(model.inertias[1].toDynamicParameters())
    assert np.abs(got - expected).max() <= 1e-10 * np.abs(expected).max()


# ---------------------------------------------------------------- shape basis
def test_shape_parameter_derivatives():
    box = trimesh.creation.box(extents=[0.2, 0.05, 0.03])
    vertices = np.array(box.vertices) + np.array([0.1, 0.0, 0.0])
    top = np.flatnonzero(vertices[:, 2] > 0)
    shape = (
        wb.mesh.MeshShape(vertices, box.faces, DENSITY, groups={"top": top})
        .uniform_scale("size")
        .axis_scale("length", axis=0)
        .displace("height", "top", [0.0, 0.0, 1.0])
    )
    p = np.array([0.1, -0.2, 0.01])
    phi, J = shape.mass_properties(p)
    h = 1e-6
    fd = central_differences(lambda x: shape.mass_properties(x)[0], p, h)
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-9 * np.abs(J).max())
    # the deformed box is again a box: closed form
    a, b, c = 0.2 * (1 + 0.1 - 0.2), 0.05 * 1.1, 0.03 * 1.1 + 0.01  # modes add up linearly
    np.testing.assert_allclose(phi[0], DENSITY * a * b * c, rtol=1e-12)
    with pytest.raises(wb.WorkbenchError, match="have 1 values; expected 3"):
        shape.mass_properties([0.0])
