"""Idle joints at rest under gravity (workbench.closed_chains.statics) against Pinocchio's
potential energy of the folder's own URDF.

talos_like's rod, at the configuration that closes q = 0, is pulled by gravity
(its idle coordinate's force at rest is 5e-5 N m); robot_delta's three rods spin
about axes through their centres of mass (no force at rest anywhere along the spin).
"""

from __future__ import annotations

import shutil
from xml.etree import ElementTree

import numpy as np
import pinocchio as pin
import pytest

from workbench.closed_chains import load, read_folder
from workbench.closed_chains.dynamics import coordinate_forces
from workbench.closed_chains.kinematics import solve_passive
from workbench.closed_chains.statics import idle_equilibrium
from workbench.closed_chains.task_space import reduced_task_jacobian
from workbench.resources import shipped
from workbench.testing.pinocchio_reference import configuration

FOLDERS = shipped("models") / "parallel_robots"


def pinocchio_state(folder, joint_names, q: np.ndarray):
    """Pinocchio's model and data of the folder's URDF, and q in its joint order."""
    model = pin.buildModelFromUrdf(str(folder / "robot.urdf"))
    x = configuration(model, joint_names, q)
    return model, model.createData(), x


def potential(folder, joint_names, q: np.ndarray) -> float:
    """Pinocchio's potential energy of the folder's URDF at the tree configuration q."""
    return float(pin.computePotentialEnergy(*pinocchio_state(folder, joint_names, q)))


def test_a_falling_rod_comes_to_rest_at_a_minimum_of_the_potential_energy():
    folder = FOLDERS / "talos_like"
    chain = load(folder / "robot.yaml", tool="foot")
    a = len(chain.actuated)
    zero = np.zeros(chain.n)
    assert np.abs(coordinate_forces(chain, chain.home, zero, zero)[a:]).max() > 1e-5
    q = idle_equilibrium(chain, chain.home)
    np.testing.assert_array_equal(q[chain.motor_indices], chain.home[chain.motor_indices])
    forces = coordinate_forces(chain, q, zero, zero)
    assert np.abs(forces[a:]).max() <= 1e-10 * np.abs(forces).max()
    V = potential(folder, chain.joint_names, q)
    assert V < potential(folder, chain.joint_names, chain.home)
    for step in (-0.05, 0.05):  # a minimum along the idle motion, in Pinocchio's energy
        x = q[chain.active].copy()
        x[a:] += step
        moved = solve_passive(chain, x, guess=q)
        assert potential(folder, chain.joint_names, moved) > V + 1e-9


@pytest.mark.parametrize("name", ["robot_delta", "cassie_like"])
def test_idle_joints_at_rest_stay_where_they_are(name):
    tool = "effector" if name == "robot_delta" else "foot"
    chain = load(FOLDERS / name / "robot.yaml", tool=tool)
    np.testing.assert_array_equal(idle_equilibrium(chain, chain.home), chain.home)


def test_a_rod_whose_rest_lies_beyond_its_joint_limits_stops_within_them(tmp_path):
    """talos_like's rod limited to ankle_rod_2_rev0 in [-1.7, 0.9] in a copy of the folder: from
    its closed configuration (-1.56) gravity pulls it below -1.7 (unlimited, it rests at
    -1.85); it stops at the limit, not beyond (a start beyond a limit is one the reach's
    bounds reject)."""
    folder = tmp_path / "talos_like"
    shutil.copytree(FOLDERS / "talos_like", folder)
    urdf = folder / "robot.urdf"
    tree = ElementTree.parse(urdf)
    (joint,) = [j for j in tree.getroot().iter("joint") if j.get("name") == "ankle_rod_2_rev0"]
    joint.find("limit").attrib.update(lower="-1.7", upper="0.9")
    tree.write(urdf)
    chain = read_folder(folder, tool="foot")
    q = idle_equilibrium(chain, chain.home)
    np.testing.assert_array_equal(q[chain.motor_indices], chain.home[chain.motor_indices])
    assert np.all(q >= chain.tree.lower) and np.all(q <= chain.tree.upper)
    k = chain.joint_names.index("ankle_rod_2_rev0")
    assert abs(q[k] - -1.7) <= 1e-6 < abs(chain.home[k] - -1.7)  # fell onto the lower limit
    V = potential(folder, chain.joint_names, q)
    assert V < potential(folder, chain.joint_names, chain.home)


def test_only_the_idle_joints_that_move_no_tool_come_to_rest(tmp_path):
    """cassie_like with its rods' centres of mass 1 cm off their axes (gravity pulls both)
    and the tool on one rod: that rod is held, the other comes to rest."""
    import shutil
    import xml.etree.ElementTree as ET

    folder = tmp_path / "cassie_like"
    shutil.copytree(FOLDERS / "cassie_like", folder)
    tree = ET.parse(folder / "robot.urdf")
    root = tree.getroot()
    for link in root.iter("link"):
        if "rode" in link.get("name", "") and link.find("inertial") is not None:
            origin = link.find("inertial").find("origin")
            x, y, z = (float(v) for v in origin.get("xyz").split())
            origin.set("xyz", f"{x + 0.01} {y + 0.01} {z + 0.01}")
    marker = ET.SubElement(root, "joint", name="marker_joint", type="fixed")
    ET.SubElement(marker, "origin", xyz="0.01 0.01 0", rpy="0 0 0")
    ET.SubElement(marker, "parent", link="half_hachil_rode_2")
    ET.SubElement(marker, "child", link="marker")
    ET.SubElement(root, "link", name="marker")
    tree.write(folder / "robot.urdf")
    chain = load(folder / "robot.yaml", tool="marker")
    a = len(chain.actuated)
    zero = np.zeros(chain.n)
    before = coordinate_forces(chain, chain.home, zero, zero)
    assert np.abs(before[a:]).min() > 1e-3  # both rods pulled
    q = idle_equilibrium(chain, chain.home)
    after = coordinate_forces(chain, q, zero, zero)
    J = reduced_task_jacobian(chain, chain.home[None])[0][:, a:]
    held = np.abs(J).max(axis=0) > 1e-9
    assert held.sum() == 1
    assert np.abs(after[a:][~held]).max() <= 1e-10 * np.abs(after).max()
    np.testing.assert_array_equal(q[chain.active[a:][held]], chain.home[chain.active[a:][held]])
    tool = pinocchio_tool(folder, chain.joint_names, q, "marker")
    np.testing.assert_allclose(tool, pinocchio_tool(folder, chain.joint_names, chain.home,
                                                    "marker"), atol=1e-12)  # fmt: skip


def pinocchio_tool(folder, joint_names, q: np.ndarray, frame: str) -> np.ndarray:
    """The frame's position by Pinocchio's forward kinematics of the folder's URDF."""
    model, data, x = pinocchio_state(folder, joint_names, q)
    pin.framesForwardKinematics(model, data, x)
    return data.oMf[model.getFrameId(frame)].translation.copy()
