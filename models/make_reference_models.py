"""Regenerate the shipped reference models: KUKA LBR iiwa 14 R820 and the planar 2R.

Run from the project root: ``python models/make_reference_models.py``.

iiwa: link frames in modified Denavit-Hartenberg form (Craig), joint axes
z_i, with the link lengths of the iiwa 14 R820 (0.36 m base to shoulder,
0.42 m shoulder to elbow, 0.40 m elbow to wrist, 0.126 m wrist to flange)
and the identified inertial parameters of seed 003's table (from Stuerz et
al. 2017: mass, centre of mass in the link frame, inertia about the centre
of mass in the link frame). The twist angles alpha alternate as
(0, +90, -90, -90, +90, +90, -90) degrees, the sign convention under which
the identified centres of mass lie along their links with the arm upright
at q = 0. Joint position, velocity and torque limits are KUKA's data-sheet
values. The tool frame ``flange`` sits 0.126 m along z_7.

planar_2r: two revolute joints about z, links along x of lengths
L1 = 0.5 m, L2 = 0.4 m, point masses m1 = 2 kg and m2 = 1.5 kg at the link
ends (seed 003 §6.1 places each centre of mass at the end of its link),
gravity -9.81 m/s^2 along y (a vertical plane). Tool frame ``tip`` at the
end of link 2.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

import workbench as wb

HERE = Path(__file__).resolve().parent
DEG = np.pi / 180.0

# seed 003, table in §6.2.2: m, c_x, c_y, c_z, Ixx, Ixy, Ixz, Iyy, Iyz, Izz
IIWA_TABLE = np.array([
    [3.94781, -0.00351, 0.00160, -0.03139, 0.00455, 0.00000, -0.00000, 0.00454, 0.00001, 0.00029],
    [4.50275, -0.00767, 0.16669, -0.00355, 0.00032, 0.00000, 0.00000, 0.00010, -0.00000, 0.00042],
    [2.45520, -0.00225, -0.03492, -0.02652, 0.00223, -0.00005, 0.00007, 0.00219, 0.00007, 0.00073],
    [2.61155, 0.00020, -0.05268, 0.03818, 0.03844, 0.00088, -0.00112, 0.01144, -0.00111, 0.04988],
    [3.41000, 0.00005, -0.00237, -0.21134, 0.00277, -0.00001, 0.00001, 0.00284, -0.00000, 0.00012],
    [3.38795, 0.00049, 0.02019, -0.02750, 0.00050, -0.00005, -0.00003, 0.00281, -0.00004, 0.00232],
    [0.35432, -0.03466, -0.02324, 0.07138, 0.00795, 0.00022, -0.00029, 0.01089, -0.00029, 0.00294],
])  # fmt: skip
IIWA_ALPHA = np.array([0.0, 90.0, -90.0, -90.0, 90.0, 90.0, -90.0]) * DEG
IIWA_D = np.array([0.36, 0.0, 0.42, 0.0, 0.40, 0.0, 0.0])
IIWA_FLANGE = 0.126
IIWA_LIMIT = np.array([170.0, 120.0, 170.0, 120.0, 170.0, 120.0, 175.0]) * DEG
IIWA_VELOCITY = np.array([85.0, 85.0, 100.0, 75.0, 130.0, 135.0, 135.0]) * DEG
IIWA_EFFORT = np.array([320.0, 320.0, 176.0, 176.0, 110.0, 40.0, 40.0])


def transform(R=None, p=(0.0, 0.0, 0.0)) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = np.eye(3) if R is None else R
    T[:3, 3] = p
    return T


def rot_x(angle: float) -> np.ndarray:
    return wb.lie.exp_so3(np.array([angle, 0.0, 0.0]))


def world_inertias(frames: np.ndarray, phi_local: np.ndarray) -> np.ndarray:
    """Inertias given in each link frame, moved to the base frame at q = 0."""
    return wb.inertia.matrix_from_phi(wb.inertia.moved_phi(phi_local, frames))


def iiwa() -> wb.Chain:
    frames, T = [], np.eye(4)
    for alpha, d in zip(IIWA_ALPHA, IIWA_D, strict=True):
        T = T @ transform(rot_x(alpha)) @ transform(p=(0.0, 0.0, d))
        frames.append(T)
    frames = np.array(frames)
    m, c = IIWA_TABLE[:, 0], IIWA_TABLE[:, 1:4]
    Ixx, Ixy, Ixz, Iyy, Iyz, Izz = IIWA_TABLE[:, 4:].T
    I_c = np.stack([[Ixx, Ixy, Ixz], [Ixy, Iyy, Iyz], [Ixz, Iyz, Izz]]).transpose(2, 0, 1)
    phi = wb.inertia.phi_from_com(m, c, I_c)
    return wb.Chain(
        joint_names=tuple(f"iiwa_joint_{i}" for i in range(1, 8)),
        link_names=tuple(f"iiwa_link_{i}" for i in range(1, 8)),
        parents=np.arange(-1, 6),
        joint_kinds=("revolute",) * 7,
        axes=np.tile([0.0, 0.0, 1.0], (7, 1)),
        joint_frames=frames,
        inertias=world_inertias(frames, phi),
        tool_name="flange",
        tool_parent=6,
        tool_frame=frames[-1] @ transform(p=(0.0, 0.0, IIWA_FLANGE)),
        lower=-IIWA_LIMIT,
        upper=IIWA_LIMIT,
        velocity_limit=IIWA_VELOCITY,
        effort_limit=IIWA_EFFORT,
        base_name="iiwa_link_0",
        name="iiwa14",
    )


def planar_2r(L1=0.5, L2=0.4, m1=2.0, m2=1.5) -> wb.Chain:
    frames = np.array([transform(), transform(p=(L1, 0.0, 0.0))])
    phi = wb.inertia.phi_from_com(
        np.array([m1, m2]), np.array([[L1, 0.0, 0.0], [L2, 0.0, 0.0]]), np.zeros((2, 3, 3))
    )
    return wb.Chain(
        joint_names=("joint_1", "joint_2"),
        link_names=("link_1", "link_2"),
        parents=np.array([-1, 0]),
        joint_kinds=("revolute", "revolute"),
        axes=np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]),
        joint_frames=frames,
        inertias=world_inertias(frames, phi),
        tool_name="tip",
        tool_parent=1,
        tool_frame=transform(p=(L1 + L2, 0.0, 0.0)),
        gravity=np.array([0.0, -9.81, 0.0]),
        lower=np.full(2, -np.pi),
        upper=np.full(2, np.pi),
        velocity_limit=np.full(2, 10.0),
        effort_limit=np.full(2, 100.0),
        base_name="base",
        name="planar_2r",
    )


if __name__ == "__main__":
    wb.write_urdf(iiwa(), HERE / "iiwa" / "iiwa14.urdf")
    wb.write_urdf(planar_2r(), HERE / "planar_2r" / "planar_2r.urdf")
    print("wrote", HERE / "iiwa" / "iiwa14.urdf", "and", HERE / "planar_2r" / "planar_2r.urdf")
