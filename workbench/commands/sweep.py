"""Solve an optimal-control problem (any registered kind) over a grid of goals, durations or
designs on Dask.

SWEEP is a sweep file (TOML; see problems/fivebar_sweep.toml and
workbench.sweep.spec): a base problem file and the axes to vary (goal
directions on an azimuth x elevation grid or from a list, and any problem key
by its dotted path such as task.duration or design.mass_budget). Every
combination is one task on Dask: by default a local cluster with one worker
process per core (--workers N to choose), or the running cluster whose
scheduler is at --scheduler tcp://HOST:PORT (start one with `dask scheduler`
and `dask worker tcp://HOST:PORT --nthreads 1` on each machine; workers need
workbench installed and the problem's files at the same paths).

Writes into DIR, as the tasks finish: tasks/<id>/trajectory.npz and
tasks/<id>/row.json; at the end (and on Ctrl-C) results.parquet and
results.csv (one row per task: the varied inputs, status, objective,
iterations, solve time, peak |torque|, constraint violation, task error, the
trajectory's path), effort_map.png (objective over the workspace, unsolved
goals marked) and sweep.json. A task that fails, is infeasible or raises is a
row with its status and message. Run the same command again after an
interruption: rows already in DIR are kept and only the missing tasks are
solved. Prints the Dask dashboard's address; a progress bar on stderr counts
tasks done and not solved, with the estimated time left (--quiet: none).
Exit code 0 when every task has a row, whatever its status.
"""

from __future__ import annotations

import argparse

HELP = "solve an optimal-control problem over a grid of goals, durations or designs on Dask"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("sweep", metavar="SWEEP", help="sweep file (TOML)")
    parser.add_argument(
        "--out", default="results/sweep", metavar="DIR",
        help="results directory; an interrupted sweep resumes from it",
    )  # fmt: skip
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--workers", type=int, metavar="N",
        help="worker processes of the local cluster (default: one per core)",
    )  # fmt: skip
    where.add_argument(
        "--scheduler", metavar="ADDRESS",
        help="submit to a running Dask scheduler, e.g. tcp://10.0.0.5:8786",
    )  # fmt: skip
    parser.add_argument(
        "--warm-start", choices=("rescue", "neighbours", "none"),
        help="rescue: every task from the minimum-jerk guess, unsolved ones again from a solved "
        "neighbour; neighbours: seeds first, the others from solved neighbours; none: every "
        "task once from the guess (default: the sweep file's, else rescue)",
    )  # fmt: skip
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> int:
    from workbench.errors import WorkbenchError
    from workbench.io import check_not_input, check_output_directory
    from workbench.sweep import Sweep, run_sweep

    if args.workers is not None and args.workers < 1:
        raise WorkbenchError(f"--workers {args.workers} must be at least 1")
    check_output_directory(args.out)
    check_not_input(args.out, args.sweep, directory=True)
    sweep = Sweep.from_toml(args.sweep)
    outcome = run_sweep(
        sweep, args.out, workers=args.workers, scheduler=args.scheduler,
        progress=not args.quiet, warm_start=args.warm_start,
    )  # fmt: skip
    counts = ", ".join(f"{n} {status}" for status, n in sorted(outcome.counts.items()))
    print(
        f"swept {sweep.source}: {len(outcome.rows)} task{'s' * (len(outcome.rows) != 1)} "
        f"({counts}); solved now "
        f"{len(outcome.solved_now)}, kept {len(outcome.reused)} from {args.out}, "
        f"{outcome.wall_time_s:.1f} s on {outcome.workers} worker(s); results in "
        f"{args.out}/results.parquet"
    )
    return 0
