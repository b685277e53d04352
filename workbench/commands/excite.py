"""Design an experiment for calibration: an optimal excitation trajectory (dynamic, twist) or
D-optimal calibration postures (kinematic).

MODEL is a model name (see `workbench info`) or a URDF path. PROBLEM is an optional
problem file (TOML; problems/excite_dynamic.toml, excite_twist.toml and
excite_kinematic.toml are the defaults, documented key by key in
workbench.excitation.problem): trajectory period and harmonics, drive terms,
torque noise, limits, criterion ("logdet" or "condition"), postures.

dynamic: a periodic Fourier trajectory, at rest at its start and end, that maximises
log det of the information matrix of the base inertial parameters and the drive terms,
within joint position, velocity, acceleration and torque limits (CasADi/IPOPT, exact
gradients). twist: the same for the joint-twist directions the torques determine
(d tau / d eta), with the drive terms (and the inertial parameters with inertial = true).
kinematic: N postures out of random (or given) candidates, D-optimal for the joint
twists, device and marker frames of a position or pose measurement, with a bound on
the gap to the best possible selection.

Writes DIR/summary.json (criterion, condition number, per-parameter predicted std for
the stated noise), the trajectory DIR/trajectory.csv and .npz (columns t, q_, dq_,
ddq_<joint>, at the problem's sample rate) or DIR/postures.csv, plots against the
limits (PNG), DIR/animation.html (meshcat) and DIR/report.html (the summary's figures,
warnings, plots and animation in one self-contained page: open it first). Exit code 2 on
bad input, infeasible limits or too few postures to determine every direction, with
nothing written. Once the inputs are read, one line on stderr says what is being designed
(--quiet: none).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

HELP = "design an optimal excitation trajectory or calibration postures"

KINDS = ("dynamic", "twist", "kinematic")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, metavar="MODEL", help="model name or URDF path")
    parser.add_argument(
        "--kind", required=True, metavar="{dynamic,twist,kinematic}",
        help="what the experiment identifies",
    )  # fmt: skip
    parser.add_argument("--out", required=True, metavar="DIR", help="results directory")
    parser.add_argument("problem", nargs="?", metavar="PROBLEM", help="problem file (TOML)")
    parser.add_argument(
        "--quiet", action="store_true",
        help="no progress line (what is being designed) and no compile line on stderr",
    )  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench import models
    from workbench.errors import WorkbenchError
    from workbench.excitation.problem import model_joints, read_problem
    from workbench.io import check_not_input, check_output_directory, results_directory
    from workbench.runtime import set_compile_message

    set_compile_message(not args.quiet)
    if args.kind not in KINDS:
        raise WorkbenchError(f"--kind {args.kind!r} is not one of {', '.join(KINDS)}")
    check_output_directory(args.out)
    model_file = args.model if Path(args.model).is_file() else None
    check_not_input(args.out, args.problem, model_file, directory=True)
    if args.problem is not None and not Path(args.problem).is_file():
        raise WorkbenchError(f"problem file not found: {args.problem}")
    joints, locked = model_joints(args.problem)
    chain = models.load(args.model, joints=joints, locked=locked)
    problem = read_problem(args.problem, chain, args.kind)
    if problem.postures.tool is not None and args.kind == "kinematic":
        chain = models.load(args.model, problem.postures.tool, joints=joints, locked=locked)
    if not args.quiet:
        print(f"workbench excite: {_doing(args.kind, args.model, problem)}...", file=sys.stderr,
              flush=True)  # fmt: skip
    from workbench.excitation.experiment import excite  # after the line: 1 s of imports
    from workbench.excitation.report import solver_warning, write_results

    result = excite(chain, args.kind, problem, models.urdf_path(args.model))
    with results_directory(args.out) as stage:
        write_results(stage, result, args.model)
    p = result.prediction
    if args.kind == "kinematic":
        s = result.selection
        print(
            f"kinematic: {result.q.shape[0]} postures of {result.information.q.shape[0]} "
            f"candidates, log det {s.log_det:.4g} (random selection {result.initial.log_det:.4g}),"
            f" D-efficiency >= {s.efficiency_bound:.3f}; results in {args.out}"
        )
    else:
        d, p0 = result.design, result.initial
        print(
            f"{args.kind}: criterion at {d.collocation} collocation points: log det "
            f"{d.initial['log_det']:.4g} -> {d.log_det:.4g}, condition number "
            f"{d.initial['condition_number']:.4g} -> {d.condition_number:.4g} ({d.status}, "
            f"{d.iterations} iterations, {d.seconds:.1f} s); written trajectory "
            f"({p.samples} samples): log det {p0.log_det:.4g} -> {p.log_det:.4g}, condition "
            f"number {p0.condition_number:.4g} -> {p.condition_number:.4g}, {_precision(p)}; "
            f"results in {args.out}"
        )
        warning = solver_warning(result)
        if warning is not None:
            print(f"workbench excite: warning: {warning}", file=sys.stderr)
            return 1
    return 0


def _doing(kind: str, model: str, problem) -> str:
    """What the design does, in a few words, for the progress line."""
    if kind == "kinematic":
        settings = problem.postures
        candidates = settings.candidates
        source = f"{candidates} random" if isinstance(candidates, int) else f"the file {candidates}"
        return f"choosing {settings.count} postures of {model} from {source} candidates"
    design = problem.design
    return (
        f"designing a {kind} excitation trajectory of {model} with IPOPT ({design.collocation} "
        f"collocation points, up to {design.max_iterations} iterations per start, "
        f"{design.starts} start(s))"
    )


def _precision(p) -> str:
    """The median predicted relative std, saying which parameters have none (nominal 0)."""
    relative = p.relative_std[np.isfinite(p.relative_std)]
    if not relative.size:
        return (
            f"predicted median std {float(np.median(p.std)):.3g} (no relative std: every "
            "nominal value is 0)"
        )
    zero = p.relative_std.size - relative.size
    text = f"predicted median relative std {float(np.median(relative)):.3g} %"
    if zero:
        text += f" ({zero} of {p.relative_std.size} parameters have nominal 0: no relative std)"
    return text
