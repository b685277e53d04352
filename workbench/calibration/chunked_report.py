"""``workbench calibrate --kind dynamic`` on a log too long for memory: the report from one pass.

The log (:mod:`workbench.calibration.chunked_logs`) is read once into
triangular factors per validation block and joint
(:mod:`workbench.calibration.normal_equations`): contiguous folds of equal
time span, or the last fraction of the log, cut exactly as
:mod:`workbench.calibration.validation` cuts an in-memory log. The fit of
fold k merges the other folds' factors, its held-out errors ``|X_k beta -
tau_k| = |R_k [beta; -1]|`` come from fold k's, so the report's figures
equal those of :func:`workbench.calibration.report.calibrate` on the same
samples. Plots and the log plausibility checks use a strided subsample of at
most ``PLOT_SAMPLES``
(:mod:`workbench.calibration.normal_equations`) samples.
Leave-one-out and a second validation log are refused.
"""

from __future__ import annotations

import math

import numpy as np

from workbench.calibration import plausibility
from workbench.calibration.chunked_logs import ChunkedLog, read_part
from workbench.calibration.kinds import DynamicProblem, Options
from workbench.calibration.normal_equations import (
    Split,
    check_loss,
    fit_normal_equations,
    residual_sums,
    sample_stride,
)
from workbench.calibration.report import CalibrationReport, HeldOut, report_of, report_summary
from workbench.calibration.samples import Log
from workbench.calibration.validation import EndSplit, Folds
from workbench.chain import Chain
from workbench.errors import WorkbenchError
from workbench.lie import Array

MAX_FOLDS = 100  # per fold and joint a (r + 1)^2 factor travels with every part's result


def calibrate_chunked(
    chain: Chain,
    log: ChunkedLog,
    validation: Folds | EndSplit | None = None,
    options: Options | None = None,
) -> CalibrationReport:
    """``workbench calibrate --kind dynamic`` on a large log: the report of
    :func:`workbench.calibration.report.calibrate` from one pass over the log.

    ``validation`` is a :class:`~workbench.calibration.validation.Folds` or
    :class:`~workbench.calibration.validation.EndSplit` (default: the last
    20 %); figures equal those of the in-memory run on the same samples.
    """
    options = options or Options()
    check_loss(options.loss)
    if isinstance(validation, Log | ChunkedLog):
        raise WorkbenchError(
            f"{log.source}: a second validation log is not supported for large logs; hold out "
            "contiguous folds (--folds K) or the end of the log (--validation FRACTION)"
        )
    validation = validation or EndSplit(0.2)
    t0, t1 = log.t_range
    n_samples = len(log)
    if n_samples < 2:
        raise WorkbenchError(f"validation needs at least 2 samples, the log has {n_samples}")
    span = (t1 - t0) * n_samples / (n_samples - 1)
    if isinstance(validation, Folds):
        if validation.k == -1:
            raise WorkbenchError(
                f"{log.source}: leave-one-out needs one fit per sample; use --folds K on a "
                "large log"
            )
        if validation.k > min(MAX_FOLDS, n_samples):
            raise WorkbenchError(
                f"--folds {validation.k}: a large log of {n_samples} samples takes 2 to "
                f"{min(MAX_FOLDS, n_samples)} folds (each fold keeps its own factors)"
            )
        split = Split("folds", k=validation.k, start=t0, span=span)
    else:
        split = Split("end", fraction=validation.fraction, start=t0, span=span)
    first = read_part(log.parts[0], log.joint_names)  # units and columns, before the long pass
    plausibility.check_log(_as_log(first, log), chain, channels=False)

    problem = DynamicProblem(chain, log, options, split)
    equations = problem.equations
    plausibility.check_log(_as_log(equations.sample, log), chain)
    fit = dict(x0=problem.x0, weighted=options.weighted, physical=options.physical)
    full = fit_normal_equations(problem.model, problem.base, equations, **fit)
    nominal_beta = problem.base.matrix @ problem.x0
    used = [b for b in range(split.blocks) if equations.counts[b].sum() > 0]
    held_blocks = used if split.kind == "folds" else [1]
    if split.kind == "end" and (1 not in used or 0 not in used):
        raise WorkbenchError(
            f"too few samples ({n_samples}) to hold out {validation.fraction} of the log"
        )
    fits, folds = {}, []
    after2 = before2 = measured2 = np.zeros(chain.n)
    held_rows = 0
    for b in held_blocks:
        train = [k for k in used if k != b]
        fits[b] = fit_normal_equations(problem.model, problem.base, equations, train, **fit)
        a2, m2 = residual_sums(equations, fits[b].beta, b)
        n2, _ = residual_sums(equations, nominal_beta, b)
        rows = int(equations.counts[b, 0])
        after2, before2, measured2 = after2 + a2, before2 + n2, measured2 + m2
        held_rows += rows
        if len(held_blocks) <= 20:
            folds.append({"samples": rows, **_figures(a2, m2, rows, problem.labels, numbers=True)})
    figures = _figures(after2, measured2, held_rows, problem.labels)
    nominal = _figures(before2, measured2, held_rows, problem.labels)
    if not (math.isfinite(figures["relative_rms"]) and math.isfinite(nominal["relative_rms"])):
        raise WorkbenchError(
            f"{log.source}: the {held_rows} held-out sample(s) cannot measure the calibration; "
            "hold out more samples (--validation, --folds) or log more"
        )
    train_after2 = train_before2 = train_measured2 = 0.0
    for b in used:
        a2, m2 = residual_sums(equations, full.beta, b)
        n2, _ = residual_sums(equations, nominal_beta, b)
        train_after2 += a2.sum()
        train_before2 += n2.sum()
        train_measured2 += m2.sum()
    entries = n_samples * chain.n
    held_entries = held_rows * chain.n

    sample = equations.sample
    shown = np.isin(sample["block"], held_blocks)
    X = problem.model.columns(
        sample["q"][shown], sample["dq"][shown], sample["ddq"][shown],
        select=problem.base.independent,
    )  # fmt: skip
    predicted = np.empty((int(shown.sum()), chain.n))
    for b in held_blocks:
        here = sample["block"][shown] == b
        predicted[here] = X[here] @ fits[b].beta
    measured = sample["tau"][shown]
    after, labels, unit = problem.channels(predicted - measured)
    before, _, _ = problem.channels(X @ nominal_beta - measured)
    heldout = HeldOut(sample["t"][shown], after, before, measured, labels, unit)
    label = validation.label
    if len(sample["t"]) < n_samples:
        label += f" (plots: every {sample_stride(n_samples)}th sample)"
    rms = {
        "train_before": math.sqrt(train_before2 / entries),
        "train_after": math.sqrt(train_after2 / entries),
        "validation_before": math.sqrt(float(before2.sum()) / held_entries),
        "validation_after": math.sqrt(float(after2.sum()) / held_entries),
        "unit": problem.unit,
    }
    summary = report_summary(
        "dynamic", chain, log, label, figures, nominal, folds, rms,
        fitted=n_samples, heldout=held_rows, convention=problem.rms_convention,
        nominal_model=problem.nominal_model,
    )  # fmt: skip
    summary["large_log"] = {
        "parts": len(log.parts),
        "method": "per-joint triangular factors accumulated by a Dask map-reduce "
        "(workbench.calibration.normal_equations)",
    }
    summary.update(problem.summary(full))
    summary["train_relative_rms"] = math.sqrt(train_after2 / train_measured2)
    return report_of(problem, full, summary, heldout)


def _figures(error2: Array, measured2: Array, rows: int, labels, numbers: bool = False):
    """Held-out figures as the dynamic kind reports them, from per-joint sums of squares."""
    total = float(measured2.sum())
    relative = math.sqrt(float(error2.sum()) / total) if total > 0 else math.inf
    if numbers:
        return {"relative_rms": relative}
    with np.errstate(divide="ignore", invalid="ignore"):
        per_joint = np.where(measured2 > 0, np.sqrt(error2 / measured2), np.inf)
    rms = np.sqrt(error2 / max(rows, 1))
    return {
        "relative_rms": relative,
        "relative_rms_per_joint": dict(zip(labels, per_joint.tolist(), strict=True)),
        "rms": dict(zip(labels, rms.tolist(), strict=True)),
    }


def _as_log(data: dict[str, Array], log: ChunkedLog) -> Log:
    """A :class:`Log` of some samples, for the plausibility checks."""
    return Log(
        t=data["t"], q=data["q"], dq=data["dq"], ddq=data["ddq"], tau=data["tau"],
        joint_names=log.joint_names, source=log.source,
    )  # fmt: skip
