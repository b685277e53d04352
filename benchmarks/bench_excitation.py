"""Experiment design (workbench excite): gradient checks, designs, and what they buy.

Three parts, all in one run (``--part`` selects one):

* ``gradients``: the analytic criterion gradient (d(-log det F)/d theta and d(log cond)/d
  theta) against central differences (step 1e-6) and against CasADi AD of an independent SX
  formulation (``tests/test_excitation_sx.py``: body-frame recursion with symbolic inertias,
  SX Cholesky), max |error| / max |gradient| over all theta components, at a random theta;
  dynamic kind on the iiwa (friction; friction, rotor inertia and offset), twist kind on the
  planar 2R (SX reference) and on the iiwa (central differences).
* ``identification``: on the iiwa and the Staubli TX40, the design of
  ``problems/excite_dynamic.toml`` (time, iterations, log det and condition number of the
  initial random and final trajectory), then a Monte Carlo: a perturbed ground truth
  (inertias moved and scaled by 5 %, friction) logged ``--repeats`` times with torque noise of
  1 % of the effort limits along the optimal trajectory and along ``--random`` random
  trajectories of the same period, harmonics and limits (as large as the limits allow), each
  identified by ``calibrate_dynamic``. Reported: the ratio random / optimal of the RMS error
  of each base parameter (geometric mean and median over the parameters) and the range over
  parameters of observed std / predicted std.
* ``postures``: D-optimal selection of 30 of 2000 random postures of the iiwa (tool position,
  unknown camera frame): time, log det against the best of 20 random selections, and the
  Kiefer-Wolfowitz bound on the D-efficiency.

Run from the repository root: ``python benchmarks/bench_excitation.py [--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def gradients() -> list[dict]:
    import workbench as wb
    from workbench.excitation.experiment import dynamic_information, twist_information
    from workbench.excitation.trajectory import FourierSpace
    from workbench.identification.drives import Drives
    from workbench.testing.excitation_reference import (
        analytic_gradient as _analytic,
    )
    from workbench.testing.excitation_reference import (
        central_gradient as _central,
    )
    from workbench.testing.excitation_reference import (
        criterion_functions,
    )

    rows = []

    def check(label, information, space, points, criterion, twist=False, sx=True):
        theta = 0.3 * np.random.default_rng(0).normal(size=space.size)
        clock = time.perf_counter()
        _, grad = _analytic(information, space, points, theta, criterion)
        seconds = time.perf_counter() - clock
        fd = _central(information, space, points, theta, criterion)
        row = {
            "case": label, "criterion": criterion, "parameters": int(space.size),
            "samples": points, "gradient_seconds": seconds,
            "vs_central": float(np.max(np.abs(grad - fd)) / np.max(np.abs(fd))),
        }  # fmt: skip
        if sx and criterion == "logdet":
            _, g = (
                np.asarray(v).ravel()
                for v in criterion_functions(information, space, points, twist)(theta)
            )
            row["vs_casadi_ad"] = float(np.max(np.abs(grad - g)) / np.max(np.abs(g)))
        rows.append(row)

    iiwa = wb.models.load("iiwa")
    for terms in (("friction",), ("friction", "rotor_inertia", "offset")):
        drives = Drives(iiwa.n, terms, min_speed=np.full(iiwa.n, 0.05))
        info = dynamic_information(iiwa, drives, 0.01 * iiwa.effort_limit)
        space = FourierSpace(iiwa.n, 10.0, 5)
        check(f"dynamic iiwa {'+'.join(terms)}", info, space, 12, "logdet")
    info = dynamic_information(
        iiwa,
        Drives(iiwa.n, ("friction",), min_speed=np.full(iiwa.n, 0.05)),
        0.01 * iiwa.effort_limit,
    )
    check("dynamic iiwa friction", info, FourierSpace(iiwa.n, 10.0, 5), 100, "logdet", sx=False)
    check("dynamic iiwa friction", info, FourierSpace(iiwa.n, 10.0, 5), 100, "condition", sx=False)
    two = wb.models.load("planar_2r")
    info = twist_information(
        two, Drives(2, ("friction",), min_speed=np.full(2, 0.05)), np.full(2, 0.5)
    )
    check("twist planar_2r", info, FourierSpace(2, 4.0, 4), 16, "logdet", twist=True)
    info = twist_information(
        iiwa,
        Drives(iiwa.n, ("friction",), min_speed=np.full(iiwa.n, 0.05)),
        0.01 * iiwa.effort_limit,
    )
    check("twist iiwa", info, FourierSpace(iiwa.n, 10.0, 5), 60, "logdet", sx=False)
    return rows


def identification(repeats: int, randoms: int) -> list[dict]:
    import workbench as wb
    from workbench.excitation.design import TorqueFunction, random_parameters
    from workbench.excitation.experiment import excite, identification_errors
    from workbench.excitation.problem import read_problem
    from workbench.excitation.trajectory import FourierSpace

    rows = []
    for name in ("iiwa", "staubli_tx40"):
        chain = wb.models.load(name)
        problem = read_problem(ROOT / "problems" / "excite_dynamic.toml", chain)
        result = excite(chain, "dynamic", problem)
        d = result.design
        s = problem.trajectory
        space = FourierSpace(chain.n, s.period, s.harmonics)
        limits = problem.limits.limits(chain)
        trajectories = {"optimal": (result.q, result.dq, result.ddq)}
        for k in range(randoms):
            theta = random_parameters(
                space, limits, TorqueFunction(chain), np.random.default_rng(100 + k), 100
            )
            trajectories[f"random{k}"] = space.trajectory(theta).sampled(s.sample_rate, s.periods)[
                1:
            ]
        out = identification_errors(chain, trajectories, result.noise, repeats=repeats)
        rms = {k: np.sqrt(np.mean(v["errors"] ** 2, axis=0)) for k, v in out.items()}
        ratios = [rms[k] / rms["optimal"] for k in trajectories if k != "optimal"]
        match = {k: v["errors"].std(axis=0) / v["predicted"] for k, v in out.items()}
        rows.append({
            "model": name, "parameters": int(rms["optimal"].size), "samples": int(result.t.size),
            "design_seconds": d.seconds, "iterations": d.iterations, "status": d.status,
            "log_det_initial": d.initial["log_det"], "log_det_final": d.log_det,
            "cond_initial": d.initial["condition_number"], "cond_final": d.condition_number,
            "error_ratio_geomean": [float(np.exp(np.mean(np.log(r)))) for r in ratios],
            "error_ratio_median": [float(np.median(r)) for r in ratios],
            "std_match_optimal": [float(match["optimal"].min()), float(match["optimal"].max())],
            "std_match_all": [float(min(m.min() for m in match.values())),
                              float(max(m.max() for m in match.values()))],
            "peak_fraction": {k: float(np.max(v)) for k, v in d.limit_ratios.items()},
        })  # fmt: skip
    return rows


def postures() -> dict:
    import workbench as wb
    from workbench.excitation import postures as po

    chain = wb.models.load("iiwa")
    rng = np.random.default_rng(0)
    q = po.random_postures(chain, 2000, chain.lower + 0.05, chain.upper - 0.05, rng)
    clock = time.perf_counter()
    info = po.posture_information(chain, q, measure="position", device_known=False)
    selection = po.select_postures(info, 30)
    seconds = time.perf_counter() - clock
    random = max(
        np.linalg.slogdet(info.matrix(rng.choice(2000, 30, replace=False)))[1] for _ in range(20)
    )
    return {
        "parameters": info.size, "seconds": seconds, "log_det": selection.log_det,
        "greedy_log_det": selection.greedy_log_det, "best_random_log_det": float(random),
        "upper_bound": selection.upper_bound, "efficiency_bound": selection.efficiency_bound,
        "random_efficiency": float(np.exp((random - selection.log_det) / info.size)),
        "exchanges": selection.exchanges,
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("gradients", "identification", "postures"))
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--random", type=int, default=3, help="random trajectories")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args()
    results: dict = {}
    if args.part in (None, "gradients"):
        results["gradients"] = gradients()
        print(
            "| case | criterion | theta | samples | gradient (s) | vs central differences "
            "| vs CasADi AD |"
        )
        print("|---|---|---|---|---|---|---|")
        for r in results["gradients"]:
            sx = f"{r['vs_casadi_ad']:.1e}" if "vs_casadi_ad" in r else "-"
            print(f"| {r['case']} | {r['criterion']} | {r['parameters']} | {r['samples']} | "
                  f"{r['gradient_seconds']:.3f} | {r['vs_central']:.1e} | {sx} |")  # fmt: skip
    if args.part in (None, "identification"):
        results["identification"] = identification(args.repeats, args.random)
        print(
            "\n| model | base params | design (s) | iterations | log det initial -> final "
            "| cond initial -> final | error ratio random/optimal (geo. mean per random "
            "trajectory) | observed/predicted std (optimal; all) |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for r in results["identification"]:
            ratios = ", ".join(f"{x:.2f}" for x in r["error_ratio_geomean"])
            lo, hi = r["std_match_optimal"]
            lo_all, hi_all = r["std_match_all"]
            print(
                f"| {r['model']} | {r['parameters']} | {r['design_seconds']:.1f} | "
                f"{r['iterations']} | {r['log_det_initial']:.1f} -> {r['log_det_final']:.1f} | "
                f"{r['cond_initial']:.0f} -> {r['cond_final']:.0f} | {ratios} | "
                f"{lo:.2f}-{hi:.2f}; {lo_all:.2f}-{hi_all:.2f} |"
            )
    if args.part in (None, "postures"):
        r = results["postures"] = postures()
        print(
            f"\npostures (iiwa, 30 of 2000, position, unknown camera): {r['parameters']} "
            f"directions, {r['seconds']:.1f} s, log det {r['log_det']:.2f} (greedy "
            f"{r['greedy_log_det']:.2f}, best of 20 random {r['best_random_log_det']:.2f}, bound "
            f"{r['upper_bound']:.2f}); D-efficiency >= {r['efficiency_bound']:.3f}, best random "
            f"selection {r['random_efficiency']:.3f} of the selected"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
