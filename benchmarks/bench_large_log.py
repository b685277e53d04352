"""Dynamic identification of a 10-million-sample log in bounded memory, and the in-memory fit.

    python benchmarks/bench_large_log.py [--samples 10000000] [--subset 1000000]
        [--model staubli_tx40] [--dir /tmp/workbench-large-log] [--keep]

1. Writes a synthetic log of ``--samples`` samples (1 kHz) chunk by chunk into
   one Parquet file (row groups of 250,000 samples): a sum-of-sines exciting
   trajectory, the torques of a perturbed ground truth with viscous and
   Coulomb friction and 0.5 N m noise (``workbench.dynamics``); its first
   ``--subset`` samples also as ``subset.parquet`` and as ``subset.npz`` (the
   in-memory reader's table).
2. In fresh processes (peak memory is each process's own ``ru_maxrss``):
   ``workbench calibrate --kind dynamic --folds 5`` on the whole log (the
   report written to disk); the chunked and
   the in-memory fit (``calibrate_dynamic``, Gautier's two-step WLS with
   friction) of the subset.
3. Compares the subset's two fits: ``|beta_c - beta_m| / |beta_m|``, the
   largest difference per parameter in the torque it explains (``beta_i
   |X_i|``) relative to the largest, and per parameter relative to its value.

The in-memory fit of the subset needs about 14 KB per sample (1M samples of a
6-joint robot: ~14 GB); it is skipped, with a message, when the machine has
less memory available than that.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from timing import machine

CHUNK = 250_000
DT = 1e-3


# ----------------------------------------------------------------- the log
def synthetic_log(model: str, seed: int = 0, noise: float = 0.5):
    """The synthetic log of ``model`` (module docstring, step 1): its perturbed ground truth
    and ``columns(start, m)``, the dict of columns (``t``, ``q_J``, ``dq_J``, ``ddq_J``,
    ``tau_J``) of samples ``start`` to ``start + m``; ``noise`` N m is the torque noise's
    standard deviation."""
    import workbench as wb
    from workbench.calibration.simulation.simulate import perturbed_truth
    from workbench.dynamics.inverse_dynamics import inverse_dynamics

    chain = wb.models.load(model, moving=True)
    truth = perturbed_truth(chain, "dynamic", 0.05, friction=0.5, seed=seed + 1)
    rng = np.random.default_rng(seed)
    harmonics = 5
    lower, upper = np.maximum(chain.lower, -np.pi), np.minimum(chain.upper, np.pi)
    centre, half = (upper + lower) / 2, 0.8 * (upper - lower) / 2
    w = 2 * np.pi * 0.1 * (1.0 + np.arange(harmonics))  # rad/s: 0.1 ... 0.5 Hz
    amp = rng.uniform(-1, 1, (chain.n, harmonics)) / (1.0 + np.arange(harmonics))
    amp *= half[:, None] / np.abs(amp).sum(axis=1, keepdims=True)
    amp *= np.minimum(1.0, 0.9 * chain.velocity_limit / (np.abs(amp) @ w))[:, None]
    phase = rng.uniform(0, 2 * np.pi, (chain.n, harmonics))

    def columns(start: int, m: int) -> dict:
        t = DT * (start + np.arange(m))
        arg = t[:, None, None] * w + phase
        q = centre + np.einsum("nk,snk->sn", amp, np.sin(arg))
        dq = np.einsum("nk,snk->sn", amp * w, np.cos(arg))
        ddq = -np.einsum("nk,snk->sn", amp * w**2, np.sin(arg))
        tau = inverse_dynamics(truth.chain, q, dq, ddq)
        tau += truth.viscous * dq + truth.coulomb * np.sign(dq)
        tau += np.random.default_rng([seed, start]).normal(scale=noise, size=tau.shape)
        named = {"t": t}
        for prefix, block in (("q", q), ("dq", dq), ("ddq", ddq), ("tau", tau)):
            for i, joint in enumerate(chain.joint_names):
                named[f"{prefix}_{joint}"] = block[:, i]
        return named

    return truth, columns


def generate(model: str, folder: Path, samples: int, subset: int, seed: int = 0) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    truth, columns = synthetic_log(model, seed)
    folder.mkdir(parents=True, exist_ok=True)
    whole, part = folder / "log.parquet", folder / "subset.parquet"
    kept: list[dict] = []
    started = time.perf_counter()
    schema = pa.schema([(name, pa.float64()) for name in columns(0, 1)])
    with pq.ParquetWriter(whole, schema) as writer, pq.ParquetWriter(part, schema) as first:
        for start in range(0, samples, CHUNK):
            named = columns(start, min(CHUNK, samples - start))
            table = pa.table(named, schema=schema)
            writer.write_table(table, row_group_size=CHUNK)
            if start < subset:
                rows = min(len(named["t"]), subset - start)
                first.write_table(table.slice(0, rows), row_group_size=CHUNK)
                kept.append({k: v[:rows] for k, v in named.items()})
    np.savez(
        folder / "subset.npz", **{k: np.concatenate([c[k] for c in kept]) for k in schema.names}
    )
    return {
        "seconds": time.perf_counter() - started,
        "bytes": whole.stat().st_size,
        "truth_viscous": truth.viscous.tolist(),
        "truth_coulomb": truth.coulomb.tolist(),
    }


# --------------------------------------------------- runs in fresh processes
def identify(kind: str, model: str, path: str, out: str | None) -> dict:
    """One identification in this process; its time and this process's peak memory."""
    import workbench as wb
    from workbench.calibration.fitting.dynamic import fit_equations, torque_equations
    from workbench.calibration.fitting.normal_equations import accumulate
    from workbench.identification.drives import Drives
    from workbench.identification.torque_model import TorqueModel, base_parameters
    from workbench.warm_up import warm_up

    warm_up()
    chain = wb.models.load(model, moving=True)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()
    result: dict = {"kind": kind}
    if kind == "report":  # the command line on the large log, 5 folds
        from workbench.cli import main

        command = ["calibrate", "--model", model, "--log", path, "--kind", "dynamic"]
        code = main([*command, "--folds", "5", "--out", out, "--quiet"])
        summary = json.loads((Path(out) / "summary.json").read_text())
        result["exit_code"] = code
        result["heldout_relative_rms"] = summary["heldout_relative_rms"]
        result["nominal_relative_rms"] = summary["heldout"]["nominal"]["relative_rms"]
        result["rows_fitted"] = summary["equations"]["rows_fitted"]
    else:
        if kind == "chunked":
            from workbench.recordings.chunked_logs import open_chunked_log

            log = open_chunked_log(path, chain)
        else:
            from workbench.recordings.log_files import read_log

            log = read_log(path, chain, require=("tau",))
        model_ = TorqueModel(chain, Drives(chain.n))
        base = base_parameters(model_)
        if kind == "chunked":
            equations = accumulate(model_, base, log)
        else:
            equations = torque_equations(model_, base, log)
        fit = fit_equations(model_, base, equations, x0=model_.values())
        result["beta"] = fit.beta.tolist()
        result["std"] = fit.std.tolist()
        result["rows_fitted"] = fit.rows
        if kind == "chunked":  # column norms of the regressor, for the per-parameter figure
            R, _ = equations.merged()
            r = R.shape[2] - 1
            result["column_norms"] = np.sqrt(np.sum(R[:, :, :r] ** 2, axis=(0, 1))).tolist()
    result["seconds"] = time.perf_counter() - started
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    result["rss_before_mb"] = base_rss
    return result


def run_child(kind: str, model: str, path: Path, out: Path | None = None) -> dict:
    command = [sys.executable, __file__, "--child", kind, "--model", model, "--path", str(path)]
    if out is not None:
        command += ["--out", str(out)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{kind} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def available_mb() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000_000)
    parser.add_argument("--subset", type=int, default=1_000_000)
    parser.add_argument("--model", default="staubli_tx40")
    parser.add_argument("--dir", default="/tmp/workbench-large-log")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--json", help="write every number to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(identify(args.child, args.model, args.path, args.out)))
        return 0

    folder = Path(args.dir)
    print(machine(), file=sys.stderr)
    made = generate(args.model, folder, args.samples, args.subset)
    gb = made["bytes"] / 1e9
    print(f"wrote {args.samples} samples ({gb:.2f} GB) in {made['seconds']:.0f} s", file=sys.stderr)
    figures = {"model": args.model, "samples": args.samples, "subset": args.subset, "log": made}
    try:
        big = run_child("report", args.model, folder / "log.parquet", folder / "results")
        figures["large"] = {k: v for k, v in big.items() if k != "beta"}
        print(f"large log: {json.dumps(figures['large'])}", file=sys.stderr)
        small_c = run_child("chunked", args.model, folder / "subset.parquet")
        print(f"subset, chunked: {small_c['seconds']:.1f} s, {small_c['peak_rss_mb']:.0f} MB",
              file=sys.stderr)  # fmt: skip
        need = 15e-3 * args.subset  # MB: the in-memory fit's ~14 KB per sample, and some
        if available_mb() < need:
            print(f"in-memory fit skipped: {available_mb():.0f} MB available, {need:.0f} MB "
                  "wanted", file=sys.stderr)  # fmt: skip
            small_m = None
        else:
            small_m = run_child("memory", args.model, folder / "subset.npz")
            print(f"subset, in memory: {small_m['seconds']:.1f} s, "
                  f"{small_m['peak_rss_mb']:.0f} MB", file=sys.stderr)  # fmt: skip
    finally:
        if not args.keep:
            for name in ("log.parquet", "subset.parquet", "subset.npz"):
                (folder / name).unlink(missing_ok=True)
    figures["subset_chunked"] = {k: v for k, v in small_c.items() if k not in ("beta", "std")}
    print("| run | samples | time [s] | peak RSS [MB] |\n| --- | --- | --- | --- |")
    print(f"| chunked, 5-fold report (one pass) | {args.samples:,} | {big['seconds']:.0f} | "
          f"{big['peak_rss_mb']:.0f} |")  # fmt: skip
    print(f"| chunked fit | {args.subset:,} | {small_c['seconds']:.1f} | "
          f"{small_c['peak_rss_mb']:.0f} |")  # fmt: skip
    if small_m is not None:
        figures["subset_memory"] = {k: v for k, v in small_m.items() if k not in ("beta", "std")}
        print(f"| in-memory fit | {args.subset:,} | {small_m['seconds']:.1f} | "
              f"{small_m['peak_rss_mb']:.0f} |")  # fmt: skip
        a, b = np.array(small_m["beta"]), np.array(small_c["beta"])
        scale = np.array(small_c["column_norms"])
        compare = {
            "norm_relative": float(np.linalg.norm(b - a) / np.linalg.norm(a)),
            "max_torque_relative": float(
                np.max(np.abs((b - a) * scale)) / np.max(np.abs(a * scale))
            ),
            "max_per_parameter_relative": float(np.max(np.abs(b - a) / np.abs(a))),
            "max_difference_over_std": float(np.max(np.abs(b - a) / np.array(small_m["std"]))),
        }
        figures["compare"] = compare
        print("\nchunked against in-memory fit of the subset:")
        for key, value in compare.items():
            print(f"  {key}: {value:.2e}")
    held, nominal = big["heldout_relative_rms"], big["nominal_relative_rms"]
    print(f"\nheld-out relative RMS (5 folds): {held:.4g} (nominal model {nominal:.4g})")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")
    if not args.keep:
        shutil.rmtree(folder / "results", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
