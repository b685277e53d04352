"""The dynamic calibration problem of a log too long for memory: its blocks are accumulated factors.

The log (:mod:`workbench.recordings.chunked_logs`) is read once into
triangular factors per validation block and joint
(:mod:`workbench.calibration.fitting.normal_equations`): contiguous folds of equal
time span, or the last fraction of the log, cut exactly as
:mod:`workbench.calibration.selection.validation` cuts an in-memory log. The fit on
some training blocks merges their factors, and a block's residual sums
``|X_k beta - tau_k|^2 = |R_k [beta; -1]|^2`` come from its own, so that
the one validation loop (:mod:`workbench.calibration.cross_validation`)
gives the figures of the in-memory problem
(:class:`workbench.calibration.problems.dynamic_problem.DynamicProblem`) on the same
samples. Plots and the log plausibility checks use a strided subsample of at
most ``PLOT_SAMPLES`` (:mod:`workbench.calibration.fitting.normal_equations`)
samples. One candidate (the given or default drive terms: choosing among
terms would take one pass over the log per candidate); least squares only;
leave-one-out and a second validation log are refused.
"""

from __future__ import annotations

from typing import Any

from workbench.calibration.fitting.drive_shapes import refuse_further
from workbench.calibration.fitting.normal_equations import (
    Split,
    accumulate,
    check_loss,
    fit_normal_equations,
    residual_sums,
    sample_stride,
)
from workbench.calibration.problems.dynamic_problem import (
    DynamicOutputs,
    Terms,
    TorqueSetup,
    torque_setup,
)
from workbench.calibration.problems.problem import Options, Residuals
from workbench.calibration.problems.torque_problem import log_drives
from workbench.calibration.selection.validation import EndSplit, Folds, default_validation
from workbench.chain import Chain
from workbench.errors import WorkbenchError
from workbench.lie import Array
from workbench.recordings import plausibility
from workbench.recordings.chunked_logs import ChunkedLog, read_part
from workbench.recordings.log import Log

MAX_FOLDS = 100  # per fold and joint a (r + 1)^2 factor travels with every part's result


class AccumulatedDynamicProblem(DynamicOutputs):
    """Base parameters and drive terms from a large log's accumulated torque equations.

    ``validation`` (a :class:`~workbench.calibration.selection.validation.Folds` or
    :class:`~workbench.calibration.selection.validation.EndSplit`, default the log's:
    the last 20 %) decides the blocks the factors are accumulated in, so it
    is given here, before the one pass over the log; a block is a block
    index.
    """

    def __init__(
        self,
        chain: Chain,
        log: ChunkedLog,
        options: Options,
        validation: Folds | EndSplit | Log | ChunkedLog | None = None,
    ) -> None:
        check_loss(options.loss)
        if isinstance(validation, Log | ChunkedLog):
            raise WorkbenchError(
                f"{log.source}: a second validation log is not supported for large logs; hold "
                "out contiguous folds (--folds K) or the end of the log (--validation FRACTION)"
            )
        self.options = options
        self.log = log
        self.labels = chain.joint_names
        self.kept_channels = log.torque_channels()
        self.logged_unit = log.effort_unit
        self.joint_chain = chain
        self.scheme = validation or default_validation(log)
        self.split = _split(log, self.scheme)
        first = read_part(log.parts[0], log.joint_names)  # units and columns, before the pass
        plausibility.check_log(_as_log(first, log), chain, channels=False)
        drives = log_drives(log, options.terms)
        refuse_further(drives, log.source, "a log read chunk by chunk")
        self._setup = torque_setup(
            chain, log, drives.terms, options,
            lambda model, base: accumulate(
                model, base, log, self.split, progress=options.progress
            ),
        )  # fmt: skip
        self.model, self.base, self.x0, self.equations = (
            self._setup.model, self._setup.base, self._setup.x0, self._setup.equations,
        )  # fmt: skip
        plausibility.check_log(_as_log(self.equations.sample, log), chain)
        counts = self.equations.counts
        self.used = [b for b in range(self.split.blocks) if counts[b].sum() > 0]
        self._columns: dict[int, Array] = {}

    @property
    def samples(self) -> int:
        return len(self.log)

    def summary(self, fit) -> dict[str, Any]:
        large = {
            "parts": len(self.log.parts),
            "method": "per-joint triangular factors accumulated by a Dask map-reduce "
            "(workbench.calibration.fitting.normal_equations)",
        }
        return {"large_log": large} | super().summary(fit)

    def setup(self, terms: tuple[str, ...]) -> TorqueSetup:
        """The torque model of the log's terms (the one candidate)."""
        return self._setup

    def folds(self, scheme: EndSplit | Folds) -> list[tuple[tuple[int, ...], int]]:
        """(training blocks, held-out block) of ``scheme``, the one accumulated for."""
        if scheme != self.scheme:
            raise WorkbenchError(
                f"{self.log.source}: accumulated for {self.scheme.label}, not {scheme.label}"
            )
        if self.split.kind == "end":
            if self.used != [0, 1]:
                raise WorkbenchError(
                    f"too few samples ({len(self.log)}) to hold out {scheme.fraction} of the log"
                )
            return [((0,), 1)]
        return [(tuple(k for k in self.used if k != b), b) for b in self.used]

    def everything(self) -> list[int]:
        return self.used

    def label(self, scheme: EndSplit | Folds) -> str:
        if len(self.equations.sample["t"]) < len(self.log):
            return f"{scheme.label} (plots: every {sample_stride(len(self.log))}th sample)"
        return scheme.label

    def fit(self, training: tuple[int, ...] | None, candidate: Terms | None = None):
        """Least squares on the merged factors of the ``training`` blocks (None: all)."""
        o = self.options
        return fit_normal_equations(
            self.model, self.base, self.equations, training, x0=self.x0, weighted=o.weighted,
            physical=o.physical,
        )  # fmt: skip

    def baseline(self, training: tuple[int, ...] | None) -> None:
        return None

    def residuals(self, fit, block: int) -> Residuals:
        """Sums from the block's factors; the samples shown: its part of the subsample."""
        beta = self.base.matrix @ self.x0 if fit is None else fit.beta
        error2, measured2 = residual_sums(self.equations, beta, block)
        counts = self.equations.counts[block]
        sample = self.equations.sample
        here = sample["block"] == block
        if block not in self._columns:
            self._columns[block] = self.model.columns(
                sample["q"][here], sample["dq"][here], sample["ddq"][here],
                select=self.base.independent,
            )  # fmt: skip
        measured = sample["tau"][here]
        errors = self._columns[block] @ beta - measured
        return Residuals(
            block, int(counts[0]), error2, measured2, counts, sample["t"][here], errors, measured
        )


def _split(log: ChunkedLog, validation: Folds | EndSplit) -> Split:
    """The blocks of ``validation`` by time, as it cuts an in-memory log."""
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
        return Split("folds", k=validation.k, start=t0, span=span)
    return Split("end", fraction=validation.fraction, start=t0, span=span)


def _as_log(data: dict[str, Array], log: ChunkedLog) -> Log:
    """A :class:`Log` of some samples, for the plausibility checks."""
    return Log(
        t=data["t"], q=data["q"], dq=data["dq"], ddq=data["ddq"], tau=data["tau"],
        joint_names=log.joint_names, source=log.source,
    )  # fmt: skip
