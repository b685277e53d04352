"""Write a synthetic calibration log of a perturbed model along an exciting trajectory.

MODEL is a model name or URDF path. FILE gets the log (CSV, or NPZ by suffix);
beside it FILE.truth.urdf (the ground-truth model) and FILE.truth.json (eta,
friction, options), so that a calibration can be compared with the truth.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HELP = "write a synthetic calibration log (and its ground truth) for trying calibration"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from workbench.calibration.kinds import KINDS

    parser.add_argument("model", metavar="MODEL", help="model name or URDF path")
    parser.add_argument("--out", required=True, metavar="FILE", help="log file (.csv or .npz)")
    parser.add_argument("--kind", default="kinematic", choices=tuple(KINDS))
    parser.add_argument("--tool", metavar="FRAME", help="tool frame (default: the last frame)")
    parser.add_argument("--perturb", type=float, default=1e-2, metavar="SCALE")
    parser.add_argument("--noise", type=float, default=0.0, metavar="SIGMA")
    parser.add_argument("--friction", type=float, default=0.0, help="friction scale (N m)")
    parser.add_argument("--samples", type=int, default=2000, metavar="N")
    parser.add_argument("--orientation", action="store_true", help="also log tool orientation")
    parser.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    from workbench import models
    from workbench.calibration.logs import write_log
    from workbench.calibration.simulate import simulate_log
    from workbench.errors import WorkbenchError
    from workbench.io import atomic_write_text
    from workbench.urdf import write_urdf

    if args.samples < 20:
        raise WorkbenchError(f"--samples {args.samples}: need at least 20")
    chain = models.load(args.model, tool_frame=args.tool)
    log, truth = simulate_log(
        chain, kind=args.kind, samples=args.samples, perturb=args.perturb, noise=args.noise,
        friction=args.friction, orientation=args.orientation, seed=args.seed,
    )  # fmt: skip
    out = Path(args.out)
    stem = out.with_suffix("")
    write_urdf(truth.chain, f"{stem}.truth.urdf")
    info = {
        "model": args.model,
        "kind": args.kind,
        "tool_frame": chain.tool_name,
        "eta": truth.eta.tolist(),
        "viscous_friction": truth.viscous.tolist(),
        "coulomb_friction": truth.coulomb.tolist(),
        "perturb": args.perturb,
        "noise": args.noise,
        "samples": args.samples,
        "seed": args.seed,
    }
    atomic_write_text(f"{stem}.truth.json", json.dumps(info, indent=2) + "\n")
    write_log(out, log)
    print(f"wrote {out} ({args.samples} samples, kind {args.kind}), {stem}.truth.urdf/.json")
    return 0
