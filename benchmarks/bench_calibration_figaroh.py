"""Kinematic calibration of the iiwa: FIGAROH 1.0.2 vs ours on the same 10,000 tool positions.

Same noise-free log as ``bench_calibration.py`` (``simulate_log(chain,
samples=10_000, perturb=1e-2)``, tool = ``flange``, positions in the base
frame) and 2,000 held-out postures (``exciting_trajectory(seed=7)``) whose
positions come from the ground-truth chain. The models differ (FIGAROH:
``full_params``, a 6-parameter correction of every joint placement plus the
marker position ``pEE``; ours: product-of-exponentials twists and the tool
frame), so they are compared on the held-out tool-position RMS, which does
not depend on the parameterisation.

FIGAROH is driven through its public entry point,
``figaroh.calibration.base_calibration.BaseCalibration(robot, config.yaml)``
then ``initialize()`` and ``solve()`` (scipy LM on its default log-map
cost), with its CSV layout (one column per joint, ``x1, y1, z1``). Two
FIGAROH rows:

* "stock": the parameters FIGAROH selects itself (QR on the structural
  regressor at the nominal model, then ``eliminate_absorbed_parameters``);
* "all 45 full_params": the same solver with the selection bypassed (all
  42 joint-placement parameters and ``pEEx/y/z_1`` set in
  ``calib_config["param_name"]`` after ``initialize()``), to show where
  the stock row's error comes from.

The config needs ``known_baseframe`` / ``known_tipframe``, which FIGAROH
1.0.2's YAML conversion (``unified_to_legacy_config``) never sets, so they
are set in ``calib_config`` after construction (base known: positions are
in the robot base frame; tip unknown: the marker offset is estimated).

FIGAROH is not a dependency of the workbench; install it in a separate venv
that sees the workbench venv, then run from the repository root::

    python3.11 -m venv /tmp/figvenv
    echo "import site; site.addsitedir('/work/venv/lib/python3.11/site-packages')" \\
        > /tmp/figvenv/lib/python3.11/site-packages/zz_workvenv.pth
    /tmp/figvenv/bin/pip install figaroh==1.0.2
    /tmp/figvenv/bin/python benchmarks/bench_calibration_figaroh.py [--samples 10000] [--stock-only]

Times: FIGAROH one run each (``initialize()`` + ``solve()``, which includes
its post-fit statistics and report); ours ``calibrate_kinematic``, median of
5 after one untimed run (which compiles the kernels or loads them from
numba's disk cache), with the default thread pool. The last column is
FIGAROH's time over ours, measured in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import logging
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
from timing import machine, row

import workbench as wb
from workbench.calibration.fitting.kinematic import KinematicProblem, calibrate_kinematic
from workbench.calibration.simulation.simulate import exciting_trajectory, simulate_log
from workbench.dynamics.kinematics import forward_kinematics

HELD_OUT = 2000

CONFIG = """\
schema_version: "2.0"
robot:
  name: iiwa
tasks:
  calibration:
    type: kinematic_calibration
    kinematics: {{base_frame: universe, tool_frame: flange}}
    measurements:
      markers:
        - measurable_dof: [true, true, true, false, false, false]
    parameters: {{calibration_level: full_params}}
    data:
      number_of_samples: {samples}
      source_file: {train}
      validation_data_file: {val}
"""


def rms(predicted: np.ndarray, measured: np.ndarray) -> float:
    """Root mean square of the per-sample position error norm."""
    return float(np.sqrt(np.mean(np.sum((predicted - measured) ** 2, axis=1))))


def write_csv(path: Path, joint_names, q: np.ndarray, p: np.ndarray) -> None:
    """FIGAROH's calibration CSV: one column per active joint, then x1, y1, z1."""
    import pandas as pd

    df = pd.DataFrame(q, columns=list(joint_names))
    df["x1"], df["y1"], df["z1"] = p[:, 0], p[:, 1], p[:, 2]
    df.to_csv(path, index=False, float_format="%.17g")


def run_figaroh(config: Path, joint_names, q_val, p_val, all_params: bool):
    """(seconds, held-out RMS [m], train RMS [m], #parameters, nfev, message)."""
    import pinocchio as pin
    from figaroh.calibration.base_calibration import BaseCalibration
    from figaroh.calibration.calibration_tools import calc_updated_fkm
    from figaroh.calibration.parameter import FULL_PARAMTPL

    robot = pin.RobotWrapper.BuildFromURDF(str(wb.models.urdf_path("iiwa")))
    robot.q0 = pin.neutral(robot.model)
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start = time.perf_counter()
        cal = BaseCalibration(robot, str(config))
        cal.calib_config["known_baseframe"] = True
        cal.calib_config["known_tipframe"] = False
        cal.initialize()
        if all_params:
            cal.calib_config["param_name"] = [
                f"{p}_{j}" for j in joint_names for p in FULL_PARAMTPL
            ] + ["pEEx_1", "pEEy_1", "pEEz_1"]
        result = cal.solve(enable_logging=False)
        seconds = time.perf_counter() - start
    cfg = cal.calib_config
    held_out_cfg = dict(cfg, NbSample=len(q_val))
    pred_val = calc_updated_fkm(cal.model, cal.data, result.x, q_val, held_out_cfg)
    pred_train = calc_updated_fkm(cal.model, cal.data, result.x, cal.q_measured, cfg)
    measured = cal.PEE_measured.reshape(3, -1).T
    return (
        seconds,
        rms(pred_val.reshape(3, -1).T, p_val),
        rms(pred_train.reshape(3, -1).T, measured),
        len(cfg["param_name"]),
        result.nfev,
        result.message,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--stock-only", action="store_true", help="skip the 45-parameter row")
    args = parser.parse_args()
    logging.disable(logging.WARNING)

    import figaroh

    chain = wb.models.load("iiwa")
    log, truth = simulate_log(chain, samples=args.samples, perturb=1e-2)
    _, q_val, _, _ = exciting_trajectory(chain, HELD_OUT, seed=7)
    p_val = forward_kinematics(truth.chain, q_val)[:, :3, 3]

    print(machine() + f", figaroh {getattr(figaroh, '__version__', '1.0.2')}")
    print(f"\n{args.samples} training samples, {HELD_OUT} held-out postures, noise-free\n")
    header = ("method", "parameters", "time [s]", "train RMS [m]", "held-out RMS [m]", "notes")
    print(row(*header, "time / ours"))
    print(row(*["---"] * (len(header) + 1)))

    problem = KinematicProblem.from_log(log)
    fit = calibrate_kinematic(chain, problem)  # compiles or loads the kernels
    times = []
    for _ in range(5):
        start = time.perf_counter()
        fit = calibrate_kinematic(chain, problem)
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    train = rms(forward_kinematics(fit.chain, log.q)[:, :3, 3], log.position)
    held = rms(forward_kinematics(fit.chain, q_val)[:, :3, 3], p_val)
    nominal = rms(forward_kinematics(chain, q_val)[:, :3, 3], p_val)
    print(row("nominal model (no calibration)", 0, "-", "-", f"{nominal:.1e}", "", "-"))
    print(
        row(
            "ours: calibrate_kinematic",
            fit.subspace.basis.shape[1] if hasattr(fit.subspace, "basis") else "-",
            f"{seconds:.2f}",
            f"{train:.1e}",
            f"{held:.1e}",
            f"{fit.solution.iterations} LM iterations",
            "1",
        )
    )

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        write_csv(tmp / "train.csv", chain.joint_names, log.q, log.position)
        write_csv(tmp / "val.csv", chain.joint_names, q_val, p_val)
        config = tmp / "config.yaml"
        config.write_text(
            CONFIG.format(samples=args.samples, train=tmp / "train.csv", val=tmp / "val.csv")
        )
        variants = [("FIGAROH stock selection", False)]
        if not args.stock_only:
            variants.append(("FIGAROH all 45 full_params", True))
        for name, all_params in variants:
            s, held, train, npar, nfev, msg = run_figaroh(
                config, chain.joint_names, q_val, p_val, all_params
            )
            notes = f"nfev {nfev}: {msg}"
            ratio = f"{s / seconds:.0f}x"
            print(row(name, npar, f"{s:.2f}", f"{train:.1e}", f"{held:.1e}", notes, ratio))


if __name__ == "__main__":
    main()
