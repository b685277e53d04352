"""Identify a payload (gripper, tool, held object) carried by one link, or design the motion that
identifies it best.

identify: the mass, centre of mass and inertia of a body rigidly attached to
LINK (in LINK's frame) from a torque log of the robot carrying it; the robot's
own model is kept as it is (its URDF inertias and, from the drive file beside
the URDF (ROBOT.drives.toml) or --drives FILE, its friction, rotor inertia and
offsets). LOG is a table (CSV/NPZ: t, q_<joint> [dq_, ddq_], tau_<joint>) or a
log description (.toml); a known payload in the description ([model.payload])
is taken off first. The estimate is weighted least squares kept physically
consistent (positive definite pseudo-inertia), with standard deviations from
the residual variance. Writes DIR/payload.json (mass, COM, inertia about the
COM with their stds, phi and its covariance), DIR/payload.urdf (a fixed joint
and link to paste into the robot's URDF), DIR/payload.toml (the
[model.payload] table of a log description), DIR/summary.json,
DIR/torques.png and DIR/report.html. With --link naming a frame fixed to a link
(a flange), payload.json and payload.urdf are in that frame, payload.toml in
the link's.

excite: a short periodic motion of the chosen --joints only (the others hold
--posture, by default the D-optimal one of 200 random postures that keeps every link
above the first joint; the motion starts and ends there at rest) that maximises log det
of the information of the payload's 10 parameters within position, velocity,
acceleration and torque limits (IPOPT). Limits, design settings and the
torque noise come from an optional --problem file (the format of `workbench
excite`, problems/excite_dynamic.toml); the options set the trajectory. Writes
DIR/trajectory.csv (t, q_, dq_, ddq_<joint> at --rate), DIR/summary.json
(predicted stds of the designed and of a random motion of the same length and
limits), DIR/limits.png, DIR/precision.png and DIR/report.html. Once the options are
read, one line on stderr says what is being designed (--quiet: none).

Exit code 2 on bad input, with nothing written.
"""

from __future__ import annotations

import argparse
import re
import sys
import warnings

HELP = "identify a payload carried by a link, or design its exciting motion"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(
        dest="action", required=True, metavar="ACTION", help="identify or excite"
    )
    identify = actions.add_parser(
        "identify", help="identify the payload from a torque log",
        formatter_class=parser.formatter_class,
    )  # fmt: skip
    _common(identify)
    identify.add_argument("--log", required=True, metavar="FILE", help="log table or description")
    drives = identify.add_mutually_exclusive_group()
    drives.add_argument(
        "--drives", metavar="FILE",
        help="the robot's drive file (default: ROBOT.drives.toml beside the URDF, if any)",
    )  # fmt: skip
    drives.add_argument(
        "--no-drives", action="store_true", help="no drive terms (torques of the rigid bodies)"
    )
    identify.add_argument("--drop-bad-rows", action="store_true", help="skip (and count) bad rows")
    identify.add_argument(
        "--savgol-window", type=int, metavar="N",
        help="Savitzky-Golay window when a table logs no dq (default: the odd number of "
        "samples spanning 0.1 s, at least 11)",
    )  # fmt: skip
    identify.add_argument("--quiet", action="store_true", help="no compile message on stderr")
    excite = actions.add_parser(
        "excite", help="design the motion that identifies the payload best",
        formatter_class=parser.formatter_class,
    )  # fmt: skip
    _common(excite)
    excite.add_argument(
        "--joints", required=True, metavar="LIST",
        help="the joints that move, comma separated: names or numbers from 1 (e.g. 5,6,7)",
    )  # fmt: skip
    excite.add_argument(
        "--posture", metavar="LIST",
        help="hold posture, one value per joint (rad or m; default: the D-optimal one of 200 "
        "random postures with nothing below the first joint)",
    )  # fmt: skip
    excite.add_argument("--duration", type=float, default=10.0, metavar="S", help="motion length")
    excite.add_argument("--harmonics", type=int, default=5, metavar="L", help="Fourier harmonics")
    excite.add_argument(
        "--rate", type=float, default=100.0, metavar="HZ", help="sample rate of trajectory.csv"
    )
    excite.add_argument(
        "--mass", type=float, default=1.0, metavar="KG",
        help="expected payload mass, for the predicted std of its centre of mass",
    )  # fmt: skip
    excite.add_argument("--problem", metavar="FILE", help="limits, design and noise (TOML)")
    excite.add_argument(
        "--quiet", action="store_true",
        help="no progress line (what is being designed) and no compile line on stderr",
    )  # fmt: skip


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, metavar="MODEL", help="model name or URDF path")
    parser.add_argument(
        "--link", metavar="LINK",
        help="the link carrying the payload, or a frame fixed to it (e.g. a flange): the "
        "results are in its frame (default: the last link)",
    )  # fmt: skip
    parser.add_argument("--out", required=True, metavar="DIR", help="results directory")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench.io import check_not_input, check_output_directory

    check_output_directory(args.out)
    model_file = args.model if Path(args.model).is_file() else None
    inputs = [getattr(args, name, None) for name in ("log", "drives", "problem")]
    check_not_input(args.out, model_file, *inputs, directory=True)
    return _identify(args) if args.action == "identify" else _excite(args)


def _identify(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    import numpy as np

    from workbench import models
    from workbench.calibration.fitting.payload import (
        expressed_in,
        fit_payload,
        frame_on_link,
        payload_equations,
        payload_fields,
        payload_table,
        urdf_snippet,
    )
    from workbench.errors import WorkbenchError, WorkbenchWarning
    from workbench.identification.consistency import DELTA
    from workbench.identification.drives import read_drive_file, sidecar_path
    from workbench.io import atomic_write_text, json_text, results_directory
    from workbench.recordings.log_files import logged_joints, read_log
    from workbench.runtime import set_compile_message
    from workbench.viz.payload_plots import plot_payload_torques
    from workbench.viz.report_page import write_report_page

    set_compile_message(not args.quiet)
    clock = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", WorkbenchWarning)
        joints, locked, held = logged_joints(args.log, models.movable_joints(args.model))
        chain = models.load(args.model, moving=True, joints=joints, locked=locked, held=held)
        link = args.link or chain.link_names[-1]
        k, placement = frame_on_link(chain, link)
        drives = values = None
        drive_file = (
            Path(args.drives) if args.drives else sidecar_path(models.urdf_path(args.model))
        )
        if args.drives and not drive_file.is_file():
            raise WorkbenchError(f"--drives {args.drives}: no such file")
        if not args.no_drives and drive_file.is_file():
            drives, values = read_drive_file(drive_file, chain.n)
        else:
            drive_file = None
        options = dict(require=("tau",), drop_bad_rows=args.drop_bad_rows)
        window = args.savgol_window or 11
        log = read_log(args.log, chain, savgol_window=window, **options)
        table = Path(args.log).suffix.lower() != ".toml"  # a description filters by itself
        if table and args.savgol_window is None and log.differentiated:  # about 0.1 s
            span = 2 * round(0.05 / float(np.median(np.diff(log.t)))) + 1
            span = min(span, len(log) - 1 + len(log) % 2)
            if span > window:
                window = span
                log = read_log(args.log, chain, savgol_window=window, **options)
        equations = payload_equations(chain, log, k, drives, values)
        fit_link = fit_payload(equations, chain.link_names[k])
        fit = fit_link if link == fit_link.link else expressed_in(fit_link, link, placement)
    held_still = re.compile(r"\('q_[^']*'\) is constant")  # joints held still: expected here
    messages = list(
        dict.fromkeys(  # once each (a table may be read twice)
            " ".join(str(w.message).split())
            for w in caught
            if w.category is WorkbenchWarning and not held_still.search(str(w.message))
        )
    )
    for message in messages:
        print(f"workbench payload: warning: {message}", file=sys.stderr)
    fields = payload_fields(fit)
    fitted = equations.Y @ fit_link.phi
    summary = {
        "model": args.model,
        "log": str(args.log),
        "link": link,
        "drive_file": None if drive_file is None else str(drive_file),
        "samples": len(log),
        "savgol_window": window if table and log.differentiated else None,
        "equations": fit.rows,
        "duration_s": float(log.t[-1] - log.t[0]),
        "mass_kg": fields["mass_kg"],
        "mass_std_kg": fields["mass_std_kg"],
        "com_m": fields["com_m"],
        "com_std_m": fields["com_std_m"],
        "residual_rms_N_m": {
            "robot_only": fit.sigma_robot.tolist(),
            "with_payload": fit.sigma.tolist(),
        },
        "condition_number": fit.condition_number,
        "consistency_constraint_active": fit.constrained,
        "consistency": f"pseudo-inertia L L^T + {DELTA:g} 1 (Cholesky parametrisation)",
        "seconds": time.perf_counter() - clock,
    }
    psi, std = fit.com_form, fit.com_std
    rows = [
        ("model", args.model), ("log", str(args.log)), ("link (frame)", link),
        ("mass", f"{psi[0]:.6g} ± {std[0]:.2g} kg"),
        ("centre of mass", _vector_mm(psi[1:4], std[1:4])),
        ("inertia about the COM (Ixx, Iyy, Izz, Ixy, Ixz, Iyz)",
         ", ".join(f"{v:.4g} ± {s:.2g}" for v, s in zip(psi[4:], std[4:], strict=True))
         + " kg m^2"),
        ("torque residual RMS, robot only [N m]", _numbers(fit.sigma_robot)),
        ("torque residual RMS, with the payload [N m]", _numbers(fit.sigma)),
        ("equations", fit.rows),
        ("consistency constraint active", "yes" if fit.constrained else "no"),
        ("drive file", summary["drive_file"] or "none"),
    ]  # fmt: skip
    with results_directory(args.out) as stage:
        atomic_write_text(stage / "payload.json", json_text(fields))
        atomic_write_text(stage / "payload.urdf", urdf_snippet(fit.phi, link))
        atomic_write_text(stage / "payload.toml", payload_table(fit_link.phi, fit_link.link))
        atomic_write_text(stage / "summary.json", json_text(summary))
        image = plot_payload_torques(
            stage / "torques.png", equations.t, equations.y, fitted, chain.joint_names
        )
        write_report_page(
            stage / "report.html", f"payload on {link} of {chain.name}", rows, [image],
            warnings=messages,
        )  # fmt: skip
    print(
        f"payload on {link}: mass {psi[0]:.4g} ± {std[0]:.2g} kg, centre of mass "
        f"{_vector_mm(psi[1:4], std[1:4])} ({fit.rows} equations); results in {Path(args.out)}"
    )
    return 0


def _excite(args: argparse.Namespace) -> int:
    from pathlib import Path

    import numpy as np

    from workbench import models
    from workbench.errors import WorkbenchError
    from workbench.excitation.problem import read_problem
    from workbench.runtime import set_compile_message

    set_compile_message(not args.quiet)
    for option in ("duration", "rate", "mass"):
        value = getattr(args, option)
        if not (np.isfinite(value) and value > 0):
            raise WorkbenchError(f"--{option} {value} must be a positive number")
    if args.harmonics < 3:
        raise WorkbenchError(f"--harmonics {args.harmonics}: rest at start and end needs 3 or more")
    if args.problem is not None and not Path(args.problem).is_file():
        raise WorkbenchError(f"--problem {args.problem}: no such file")
    chain = models.load(args.model, moving=True)
    problem = read_problem(args.problem, chain)
    limits = problem.limits.limits(chain, f"{problem.source}: [limits]")
    link = args.link or chain.link_names[-1]
    joints = [j.strip() for j in args.joints.split(",") if j.strip()]
    if args.posture is not None:
        posture = _floats(args.posture, chain.n, "--posture")
    if not args.quiet:
        print(
            f"workbench payload: designing the motion of joints {', '.join(joints)} for a "
            f"payload on {link} of {args.model} ({args.duration:g} s, IPOPT, up to "
            f"{problem.design.max_iterations} iterations per start)...",
            file=sys.stderr, flush=True,
        )  # fmt: skip
    from workbench.calibration.fitting.payload import COM_NAMES
    from workbench.excitation.payload import design_payload_excitation, hold_posture
    from workbench.io import atomic_write_text, json_text, results_directory
    from workbench.recordings.log import Log
    from workbench.recordings.log_files import write_log  # after the line: 1 s of imports
    from workbench.viz import excitation_plots as plots
    from workbench.viz.report_page import write_report_page

    if args.posture is None:
        posture = hold_posture(chain, link, joints, limits, problem.noise(chain))
    result = design_payload_excitation(
        chain, link, joints, posture, limits, problem.noise(chain), duration=args.duration,
        harmonics=args.harmonics, sample_rate=args.rate, options=problem.design,
    )  # fmt: skip
    expected = np.zeros(10)
    expected[0] = args.mass
    designed, random = result.prediction.com_std(expected), result.random.com_std(expected)
    d = result.design
    summary = {
        "model": args.model,
        "link": link,
        "moving_joints": [chain.joint_names[j] for j in result.held.moving],
        "posture": posture.tolist(),
        "posture_chosen": args.posture is None,
        "duration_s": args.duration,
        "sample_rate_hz": args.rate,
        "samples": int(result.t.size),
        "noise_N_m": result.sigma.tolist(),
        "log_det": {"designed": result.prediction.log_det, "random": result.random.log_det},
        "predicted_std": {
            "note": f"for a payload of {args.mass} kg with its COM near the link frame's origin",
            "designed": dict(zip(COM_NAMES, designed.tolist(), strict=True)),
            "random": dict(zip(COM_NAMES, random.tolist(), strict=True)),
        },
        "peak_fraction_of_limits": {
            **{key: value.tolist() for key, value in d.limit_ratios.items()},
            "torque_all_joints": result.held_torque_ratio.tolist(),
        },
        "solver": {"status": d.status, "iterations": d.iterations, "seconds": d.seconds},
    }
    names = chain.joint_names
    with results_directory(args.out) as stage:
        log = Log(
            t=result.t, q=result.q, dq=result.dq, ddq=result.ddq, joint_names=names,
            source="<payload excitation>",
        )  # fmt: skip
        write_log(stage / "trajectory.csv", log)
        atomic_write_text(stage / "summary.json", json_text(summary))
        lim = limits
        series = {"q": result.q, "dq": result.dq, "ddq": result.ddq, "tau": result.tau}
        lower = {"q": lim.lower, "dq": -lim.velocity, "ddq": -lim.acceleration, "tau": -lim.torque}
        upper = {"q": lim.upper, "dq": lim.velocity, "ddq": lim.acceleration, "tau": lim.torque}
        images = [
            plots.plot_limits(stage / "limits.png", result.t, series, lower, upper, names),
            plots.plot_precision(
                stage / "precision.png", COM_NAMES, designed, random,
                ylabel="predicted std [kg, m, kg m^2]",
                title="Predicted precision: designed vs random motion",
            ),
        ]  # fmt: skip
        rows = [
            ("model", args.model), ("link", link),
            ("moving joints", ", ".join(summary["moving_joints"])),
            ("duration", f"{args.duration:g} s at {args.rate:g} Hz"),
            ("log det F: designed / random", f"{result.prediction.log_det:.4g} / "
             f"{result.random.log_det:.4g}"),
            ("mass std: designed / random", f"{designed[0]:.3g} / {random[0]:.3g} kg"),
            ("COM std: designed / random", f"{1e3 * np.linalg.norm(designed[1:4]):.3g} / "
             f"{1e3 * np.linalg.norm(random[1:4]):.3g} mm"),
            ("IPOPT", f"{d.status}, {d.iterations} iterations, {d.seconds:.1f} s"),
        ]  # fmt: skip
        write_report_page(
            stage / "report.html", f"payload excitation for {link} of {chain.name}", rows, images
        )
    print(
        f"payload excitation of {', '.join(summary['moving_joints'])}: log det "
        f"{result.random.log_det:.4g} (random) -> {result.prediction.log_det:.4g}, mass std "
        f"{designed[0]:.3g} kg, COM std {1e3 * np.linalg.norm(designed[1:4]):.3g} mm for "
        f"{args.mass:g} kg; results in {Path(args.out)}"
    )
    return 0


def _floats(text: str, n: int, option: str):
    import numpy as np

    from workbench.errors import WorkbenchError

    try:
        values = np.array([float(v) for v in text.split(",")])
    except ValueError:
        raise WorkbenchError(f"{option} {text!r}: not a comma-separated list of numbers") from None
    if values.shape != (n,) or not np.all(np.isfinite(values)):
        raise WorkbenchError(f"{option} {text!r}: needs {n} finite numbers, one per joint")
    return values


def _vector_mm(value, std) -> str:
    return (
        "("
        + ", ".join(f"{1e3 * v:.4g} ± {1e3 * s:.2g}" for v, s in zip(value, std, strict=True))
        + ") mm"
    )


def _numbers(values) -> str:
    return ", ".join(f"{v:.3g}" for v in values)
