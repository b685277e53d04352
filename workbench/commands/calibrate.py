"""Calibrate a robot model from a log: joint twists (kinematic: tool positions or
poses; twist: joint torques) or inertial parameters and friction (dynamic).

MODEL is a model name (see `workbench info`) or a URDF path; the log is a CSV
(header row) or NPZ with columns t, q_<joint> [dq_, ddq_, tau_<joint>]
[px, py, pz [qx, qy, qz, qw]]. The last --validation fraction of the log (or
--validation-log) is held out. Writes DIR/summary.json, DIR/calibrated.urdf and
DIR/residuals.png; nothing is written if the run fails.
"""

from __future__ import annotations

import argparse
import sys

HELP = "calibrate twists or inertial parameters from a log; write a URDF and a report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, metavar="URDF", help="URDF path or model name")
    parser.add_argument("--log", required=True, metavar="FILE", help="CSV or NPZ log")
    parser.add_argument("--kind", required=True, choices=("kinematic", "twist", "dynamic"))
    parser.add_argument("--tool", metavar="FRAME", help="tool frame (default: the last frame)")
    parser.add_argument("--out", default="calibration", metavar="DIR", help="results directory")
    parser.add_argument(
        "--validation", type=float, default=0.2, metavar="FRACTION",
        help="held-out fraction at the end of the log (default 0.2)",
    )  # fmt: skip
    parser.add_argument("--validation-log", metavar="FILE", help="a second log for validation")
    parser.add_argument("--loss", default="linear", choices=("linear", "huber", "soft_l1"))
    parser.add_argument("--f-scale", type=float, help="robust-loss scale (m or N m)")
    parser.add_argument("--drop-bad-rows", action="store_true", help="skip (and count) bad rows")
    parser.add_argument(
        "--savgol-window", type=int, default=11, help="Savitzky-Golay window when dq is not logged"
    )
    parser.add_argument("--inertial", action="store_true", help="twist: also fit inertias")
    parser.add_argument("--physical", action="store_true", help="dynamic: consistent inertias")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def run(args: argparse.Namespace) -> int:
    from workbench import models
    from workbench.calibration.logs import read_log
    from workbench.calibration.report import calibrate, split_log, write_report
    from workbench.io import results_directory

    chain = models.load(args.model, tool_frame=args.tool)
    require = ("position",) if args.kind == "kinematic" else ("tau",)
    options = dict(require=require, drop_bad_rows=args.drop_bad_rows)
    log = read_log(args.log, chain, savgol_window=args.savgol_window, **options)
    if args.validation_log:
        train = log
        validation = read_log(
            args.validation_log, chain, savgol_window=args.savgol_window, **options
        )
    else:
        train, validation = split_log(log, args.validation)
    report = calibrate(
        chain, args.kind, train, validation, loss=args.loss, f_scale=args.f_scale,
        inertial=args.inertial, physical=args.physical, progress=not args.quiet,
    )  # fmt: skip
    with results_directory(args.out) as stage:
        write_report(stage, report)
    rms = report.summary["rms"]
    print(
        f"{args.kind} calibration of {chain.name}: validation RMS "
        f"{rms['validation_before']:.3e} -> {rms['validation_after']:.3e} {rms['unit']}; "
        f"dropped rows {len(report.summary['dropped_rows'])}; results in {args.out}",
        file=sys.stdout,
    )
    return 0
