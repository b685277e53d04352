"""Write a synthetic calibration log of a perturbed model along an exciting trajectory.

MODEL is a model name or URDF path. FILE gets the log (CSV, or NPZ with the
suffix .npz); beside it, named after FILE without its suffix, STEM.truth.urdf
(the ground-truth model) and STEM.truth.json (eta, friction, options), so that
a calibration can be compared with the truth: --out results/log.csv writes
results/log.csv, results/log.truth.urdf and results/log.truth.json.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "write a synthetic calibration log (and its ground truth) for trying calibration"
SUFFIXES = (".csv", ".npz")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from workbench.calibration.problems.kind_names import KIND_NAMES

    parser.add_argument("model", metavar="MODEL", help="model name or URDF path")
    parser.add_argument("--out", required=True, metavar="FILE", help="log file (.csv or .npz)")
    parser.add_argument(
        "--kind", default="kinematic", choices=KIND_NAMES,
        help="what is measured: tool positions (kinematic) or joint torques (twist, dynamic)",
    )  # fmt: skip
    parser.add_argument("--tool", metavar="FRAME", help="tool frame (default: the last frame)")
    parser.add_argument(
        "--perturb", type=float, default=1e-2, metavar="SCALE",
        help="how far the truth is from the model: standard deviation of the joint-twist "
        "changes in rad and m (kinematic, twist), relative inertia change (dynamic, below 1)",
    )  # fmt: skip
    parser.add_argument(
        "--noise", type=float, default=0.0, metavar="SIGMA",
        help="measurement noise standard deviation (m for positions, rad for orientations, "
        "N m for torques)",
    )  # fmt: skip
    parser.add_argument(
        "--friction", type=float, default=0.0, metavar="SCALE",
        help="viscous (N m s/rad) and Coulomb (N m) friction scale of the truth",
    )  # fmt: skip
    for option, unit, what in (
        ("stribeck", "N m", "Stribeck friction peaks fst"),
        ("load-friction", "N m per N m", "load-dependent friction fl"),
        ("temperature", "N m s/rad/K and N m/K", "friction slopes fvT, fsT in the temperature"),
    ):
        parser.add_argument(
            f"--{option}", type=float, default=0.0, metavar="SCALE",
            help=f"dynamic: scale of the truth's {what} ({unit}; workbench.identification.drives)",
        )  # fmt: skip
    parser.add_argument(
        "--delay", type=float, default=0.0, metavar="SECONDS",
        help="dynamic: the logged torques lag the positions by this (s)",
    )  # fmt: skip
    parser.add_argument(
        "--samples", type=int, default=2000, metavar="N", help="samples, 100 Hz (at least 20)"
    )
    parser.add_argument("--orientation", action="store_true", help="also log tool orientation")
    parser.add_argument(
        "--seed", type=int, default=0, help="random seed of the trajectory, truth and noise"
    )
    parser.add_argument(
        "--force", action="store_true", help="overwrite FILE (and its truth files) if they exist"
    )


def truth_stem(out: Path) -> Path:
    """FILE without its suffix: where STEM.truth.urdf and STEM.truth.json go."""
    return out.with_suffix("")


def run(args: argparse.Namespace) -> int:
    from workbench import models
    from workbench.calibration.simulation.simulate import drive_truth, simulate_log
    from workbench.io import atomic_write_text, json_text
    from workbench.models.urdf import write_urdf
    from workbench.recordings.log_files import write_log

    out = _check_out(args)
    _check_options(args)
    from workbench import closed_chains

    if closed_chains.is_closed_chain(args.model):
        return _closed(args, out)
    chain = models.load(args.model, tool_frame=args.tool, moving=True)
    drives = None
    if any((args.stribeck, args.load_friction, args.temperature, args.delay)):
        drives = drive_truth(
            chain.n, stribeck=args.stribeck, load_friction=args.load_friction,
            temperature=args.temperature, delay=args.delay, seed=args.seed + 3,
        )  # fmt: skip
    log, truth = simulate_log(
        chain, kind=args.kind, samples=args.samples, perturb=args.perturb, noise=args.noise,
        friction=args.friction, orientation=args.orientation, seed=args.seed, drives=drives,
    )  # fmt: skip
    stem = truth_stem(out)
    write_urdf(truth.chain, f"{stem}.truth.urdf")
    info = {
        "model": args.model,
        "kind": args.kind,
        "tool_frame": chain.tool_name,
        "eta": truth.eta.tolist(),
        "viscous_friction": truth.viscous.tolist(),
        "coulomb_friction": truth.coulomb.tolist(),
        **({} if drives is None else {"drives": _drive_entries(drives)}),
        "perturb": args.perturb,
        "noise": args.noise,
        "samples": args.samples,
        "seed": args.seed,
    }
    atomic_write_text(f"{stem}.truth.json", json_text(info))
    write_log(out, log)
    print(f"wrote {out} ({args.samples} samples, kind {args.kind}), {stem}.truth.urdf/.json")
    return 0


def _drive_entries(drives) -> dict:
    """The further drive terms of the truth, by parameter (per joint) and the delay (s)."""
    return {
        "fst": drives.stribeck.tolist(),
        "stribeck_speed_rad_s": drives.stribeck_speed.tolist(),
        "fl": drives.load_friction.tolist(),
        "fvT": drives.viscous_temperature.tolist(),
        "fsT": drives.coulomb_temperature.tolist(),
        "delay_s": drives.delay,
    }


def _closed(args: argparse.Namespace, out) -> int:
    """A motor-torque log of a perturbed closed chain (a kind that calibrates closed chains)."""
    from workbench import closed_chains
    from workbench.calibration.fitting.closed_chain import (
        require_motor_coordinates,
        simulate_closed_log,
    )
    from workbench.calibration.problems.kinds import KINDS
    from workbench.errors import WorkbenchError
    from workbench.io import atomic_write_text, json_text
    from workbench.models.urdf import write_urdf
    from workbench.recordings.log_files import write_log

    closed = [k.name for k in KINDS.values() if k.closed_chains]
    if args.kind not in closed:
        raise WorkbenchError(
            f"--model {args.model} is a closed chain: only its motors are logged "
            f"(--kind {' or '.join(closed)})"
        )
    model = closed_chains.load(args.model)
    require_motor_coordinates(model)
    log, truth, eta, viscous, coulomb = simulate_closed_log(
        model, samples=args.samples, perturb=args.perturb, noise=args.noise,
        friction=args.friction, seed=args.seed,
    )  # fmt: skip
    stem = truth_stem(out)
    write_urdf(truth.tree, f"{stem}.truth.urdf")
    info = {
        "model": args.model, "kind": args.kind, "eta": eta.tolist(),
        "viscous_friction": viscous.tolist(), "coulomb_friction": coulomb.tolist(),
        "perturb": args.perturb, "noise": args.noise, "samples": args.samples, "seed": args.seed,
    }  # fmt: skip
    atomic_write_text(f"{stem}.truth.json", json_text(info))
    write_log(out, log)
    print(
        f"wrote {out} ({args.samples} samples of the motors {', '.join(model.actuated)}, kind "
        f"{args.kind}), {stem}.truth.urdf/.json"
    )
    return 0


def _check_out(args: argparse.Namespace) -> Path:
    """The log file: a new .csv or .npz (an existing one only with --force), never the model."""
    from workbench.errors import WorkbenchError
    from workbench.io import check_not_input, check_output_file

    out = check_output_file(args.out)
    if out.suffix.lower() not in SUFFIXES:
        raise WorkbenchError(f"--out {out}: the log file must end in .csv or .npz")
    stem = truth_stem(out)
    written = (out, Path(f"{stem}.truth.urdf"), Path(f"{stem}.truth.json"))
    model = args.model if Path(args.model).is_file() else None
    for path in written:
        check_not_input(
            path, model, option="--out" if path == out else f"--out {out}: the truth file"
        )
    existing = [str(p) for p in written if p.exists()]
    if existing and not args.force:
        raise WorkbenchError(
            f"--out {out}: {', '.join(existing)} exist(s); give --force to overwrite a recording"
        )
    return out


def _check_options(args: argparse.Namespace) -> None:
    """Numbers the simulation can use: finite, non-negative, enough samples."""
    import math

    from workbench.errors import WorkbenchError

    for option in ("perturb", "noise", "friction", "stribeck", "load_friction", "temperature"):
        value = getattr(args, option)
        if not (math.isfinite(value) and value >= 0):
            flag = option.replace("_", "-")
            raise WorkbenchError(f"--{flag} {value}: must be a finite number, 0 or more")
    if not math.isfinite(args.delay):
        raise WorkbenchError(f"--delay {args.delay}: must be a finite number of seconds")
    further = [o for o in ("stribeck", "load_friction", "temperature", "delay") if getattr(args, o)]
    if further and args.kind != "dynamic":
        raise WorkbenchError(
            f"--{further[0].replace('_', '-')}: further drive terms are simulated for the "
            "dynamic kind only (--kind dynamic)"
        )
    if args.kind == "dynamic" and args.perturb >= 1:
        raise WorkbenchError(
            f"--perturb {args.perturb}: the dynamic kind scales inertias by 1 +- perturb, "
            "so it must be below 1 (masses stay positive)"
        )
    if args.seed < 0:
        raise WorkbenchError(f"--seed {args.seed}: must be 0 or more")
    if args.samples < 20:
        raise WorkbenchError(f"--samples {args.samples}: need at least 20")
