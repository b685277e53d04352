"""Calibrate a robot model from a log: joint twists (kinematic: measured tool or marker poses;
twist: joint torques) or inertial parameters with friction, rotor inertia and offsets (dynamic).

MODEL is a model name (see `workbench info`) or a URDF path; a drive file beside
the URDF (ROBOT.drives.toml) gives the nominal friction and rotor inertia. LOG is
a table in the project's columns (CSV with a header or NPZ: t, q_<joint>
[dq_, ddq_, tau_<joint>] [px, py, pz [qx, qy, qz, qw]]) or a log description
(.toml) of a recording as it came off the robot: files, columns, units, motor
side and transmission, filtering and decimation, model terms (see
models/staubli_tx40/identification.toml). Held out for validation: what the
description asks for, else the last --validation fraction; --folds K uses K
contiguous cross-validation folds ("loo": one sample per fold).

A log too long for memory is a Parquet file or a directory of chunk files
(*.parquet, *.npz, *.csv, *.csv.gz in time order), pre-processed (t, q_, dq_,
ddq_, tau_<joint>): --kind dynamic reads it chunk by chunk into per-joint
triangular factors of its least squares (a Dask map-reduce, memory bounded by
the chunks in flight) and gives the same fit and report as in memory
(least squares only; --folds K or --validation).

Writes DIR/report.html (open it first: summary, warnings and plots in one
page), DIR/summary.json (heldout_relative_rms and the rest), DIR/parameters.csv
(name,value,rel_std_percent), DIR/calibrated.urdf (+ calibrated.drives.toml),
DIR/residuals.png and, for torques, DIR/heldout_torques.png; DIR is replaced as
a whole. Progress bars on stderr follow the reading, the fit and the
validation fits (--quiet: none). Exit code 1 when the calibrated model predicts
the held-out samples worse than the nominal one (with --parameters forcing a
model), or when the fit is implausible for the log as described (a likely
unit, sign, scale or column mistake, named; or a link far from its nominal one, a
weakly identified link); the results are still written, summary.json's "exit" holds the
code and the reasons, and `workbench export` refuses such results without --force.
2 on bad input, with nothing written.

MODEL may be a whole robot (wheels, head, grippers): the joints the log names
(its columns, [model] joints, or the joints a bag's /joint_states move) are
calibrated, the others locked; calibrated.urdf is the whole robot again. LOG
may be a ROS 1 bag, a ROS 2 bag folder or a .mcap/.db3 file (see `workbench
info BAG`); non-uniform clocks are resampled, gaps split the recording.
"""

from __future__ import annotations

import argparse
import math
import sys

HELP = "calibrate twists or inertial parameters from a log; write a URDF and a report"


def _folds(text: str) -> int:
    if text in ("loo", "leave-one-out"):
        return -1
    try:
        return int(text)  # its range: workbench.calibration.run.check_request
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of folds or 'loo'") from None


def _weights(text: str) -> tuple[float, ...]:
    try:
        weights = tuple(float(w) for w in text.split(",") if w.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of numbers") from None
    if not weights or not all(math.isfinite(w) and w > 0 for w in weights):
        raise argparse.ArgumentTypeError(f"{text!r}: give positive finite weights, e.g. 1,100")
    return weights


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from workbench.calibration.problems.kind_names import DESCRIPTIONS, KIND_NAMES, LOSSES
    from workbench.identification.term_names import TERMS

    parser.add_argument("--model", required=True, metavar="MODEL", help="model name or URDF path")
    parser.add_argument(
        "--log", required=True, metavar="FILE",
        help="log table (CSV/NPZ), description (.toml), or a large log (Parquet, a directory)",
    )  # fmt: skip
    parser.add_argument(
        "--kind", required=True, choices=KIND_NAMES,
        help="; ".join(f"{name}: {what}" for name, what in DESCRIPTIONS.items()),
    )  # fmt: skip
    parser.add_argument("--tool", metavar="FRAME", help="tool frame (default: the last frame)")
    parser.add_argument(
        "--out", default="results/calibration", metavar="DIR",
        help="results directory (default: %(default)s)",
    )  # fmt: skip
    held = parser.add_mutually_exclusive_group()
    held.add_argument(
        "--validation", type=float, metavar="FRACTION",
        help="hold out the last FRACTION of the log (default: the log description's choice, "
        "else 0.2)",
    )  # fmt: skip
    held.add_argument(
        "--folds", type=_folds, metavar="K",
        help="blocked cross-validation with K contiguous folds, or 'loo' (leave one out)",
    )  # fmt: skip
    held.add_argument("--validation-log", metavar="FILE", help="a second log for validation")
    parser.add_argument(
        "--terms", metavar="LIST",
        help=f"torque-model terms, comma separated, from {', '.join(TERMS)} "
        "(default: the log description's, else friction)",
    )  # fmt: skip
    parser.add_argument(
        "--loss", default="linear", choices=LOSSES,
        help="residual loss: least squares, or a robust loss against outliers",
    )  # fmt: skip
    parser.add_argument(
        "--f-scale", type=float, metavar="SCALE",
        help="robust-loss scale in the residual unit (default: 1e-3 m or 1 N m)",
    )  # fmt: skip
    parser.add_argument(
        "--rotation-weight", type=float, metavar="M_PER_RAD",
        help="kinematic: metres per radian of orientation error (default: from the residuals)",
    )  # fmt: skip
    parser.add_argument("--drop-bad-rows", action="store_true", help="skip (and count) bad rows")
    parser.add_argument(
        "--savgol-window", type=int, default=11, metavar="N",
        help="Savitzky-Golay window when a table logs no dq (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument("--inertial", action="store_true", help="twist: also fit inertias")
    parser.add_argument(
        "--payload-log", metavar="FILE",
        help="dynamic: a log of the robot carrying a known payload ([model.payload]); drive "
        "gains (N m per logged unit) are identified with the base parameters from both logs, "
        "written to DIR/drive_gains.toml, and the efforts are scaled by them before calibrating",
    )  # fmt: skip
    consistency = parser.add_mutually_exclusive_group()
    consistency.add_argument(
        "--physical", action="store_true",
        help="dynamic: physically consistent inertias, non-negative friction and rotor inertia, "
        "with a prior toward the nominal model where the log says nothing (the default; the "
        "option is kept for earlier command lines)",
    )  # fmt: skip
    consistency.add_argument(
        "--unconstrained", action="store_true",
        help="dynamic: the plain least-squares completion of the base parameters instead "
        "(the nominal model changed least; consistent or not, no URDF when not)",
    )  # fmt: skip
    parser.add_argument(
        "--prior-weights", type=_weights, metavar="W1,W2,...",
        help="dynamic: also score these weights of the consistent fit's prior toward the "
        "nominal model on the held-out folds, beside the one used (10): summary.json "
        "prior_weight (each weight refits every fold)",
    )  # fmt: skip
    parser.add_argument(
        "--parameters", default="auto",
        choices=("auto", "frames", "offsets", "twists", "compliance"),
        help="kinematic: what to fit: the device and marker frames only, + joint zero offsets, "
        "+ full joint twists, + a compliance per joint under gravity, or auto: the one the "
        "held-out folds predict best, each with a ridge toward the nominal chosen by the "
        "evidence of its training samples (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--quiet", action="store_true", help="no progress bars or compile message on stderr"
    )


def run(args: argparse.Namespace) -> int:
    import numpy  # noqa: F401  (both processes use them: imported once, before the fork)
    import pinocchio  # noqa: F401

    from workbench.viz import drawing

    with drawing.worker("workbench.viz.plots"):  # plots drawn beside the computation
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from dataclasses import replace
    from pathlib import Path

    from workbench.calibration.checks.fit_plausibility import implausible_message
    from workbench.calibration.reporting.joint_figures import summary_line
    from workbench.calibration.reporting.report import write_report
    from workbench.calibration.run import Request, check_request, run_calibration
    from workbench.errors import ImplausibleFit
    from workbench.io import check_not_input, check_output_directory, results_directory
    from workbench.runtime import set_compile_message

    terms = None
    if args.terms is not None:
        terms = tuple(t.strip() for t in args.terms.split(",") if t.strip())
    request = Request(
        model=args.model, log=args.log, kind=args.kind, tool=args.tool,
        validation=args.validation, folds=args.folds, validation_log=args.validation_log,
        terms=terms, loss=args.loss, f_scale=args.f_scale, rotation_weight=args.rotation_weight,
        drop_bad_rows=args.drop_bad_rows, savgol_window=args.savgol_window,
        inertial=args.inertial, physical=args.physical, unconstrained=args.unconstrained,
        parameters=args.parameters, prior_weights=args.prior_weights,
        payload_log=args.payload_log, progress=not args.quiet,
    )  # fmt: skip
    check_output_directory(args.out)
    model_file = args.model if Path(args.model).is_file() else None
    check_not_input(args.out, args.log, model_file, args.validation_log, directory=True)
    check_request(request)
    set_compile_message(not args.quiet)
    outcome = run_calibration(request)
    for message in outcome.messages:
        print(f"workbench calibrate: warning: {message}", file=sys.stderr)
    notes = [f"implausible fit: {d.message}" for d in outcome.diagnoses]
    reasons = outcome.untrusted
    verdict = {"exit": {"code": 1 if reasons else 0, "reasons": reasons}}
    report = replace(outcome.report, summary=outcome.report.summary | verdict)
    with results_directory(args.out) as stage:
        write_report(stage, report, outcome.messages + notes)
    held = outcome.report.summary["heldout"]
    per_joint = outcome.report.summary.get("heldout_per_joint")
    lead = "" if per_joint is None else f"{summary_line(per_joint)}; pooled "
    print(
        f"{args.kind} calibration of {outcome.report.chain.name}: held-out {lead}relative RMS "
        f"{held['nominal']['relative_rms']:.4g} (nominal) -> "
        f"{held['calibrated']['relative_rms']:.4g} (calibrated), {held['scheme']}; "
        f"results in {Path(args.out)}"
    )
    if outcome.diagnoses:
        message = implausible_message(outcome.log, outcome.diagnoses)
        raise ImplausibleFit(f"{message} (results written for inspection)")
    if not outcome.improved:
        print(
            "workbench calibrate: the calibrated model predicts the held-out samples worse than "
            "the nominal model; calibration did not help (results written for inspection)",
            file=sys.stderr,
        )
        return 1
    return 0
