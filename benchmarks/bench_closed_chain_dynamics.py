"""Closed-chain forward dynamics against Pinocchio 4's constraint dynamics, same states.

For each mechanism (the three example-parallel-robots folders of
``models/parallel_robots`` and the shipped closed chains), N closed states
with random motor velocities (idle joints moving too) and random motor
torques: the joint accelerations of
``workbench.closed_chains.dynamics.forward_dynamics`` (batched over the N
states) and of Pinocchio's ``constraintDynamics`` (proximal settings accuracy
1e-14, mu 1e-10) and ``lcaba`` (accuracy 1e-14, mu ``LCABA_MU``: its
regularisation enters unscaled, mu 1e-10 costs it 5 digits) one call per
state, on the same
Pinocchio model (``to_pinocchio`` of the spanning tree) with one
``RigidConstraintModel`` per closure (weld, or rotation with coincident
origins: CONTACT_6D; point and planar: CONTACT_3D; revolute: two CONTACT_3D
on its axis). Times per state, min and median of ``--repeats`` runs. The
last column compares ``lcaba`` at rest (dq = 0, same q and torques): it
agrees there, and differs only through the velocity terms of 6d closures.

    python benchmarks/bench_closed_chain_dynamics.py --samples 100 --repeats 5
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pinocchio as pin

sys.path.insert(0, str(Path(__file__).resolve().parent))

from timing import machine, row, timed

from workbench.closed_chains import load
from workbench.closed_chains.dynamics import forward_dynamics
from workbench.closed_chains.kinematics import solve_passive, velocities
from workbench.models.pinocchio_conversion import to_pinocchio
from workbench.resources import shipped

FOLDERS = [shipped("models") / "parallel_robots" / name
           for name in ("5bar_linkage", "robot_delta", "cassie_like")]  # fmt: skip
# the spherical five-bar is left out: its massless cut link makes Pinocchio's mass matrix
# singular (tests/test_closed_chains.py gives it a leaf inertia for the comparison)
SHIPPED = ("planar_fivebar", "fourbar", "delta")
# lcaba's proximal parameter: Pinocchio's documentation advises ~1e-6; with 1e-10 its
# accelerations lose five digits (1e-5 relative on planar_fivebar), with 1e-4 they equal
# constraintDynamics' to 1e-11 on the closures without weld rows
LCABA_MU = 1e-4


def constraints(chain, model):
    """Pinocchio constraint models of the chain's closures (module docstring)."""

    def anchored(name, offset):
        link = chain.tree.parent_of(name)
        placement = chain.tree.placement_of(name).copy()
        placement[:3, 3] += placement[:3, :3] @ offset
        if link >= 0:
            placement = np.linalg.inv(chain.tree.joint_frames[link]) @ placement
        return link + 1, pin.SE3(placement)

    out = []
    for closure in chain.closures:
        offsets = [np.zeros(3)]  # revolute: and a point on the axis
        kind = pin.ContactType.CONTACT_3D
        if closure.kind in ("weld", "rotation"):
            kind = pin.ContactType.CONTACT_6D
        elif closure.kind == "revolute":
            offsets.append(np.array([0.0, 0.0, 0.1]))
        for offset in offsets:
            (ja, Ma), (jb, Mb) = (anchored(f, offset) for f in closure.frames)
            out.append(
                pin.RigidConstraintModel(kind, model, ja, Ma, jb, Mb, pin.ReferenceFrame.LOCAL)
            )
    return pin.StdVec_RigidConstraintModel(out)


def states(chain, samples, rng):
    """Closed configurations near home, independent-coordinate velocities, motor torques."""
    a = len(chain.active)
    qa = chain.home[chain.active] + rng.uniform(-0.05, 0.05, (samples, a))
    q = solve_passive(chain, qa, guess=chain.home)
    dqa = rng.normal(size=(samples, a))
    tau = rng.normal(size=(samples, len(chain.actuated)))
    return q, dqa, tau


def constrained_states(chain, samples: int, rng):
    """Pinocchio's model, data, constraint models and datas of ``chain`` (initialised for
    ``constraintDynamics``), and ``samples`` random closed states: q, motor velocities dqa,
    motor torques tau, tree velocities dq and tree torques (zero on passive joints)."""
    model = to_pinocchio(chain.tree)
    data = model.createData()
    cms = constraints(chain, model)
    cds = pin.StdVec_RigidConstraintData([c.createData() for c in cms])
    pin.initConstraintDynamics(model, data, cms, cds)
    q, dqa, tau = states(chain, samples, rng)
    dq = velocities(chain, q, dqa)
    torque = np.zeros_like(q)
    torque[:, chain.active[: len(chain.actuated)]] = tau
    return model, data, cms, cds, q, dqa, tau, dq, torque


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(machine())
    print(f"N = {args.samples} states, {args.repeats} repeats; µs per state")
    print(row("mechanism", "n", "motors + idle", "ours min", "ours median",
              "constraintDynamics min", "median", "lcaba min", "median",
              "ours vs constraintDynamics", "lcaba vs constraintDynamics",
              "lcaba vs constraintDynamics at dq = 0"))  # fmt: skip
    print(row(*["---"] * 12))
    chains = [(p.name, load(p / "robot.yaml")) for p in FOLDERS]
    chains += [(name, load(name)) for name in SHIPPED]
    for name, chain in chains:
        print(compare(name, chain, args.samples, args.repeats, rng))


def compare(name: str, chain, samples: int, repeats: int, rng) -> str:
    """One table row: times per state and the largest differences of ddq."""
    model, data, cms, cds, q, dqa, tau, dq, torque = constrained_states(chain, samples, rng)
    settings = pin.ProximalSettings(1e-14, 1e-10, 200)
    (_, ddq), ours_min, ours_median = timed(lambda: forward_dynamics(chain, q, dqa, tau), repeats)

    def pinocchio_all(algorithm, settings, dq=dq):
        return np.array([algorithm(model, data, q[k], dq[k], torque[k], cms, cds, settings)
                         for k in range(len(q))])  # fmt: skip

    reference, cd_min, cd_median = timed(
        lambda: pinocchio_all(pin.constraintDynamics, settings), repeats
    )
    rest = pinocchio_all(pin.constraintDynamics, settings, 0 * dq)
    pin.computeJointMinimalOrdering(model, data, cms)
    lcaba_settings = pin.ProximalSettings(1e-14, LCABA_MU, 1000)
    lcaba_ddq, lc_min, lc_median = timed(lambda: pinocchio_all(pin.lcaba, lcaba_settings), repeats)
    lcaba_rest = pinocchio_all(pin.lcaba, lcaba_settings, 0 * dq)
    scale = max(1.0, np.abs(reference).max())
    diff = np.abs(ddq - reference).max() / scale
    diff_lcaba = np.abs(lcaba_ddq - reference).max() / scale
    diff_rest = np.abs(lcaba_rest - rest).max() / max(1.0, np.abs(rest).max())
    per = 1e6 / len(q)
    return row(name, chain.n, f"{len(chain.actuated)} + {len(chain.idle)}",
               f"{ours_min * per:.1f}", f"{ours_median * per:.1f}", f"{cd_min * per:.1f}",
               f"{cd_median * per:.1f}", f"{lc_min * per:.1f}", f"{lc_median * per:.1f}",
               f"{diff:.1e}", f"{diff_lcaba:.1e}", f"{diff_rest:.1e}")  # fmt: skip


if __name__ == "__main__":
    main()
