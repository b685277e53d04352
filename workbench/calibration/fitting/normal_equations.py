"""Dynamic identification of logs too long for memory: the least squares accumulated chunk by chunk.

A log of ten million samples has a base regressor of 10^7 x n x r numbers
(32 GB for the iiwa with friction), which
:func:`workbench.calibration.fitting.dynamic.fit_equations` cannot hold. Its least-squares
problems need far less: for the rows of joint j,
``[X_j tau_j]`` enters every step of Gautier's two-step weighted least squares
only through its triangular factor ``R_j`` ((r + 1) x (r + 1), ``[X_j tau_j]
= Q_j R_j``), the square root of the normal equations ``[X_j tau_j]^T [X_j
tau_j] = R_j^T R_j``:

* the column norms that scale the regressor are those of the stacked ``R_j``;
* the ordinary least-squares fit theta is the triangular solve of the factor of
  the stacked ``R_j``, and joint j's residual norm ``|X_j theta - tau_j| = |R_j
  [theta; -1]|``, hence ``sigma_j`` and the weights ``1 / sigma_j``;
* the weighted fit is the triangular solve of the factor of the stacked
  ``R_j / sigma_j``; its covariance, condition number and per-joint residuals
  follow from the same factors.

The factors are accumulated over row blocks as a Dask map-reduce
(:func:`accumulate`): each block (a Parquet row group or a chunk file) is read,
its regressor evaluated ``block_samples`` samples at a time and reduced to one
factor per joint; factors merge pairwise in a tree (``R`` of the two stacked
factors, a QR of a 2(r + 1) x (r + 1) matrix). Memory is bounded by the
blocks in flight, whatever the log's length. Working with the factors instead
of the normal equations themselves keeps the conditioning of the regressor
(not its square). The fit itself is the in-memory one
(:func:`workbench.identification.least_squares.fit_factors`, there on the factors
of the rows in memory), so the parameters agree to rounding (1e-12 relative
and better on well-excited logs; ``tests/test_large_logs.py``).

Held-out validation needs no second pass either
(:mod:`workbench.calibration.problems.accumulated_dynamic`): samples are sorted into the
validation scheme's blocks as they are read (contiguous folds of equal time
span, or the last fraction of the log, exactly as
:mod:`workbench.calibration.selection.validation` cuts them), each block keeps its own
factors, the fit of fold k merges the others', and its held-out errors
``|X_k beta - tau_k| = |R_k [beta; -1]|`` come from fold k's factors. The plots
use a strided subsample of at most ``PLOT_SAMPLES`` samples (whose regressor
is evaluated again), which also goes through the log plausibility checks.

What the accumulated fit supports (anything else is refused with a
WorkbenchError): least squares with Gautier's per-joint weights (or
unweighted), the completion to standard parameters and ``physical`` (both
use beta and its covariance only). Robust losses are refused: their IRLS
re-weights every residual at every iteration, one pass over the whole log
each. The logs themselves: :mod:`workbench.recordings.chunked_logs`.
"""

from __future__ import annotations

import functools
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from workbench.errors import WorkbenchError
from workbench.identification.least_squares import DynamicFit, factor, fit_factors, merge_factors
from workbench.identification.torque_model import BaseParameters, TorqueModel
from workbench.lie import Array
from workbench.recordings.chunked_logs import ChunkedLog, read_part

BLOCK_SAMPLES = 8192  # samples whose regressor is evaluated at once (~40 MB for the iiwa)
PLOT_SAMPLES = 20000  # strided subsample kept for plausibility checks and plots


# ------------------------------------------------------------- accumulation
@dataclass(frozen=True)
class Split:
    """How samples fall into validation blocks by time
    (:mod:`workbench.calibration.selection.validation`).

    ``kind`` "all" (one block), "folds" (``k`` contiguous folds of equal time
    span) or "end" (block 1: the last ``fraction`` of the time span).
    """

    kind: str = "all"
    k: int = 1
    fraction: float = 0.0
    start: float = 0.0
    span: float = 1.0

    @property
    def blocks(self) -> int:
        return {"all": 1, "folds": self.k, "end": 2}[self.kind]

    def of(self, t: Array) -> np.ndarray:
        """Block index (m,) of samples at times ``t``, as validation.Folds / EndSplit cut."""
        if self.kind == "folds":
            return np.minimum((self.k * (t - self.start) / self.span).astype(np.int64), self.k - 1)
        if self.kind == "end":
            return (t >= self.start + (1.0 - self.fraction) * self.span).astype(np.int64)
        return np.zeros(t.shape, dtype=np.int64)


@dataclass(frozen=True)
class NormalEquations:
    """Accumulated least squares of ``tau = X beta`` (module docstring).

    ``R`` (B, n, r + 1, r + 1): per validation block and joint, the triangular
    factor of ``[X_j tau_j]`` over that block's rows of joint j (unscaled);
    ``counts`` (B, n) those rows; ``split`` the blocks' definition;
    ``sample`` a strided subsample (t, q, dq, ddq, tau, block) for checks and plots.
    """

    R: Array
    counts: np.ndarray
    samples: int
    split: Split
    sample: dict[str, Array]
    source: str = "<chunked>"

    def __len__(self) -> int:
        return self.samples

    def merged(self, blocks=None) -> tuple[Array, np.ndarray]:
        """Per-joint factors (n, r + 1, r + 1) and counts (n,) over ``blocks`` (default all)."""
        chosen = range(self.R.shape[0]) if blocks is None else list(blocks)
        R = [self.R[b] for b in chosen]
        counts = sum(self.counts[b] for b in chosen)
        out = R[0]
        for other in R[1:]:
            out = merge_factors(out, other)
        return out, counts


def sample_stride(samples: int) -> int:
    """Every how many samples one is kept for checks and plots (at most PLOT_SAMPLES kept)."""
    return max(1, math.ceil(samples / PLOT_SAMPLES))


def _part_equations(
    index: int, *, log: ChunkedLog, model: TorqueModel, base: BaseParameters, split: Split,
    stride: int, block_samples: int,
) -> dict[str, Any]:  # fmt: skip
    """Factors (B, n, r + 1, r + 1) and counts of part ``index``, and its strided subsample."""
    part = log.parts[index]
    data = read_part(part, log.joint_names)
    n, r = len(log.joint_names), len(base.independent)
    R = np.zeros((split.blocks, n, r + 1, r + 1))
    counts = np.zeros((split.blocks, n), dtype=np.int64)
    block_of = split.of(data["t"])
    for start in range(0, part.rows, block_samples):
        s = slice(start, min(start + block_samples, part.rows))
        X = model.columns(data["q"][s], data["dq"][s], data["ddq"][s], select=base.independent)
        for b in np.unique(block_of[s]):
            rows = block_of[s] == b
            for j in range(n):
                A = np.column_stack([X[rows, j, :], data["tau"][s][rows, j]])
                R[b, j] = factor(np.vstack([R[b, j], A]))
                counts[b, j] += int(rows.sum())
    keep = np.flatnonzero((part.offset + np.arange(part.rows)) % stride == 0)
    sample = {k: v[keep] for k, v in data.items()}
    sample["block"] = block_of[keep]
    return {"R": R, "counts": counts, "sample": sample}


def _combine(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    return {
        "R": merge_factors(a["R"], b["R"]),
        "counts": a["counts"] + b["counts"],
        "sample": {k: np.concatenate([a["sample"][k], b["sample"][k]]) for k in a["sample"]},
    }


def accumulate(
    model: TorqueModel,
    base: BaseParameters,
    log: ChunkedLog,
    split: Split | None = None,
    *,
    progress: bool = False,
    block_samples: int = BLOCK_SAMPLES,
    scheduler: str | None = "threads",
) -> NormalEquations:
    """The factors of ``log``'s torque equations per validation block (Dask map-reduce).

    One delayed task per part (read, regressor, factors), merged pairwise in
    a tree. ``scheduler`` is Dask's: "threads" (the compiled regressor and
    LAPACK release the GIL), "processes", "sync", or None for the active
    ``distributed.Client``'s cluster (whose workers must see the files).
    """
    import dask

    split = split or Split()
    stride = sample_stride(len(log))
    one = functools.partial(
        _part_equations, log=log, model=model, base=base, split=split, stride=stride,
        block_samples=block_samples,
    )  # fmt: skip
    tasks = [dask.delayed(one, pure=False, name=f"_part_equations-{k}")(k) for k in
             range(len(log.parts))]  # fmt: skip
    while len(tasks) > 1:  # a tree of pairwise merges
        pairs = zip(tasks[0::2], tasks[1::2], strict=False)  # an odd one out waits a round
        merged = [dask.delayed(_combine, pure=False)(a, b) for a, b in pairs]
        tasks = merged + ([tasks[-1]] if len(tasks) % 2 else [])
    with _progress(len(log.parts), progress, f"reading {Path(log.source).name}"):
        (total,) = dask.compute(tasks[0], scheduler=scheduler)
    return NormalEquations(
        R=total["R"], counts=total["counts"], samples=len(log), split=split,
        sample=total["sample"], source=log.source,
    )  # fmt: skip


class _progress:
    """A tqdm bar counting finished part tasks (Dask's local schedulers only)."""

    def __init__(self, total: int, enabled: bool, desc: str) -> None:
        self.total, self.enabled, self.desc = total, enabled, desc

    def __enter__(self):
        if not self.enabled:
            return self
        from dask.callbacks import Callback
        from tqdm import tqdm

        self.bar = tqdm(total=self.total, desc=self.desc, unit="part", file=sys.stderr)
        bar = self.bar

        class _Count(Callback):
            def _posttask(self, key, result, dsk, state, worker_id):
                name = key[0] if isinstance(key, tuple) else key
                if str(name).startswith("_part_equations"):
                    bar.update()

        self.callback = _Count()
        self.callback.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self.callback.__exit__(*exc)
            self.bar.close()


# --------------------------------------------------------------------- fit
def fit_normal_equations(
    model: TorqueModel,
    base: BaseParameters,
    equations: NormalEquations,
    blocks=None,
    *,
    x0: Array | None = None,
    weighted: bool = True,
    loss: str = "linear",
    physical: bool = False,
) -> DynamicFit:
    """:func:`workbench.calibration.fitting.dynamic.fit_equations` on accumulated factors.

    ``blocks`` are validation blocks of ``equations.split`` to fit on (default
    all). Every step mirrors the in-memory fit (module docstring); robust
    losses are refused.
    """
    check_loss(loss)
    R, counts = equations.merged(blocks)
    return fit_factors(model, base, R, counts, x0=x0, weighted=weighted, physical=physical)


def check_loss(loss: str) -> None:
    """Refuse robust losses (module docstring)."""
    if loss != "linear":
        raise WorkbenchError(
            f"--loss {loss}: large (chunked) logs are fitted by least squares only; a robust "
            "loss re-weights every residual at every iteration (one pass over the whole log "
            "each). Use --loss linear, or read a shorter log in memory"
        )


def residual_sums(equations: NormalEquations, beta: Array, block: int) -> tuple[Array, Array]:
    """Per joint over one block: |X_j beta - tau_j|^2 and |tau_j|^2 (n,), from the factors."""
    R = equations.R[block]
    v = np.append(beta, -1.0)
    return np.sum((R @ v) ** 2, axis=1), np.sum(R[:, :, -1] ** 2, axis=1)
