"""Excitation design against FIGAROH 1.0.2's optimal trajectory generation, on the Staubli TX40.

Both minimise the condition number of the base regressor of the same torque model (rigid
body and viscous + Coulomb friction, FIGAROH's ``has_friction``; no rotor inertia or offsets,
see the notes) over one trajectory of the same duration sampled at the same rate, within
the same limits, in the same run:

* FIGAROH: ``BaseOptimalTrajectory`` (``figaroh.optimal``) subclassed only to return its own
  ``BaseTrajectoryIPOPTProblem`` (the class is abstract), one segment of 5 waypoints 2 s
  apart (8 s), 100 Hz, ``soft_lim`` 0.05, its default 200 IPOPT iterations (cyipopt),
  objective ``cond(W_b)`` with forward-difference gradients and constraint Jacobian;
  positions limited at the waypoints, velocities and torques at every sample; collision
  constraints off (the workbench design has none; FIGAROH would pair the 15 non-adjacent
  TX40 meshes).
* workbench: ``design_trajectory`` with criterion ``condition`` (log cond of the unweighted
  base regressor: noise 1 N m on every joint), a Fourier series of period 8 s and 5
  harmonics at rest at both ends, FIGAROH's soft limits for position (everywhere),
  velocity and torque, acceleration <= 20 rad/s^2 (``ddq_lim_def`` of TX40_config.yaml;
  FIGAROH has no acceleration limit), 100 collocation points, analytic gradients.

Both final trajectories are scored by both tools: FIGAROH's ``cond(W_b)`` (its base
parameters and regressor) and the workbench's condition number and log det (its base
parameters, ``F = W^T W`` over the 801 samples).

Run from the repository root (FIGAROH's venv sees the workbench venv, as in
bench_identification_figaroh.py; cyipopt and ndcurves are needed there)::

    /tmp/figvenv/bin/pip install cyipopt      # needs coinor-libipopt-dev, liblapack-dev
    /tmp/figvenv/bin/python benchmarks/bench_excitation_figaroh.py [--iterations 200] [--json F]

The script re-executes itself with LD_LIBRARY_PATH pointing at the workbench venv's
cmeel libraries, which ndcurves' wheel needs (libeigenpy.so).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DATA = Path("/work/shared/data/staubli_tx40/TX40_config.yaml")
CMEEL = "/work/venv/lib/python3.11/site-packages/cmeel.prefix/lib"


def _reexec() -> None:
    path = os.environ.get("LD_LIBRARY_PATH", "")
    if CMEEL not in path.split(":"):
        os.environ["LD_LIBRARY_PATH"] = f"{CMEEL}:{path}" if path else CMEEL
        os.execv(sys.executable, [sys.executable, *sys.argv])


def figaroh_config(out: Path, iterations: int) -> Path:
    import yaml

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_identification_figaroh import unified_config

    path = unified_config(DATA, "identification", "staubli_tx40", out)
    config = yaml.safe_load(path.read_text())
    components = config["tasks"]["identification"]["problem"]["model_components"]
    components.update(friction=True, actuator_inertia=False, joint_offset=False)
    config["tasks"]["optimal_trajectory"] = {
        "problem": {"soft_lim": 0.05, "max_iterations": iterations, "max_attempts": 1000},
        "trajectory": {"waypoints": 5, "frequency": 100, "segment_duration": 2.0},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_figaroh(config: Path, seed: int, verbose: bool) -> dict:
    from figaroh.optimal import BaseOptimalTrajectory, BaseTrajectoryIPOPTProblem
    from figaroh.tools.robot import load_robot

    class TX40OptimalTrajectory(BaseOptimalTrajectory):
        def create_ipopt_problem(self, *args):
            return BaseTrajectoryIPOPTProblem(self, *args)

    logging.basicConfig(level=logging.INFO if verbose else logging.ERROR)
    np.random.seed(seed)  # noqa: NPY002  (FIGAROH draws from the global generator)
    clock = time.perf_counter()
    robot = load_robot(
        str(ROOT / "models/staubli_tx40/tx40.urdf"), package_dirs=str(ROOT / "models/staubli_tx40")
    )
    robot.geom_model = None  # no collision constraints (see the module docstring)
    model = robot.model
    joints = [model.names[i] for i in range(1, model.njoints)]
    ot = TX40OptimalTrajectory(robot, joints, str(config))
    ids = [model.getJointId(j) for j in joints]
    J = [model.joints[i] for i in ids]
    ot.identif_config.update(
        active_joints=joints, act_Jid=ids, act_J=J, act_idxq=[j.idx_q for j in J],
        act_idxv=[j.idx_v for j in J], idx_act_joints=[i - 1 for i in ids],
    )  # fmt: skip
    ot.initialize()
    result = ot.solve(stack_reps=1)
    seconds = time.perf_counter() - clock
    if not result["P_F"]:
        raise RuntimeError("FIGAROH found no trajectory")
    info = result["iteration_data"][-1]
    return {
        "ot": ot,
        "seconds": seconds,
        "iterations": len(info["iterations"]) - 1,
        "status": int(info["status"]),
        "converged": bool(info["converged"]),
        "q": np.asarray(result["P_F"][-1]),
        "dq": np.asarray(result["V_F"][-1]),
        "ddq": np.asarray(result["A_F"][-1]),
        "limits": {
            "lower": np.asarray(ot.CB.lower_q, float),
            "upper": np.asarray(ot.CB.upper_q, float),
            "velocity": np.minimum(np.abs(ot.CB.lower_dq), np.abs(ot.CB.upper_dq)),
            "torque": np.minimum(np.abs(ot.CB.lower_effort), np.abs(ot.CB.upper_effort)),
        },
    }


def run_workbench(limits: dict, iterations: int) -> dict:
    import workbench as wb
    from workbench.excitation.design import DesignOptions, Limits, TorqueFunction, design_trajectory
    from workbench.excitation.experiment import dynamic_information
    from workbench.excitation.trajectory import FourierSpace
    from workbench.identification.drives import Drives

    chain = wb.models.load("staubli_tx40")
    clock = time.perf_counter()
    drives = Drives(chain.n, ("friction",), min_speed=np.full(chain.n, 0.05))
    information = dynamic_information(chain, drives, np.ones(chain.n))
    lim = Limits(
        limits["lower"],
        limits["upper"],
        limits["velocity"],
        np.full(chain.n, 20.0),
        limits["torque"],
    )
    space = FourierSpace(chain.n, 8.0, 5)
    options = DesignOptions(criterion="condition", collocation=100, max_iterations=iterations)
    design = design_trajectory(information, space, lim, TorqueFunction(chain), options)
    seconds = time.perf_counter() - clock
    _, q, dq, ddq = design.trajectory.sampled(100.0, 1)
    return {"seconds": seconds, "iterations": design.iterations, "status": design.status,
            "q": q, "dq": dq, "ddq": ddq, "chain": chain, "design": design}  # fmt: skip


def workbench_scores(chain, q, dq, ddq) -> dict:
    from workbench.excitation.experiment import dynamic_information
    from workbench.excitation.information import condition_number, log_det
    from workbench.identification.drives import Drives

    information = dynamic_information(chain, Drives(chain.n, ("friction",)), np.ones(chain.n))
    F = information.matrix(q, dq, ddq)
    return {"condition_number": condition_number(F), "log_det": log_det(F)}


def figaroh_cond(ot, q, dq, ddq) -> float:
    return float(np.linalg.cond(ot._stack_base_regressors(q, dq, ddq)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200, help="IPOPT iterations (both)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", metavar="FILE")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()
    _reexec()
    with tempfile.TemporaryDirectory() as tmp:
        config = figaroh_config(Path(tmp) / "tx40.yaml", args.iterations)
        fig = run_figaroh(config, args.seed, args.verbose)
    ours = run_workbench(fig["limits"], args.iterations)
    chain = ours["chain"]
    rows = []
    for label, run in (("FIGAROH 1.0.2", fig), ("workbench", ours)):
        scores = workbench_scores(chain, run["q"], run["dq"], run["ddq"])
        peak = {
            "position": float(
                np.max(
                    np.maximum(run["q"] - fig["limits"]["upper"], fig["limits"]["lower"] - run["q"])
                )
            ),
            "velocity": float(np.max(np.abs(run["dq"]) / fig["limits"]["velocity"])),
        }
        rows.append({
            "method": label, "seconds": run["seconds"], "iterations": run["iterations"],
            "status": str(run["status"]), "samples": int(run["q"].shape[0]),
            "figaroh_cond": figaroh_cond(fig["ot"], run["q"], run["dq"], run["ddq"]),
            "workbench_cond": scores["condition_number"], "workbench_log_det": scores["log_det"],
            "max_position_excess_rad": peak["position"], "peak_velocity_fraction": peak["velocity"],
        })  # fmt: skip
    print(
        "\n| method | time (s) | iterations | status | cond (FIGAROH's W_b) "
        "| cond (workbench base) | log det F (workbench) |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['method']} | {r['seconds']:.1f} | {r['iterations']} | {r['status']} | "
            f"{r['figaroh_cond']:.4g} | {r['workbench_cond']:.4g} | {r['workbench_log_det']:.2f} |"
        )
    print(f"\nspeed-up {rows[0]['seconds'] / rows[1]['seconds']:.1f}x")
    for r in rows:
        print(
            f"{r['method']}: {r['samples']} samples, max position beyond the soft limits "
            f"{r['max_position_excess_rad']:.3g} rad, peak |dq| / limit "
            f"{r['peak_velocity_fraction']:.3f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
