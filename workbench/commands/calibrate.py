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
the held-out samples worse than the nominal one (the results are still
written); 2 on bad input, with nothing written.
"""

from __future__ import annotations

import argparse
import sys
import warnings

HELP = "calibrate twists or inertial parameters from a log; write a URDF and a report"


def _folds(text: str) -> int:
    if text in ("loo", "leave-one-out"):
        return -1
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of folds or 'loo'") from None
    if value < 2:
        raise argparse.ArgumentTypeError(f"{value}: need at least 2 folds")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from workbench.calibration.kind_names import KIND_NAMES, LOSSES, TERMS

    parser.add_argument("--model", required=True, metavar="MODEL", help="model name or URDF path")
    parser.add_argument(
        "--log", required=True, metavar="FILE",
        help="log table (CSV/NPZ), description (.toml), or a large log (Parquet, a directory)",
    )  # fmt: skip
    parser.add_argument(
        "--kind", required=True, choices=KIND_NAMES,
        help="kinematic: joint twists from measured poses; twist: joint twists from torques; "
        "dynamic: inertial parameters and drive terms from torques",
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
    parser.add_argument(
        "--physical", action="store_true",
        help="dynamic: physically consistent inertias, non-negative friction and rotor inertia",
    )  # fmt: skip
    parser.add_argument(
        "--parameters", default="auto", choices=("auto", "frames", "offsets", "twists"),
        help="kinematic: what to fit: the device and marker frames only, + joint zero offsets, "
        "+ full joint twists, or auto: the one the held-out folds predict best, with a ridge "
        "toward the nominal that they choose too (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--quiet", action="store_true", help="no progress bars or compile message on stderr"
    )


def _model(args: argparse.Namespace):
    """The model to calibrate, the chain whose joints the log has, and the URDF behind it.

    A whole robot is cut to the joints the log names (``[model] joints`` or
    its columns), the others locked (:func:`workbench.models.load`). A
    closed chain (shipped name or closure file) is calibrated from its
    motors' log (``--kind twist``, with ``--inertial`` for the links' phi).
    """
    from workbench import closed_chains, models
    from workbench.calibration.chunked_logs import is_chunked_log
    from workbench.calibration.logs import logged_joints
    from workbench.errors import WorkbenchError

    if closed_chains.is_closed_chain(args.model):
        if args.kind != "twist":
            raise WorkbenchError(
                f"--model {args.model} is a closed chain: only its motors are logged, so it is "
                "calibrated with --kind twist (add --inertial for the links' inertial parameters)"
            )
        model = closed_chains.load(args.model)
        return model, model.motors, model.urdf_path
    joints, locked = (None, {}) if is_chunked_log(args.log) else logged_joints(args.log)
    chain = models.load(args.model, tool_frame=args.tool, moving=True, joints=joints, locked=locked)
    return chain, chain, models.urdf_path(args.model)


def run(args: argparse.Namespace) -> int:
    from dataclasses import replace
    from pathlib import Path

    from workbench.calibration.chunked_logs import is_chunked_log, open_chunked_log
    from workbench.calibration.chunked_report import calibrate_chunked
    from workbench.calibration.drives import read_drive_file, sidecar_path
    from workbench.calibration.kinds import Options, kind
    from workbench.calibration.logs import read_log
    from workbench.calibration.report import calibrate, write_report
    from workbench.calibration.validation import EndSplit, Folds
    from workbench.errors import WorkbenchError, WorkbenchWarning
    from workbench.io import check_not_input, check_output_directory, results_directory
    from workbench.runtime import set_compile_message

    check_output_directory(args.out)
    model_file = args.model if Path(args.model).is_file() else None
    check_not_input(args.out, args.log, model_file, args.validation_log, directory=True)
    _check_numbers(args)
    set_compile_message(not args.quiet)
    spec = kind(args.kind)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", WorkbenchWarning)
        chain, log_chain, urdf = _model(args)
        nominal = None
        drive_file = sidecar_path(urdf)
        if drive_file.is_file():
            nominal = read_drive_file(drive_file, chain.n)[1]
        options = dict(
            drop_bad_rows=args.drop_bad_rows, savgol_window=args.savgol_window,
            progress=not args.quiet,
        )  # fmt: skip
        large = is_chunked_log(args.log)
        if large and args.kind != "dynamic":
            raise WorkbenchError(
                f"--log {args.log}: a Parquet file or a directory of chunks is a large log, "
                f"which --kind dynamic reads chunk by chunk; --kind {args.kind} needs a log "
                "that fits in memory (a CSV or NPZ table, or a log description)"
            )
        if large:
            given = [
                name for name, value in (
                    ("--validation-log", args.validation_log),
                    ("--drop-bad-rows", args.drop_bad_rows),
                ) if value
            ]  # fmt: skip
            if given:
                raise WorkbenchError(
                    f"--log {args.log} is a large log (pre-processed, read chunk by chunk): "
                    f"{', '.join(given)} do(es) not apply; validate on its own folds "
                    "(--folds K or --validation FRACTION)"
                )
            log = open_chunked_log(args.log, log_chain)
        else:
            log = read_log(args.log, log_chain, require=spec.requires, **options)
        if args.validation_log and is_chunked_log(args.validation_log):
            raise WorkbenchError(
                f"--validation-log {args.validation_log}: a second validation log is a table "
                "(CSV, NPZ) or a log description, not a large log (Parquet, a directory)"
            )
        if args.validation_log:
            validation = read_log(args.validation_log, log_chain, require=spec.requires, **options)
        elif args.folds is not None:
            validation = Folds(args.folds)
        elif args.validation is not None:
            validation = EndSplit(args.validation)
        else:
            validation = None
        terms = None
        if args.terms is not None:
            terms = tuple(t.strip() for t in args.terms.split(",") if t.strip())
        gains = None
        if args.payload_log:
            gains = _drive_gains(args, chain, log_chain, log, terms, options, large)
            log = gains.scaled(log)
            if args.validation_log:
                validation = gains.scaled(validation)
        settings = Options(
            loss=args.loss, f_scale=args.f_scale, physical=args.physical, inertial=args.inertial,
            terms=terms, nominal_drives=nominal, rotation_weight=args.rotation_weight,
            parameters=args.parameters, progress=not args.quiet,
        )  # fmt: skip
        if large:
            report = calibrate_chunked(chain, log, validation, settings)
        else:
            report = calibrate(chain, args.kind, log, validation, settings)
        diagnoses = []
        if not large and spec.requires == ("tau",) and log_chain is chain:
            from workbench.calibration.fit_plausibility import diagnose

            diagnoses = diagnose(log, chain, report.chain, nominal)
        if gains is not None:
            report = replace(
                report, summary=report.summary | {"drive_gains": gains.summary()},
                files=report.files | {"drive_gains.toml": gains.scale_text() + "\n"},
            )  # fmt: skip
    messages = [" ".join(str(w.message).split()) for w in caught if w.category is WorkbenchWarning]
    for message in messages:
        print(f"workbench calibrate: warning: {message}", file=sys.stderr)
    messages += [f"implausible fit: {d.message}" for d in diagnoses]  # in the report
    with results_directory(args.out) as stage:
        write_report(stage, report, messages)
    held = report.summary["heldout"]
    after = held["calibrated"]["relative_rms"]
    before = held["nominal"]["relative_rms"]
    print(
        f"{args.kind} calibration of {chain.name}: held-out relative RMS {before:.4g} (nominal) "
        f"-> {after:.4g} (calibrated), {held['scheme']}; results in {Path(args.out)}"
    )
    if diagnoses:
        from workbench.calibration.fit_plausibility import implausible_message
        from workbench.errors import ImplausibleFit

        raise ImplausibleFit(
            f"{implausible_message(log, diagnoses)} (results written for inspection)"
        )
    if not after <= before:
        print(
            "workbench calibrate: the calibrated model predicts the held-out samples worse than "
            "the nominal model; calibration did not help (results written for inspection)",
            file=sys.stderr,
        )
        return 1
    return 0


def _drive_gains(args, chain, log_chain, log, terms, options, large):
    """Drive gains from the log and the --payload-log (:mod:`workbench.calibration.drive_gains`)."""
    from workbench.calibration.drive_gains import identify_drive_gains
    from workbench.calibration.drives import DEFAULT_TERMS, Drives
    from workbench.calibration.logs import read_log
    from workbench.errors import WorkbenchError

    if args.kind != "dynamic" or large:
        raise WorkbenchError(
            f"--payload-log {args.payload_log}: drive gains are identified with --kind dynamic "
            "from logs in memory (a table or a log description)"
        )
    loaded = read_log(args.payload_log, log_chain, require=("tau",), **options)
    if loaded.payload is None:
        raise WorkbenchError(
            f"--payload-log {args.payload_log}: the log names no known payload; describe it in "
            "[model.payload] (link, mass, com, inertia)"
        )
    terms = terms or log.defaults.terms or DEFAULT_TERMS
    drives = Drives(chain.n, tuple(terms), log.transmission, log.min_speed)
    return identify_drive_gains(chain, [log, loaded], drives)


def _check_numbers(args: argparse.Namespace) -> None:
    """Numeric options, checked before any work: positive finite numbers, a fraction."""
    import math

    from workbench.calibration.validation import EndSplit
    from workbench.errors import WorkbenchError

    for option in ("f_scale", "rotation_weight"):
        value = getattr(args, option)
        if value is not None and not (math.isfinite(value) and value > 0):
            raise WorkbenchError(f"--{option.replace('_', '-')} {value} must be positive")
    if args.validation is not None:
        EndSplit(args.validation)  # checks the fraction
