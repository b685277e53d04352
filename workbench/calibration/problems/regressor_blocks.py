"""Torque equations of a log in memory whose regressor is computed block by block, never whole.

:func:`workbench.calibration.fitting.dynamic.torque_equations` holds the base
regressor X (M, n, r) of every equation: ``8 M n r`` bytes, 3.6 GB for a
million samples of a 7-joint robot with friction, once per candidate model.
:class:`RegressorBlocks` holds what is small per sample (times, torques, the
fit mask) and computes X on demand, one block of a fixed grid of ``block``
equation rows at a time, by the same anti-aliasing and decimation output by
output (:func:`workbench.recordings.signals.decimate_range`), so a block's
rows equal those of the whole regressor. Computed blocks are kept while they
fit in ``cache`` bytes (a log of a few ten thousand samples is computed
once, as a whole regressor would be; a longer one recomputes the blocks past
the cache on each pass). A model with fewer drive terms takes its columns from
the blocks of one with more (:meth:`RegressorBlocks.subset`, :func:`shared_columns`):
the dynamic problem's nested candidates share one regressor.

What the dynamic problem needs of X is a reduction over blocks: per-joint
triangular factors of ``[X_j tau_j]`` over some rows (:meth:`RegressorBlocks.factors`,
each block's factors merged by :func:`workbench.identification.least_squares.merge_factors`),
predicted torques ``X beta`` (:meth:`RegressorBlocks.predict`). A robust
loss re-weights every row: its fit takes the rows' equations whole
(:meth:`RegressorBlocks.equations`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from workbench.calibration.fitting.dynamic import (
    TorqueEquations,
    drive_inputs,
    fitted_rows,
    payload_torques,
)
from workbench.calibration.fitting.sensor_delay import delayed_torques
from workbench.errors import WorkbenchError
from workbench.identification.least_squares import joint_factors, merge_factors
from workbench.identification.torque_model import BaseParameters, TorqueModel
from workbench.lie import Array
from workbench.recordings import signals
from workbench.recordings.log import Log

BLOCK_BYTES = 32 * 2**20
"""Bytes of one block of the regressor (sets the block's equation rows)."""

CACHE_BYTES = 512 * 2**20
"""Bytes of computed regressor blocks kept per set of equations."""


@dataclass
class RegressorBlocks:
    """Rows of ``tau = X beta``: times (M,), torques (M, n) and fit mask (M, n) held; X (M, n, r)
    given block by block by ``regressor(start, stop)`` (equation rows ``[start, stop)``), r
    ``columns``."""

    t: Array
    tau: Array
    fit: np.ndarray
    regressor: Callable[[int, int], Array]
    columns: int  # r
    block: int
    cache: int
    _kept: dict[int, Array] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return self.t.shape[0]

    def blocks(self, rows: np.ndarray | None = None) -> Iterator[tuple[np.ndarray, Array]]:
        """For the equation ``rows`` (default all), one grid block at a time: the positions
        (into ``rows``) of the rows in the block and their regressor (k, n, r)."""
        rows = np.arange(len(self)) if rows is None else np.asarray(rows)
        index = rows // self.block
        for part in np.split(np.arange(rows.size), np.flatnonzero(np.diff(index)) + 1):
            if part.size:
                b = int(index[part[0]])
                local = rows[part] - b * self.block
                if local[-1] - local[0] == local.size - 1 and np.all(np.diff(local) == 1):
                    local = slice(local[0], local[-1] + 1)  # consecutive rows: a view
                yield part, self._block(b)[local]

    def _block(self, b: int) -> Array:
        """Regressor of grid block ``b``, kept while the cache has room."""
        if b in self._kept:
            return self._kept[b]
        X = self.regressor(b * self.block, min((b + 1) * self.block, len(self)))
        if (len(self._kept) + 1) * X.nbytes <= self.cache:
            self._kept[b] = X
        return X

    def factors(self, rows: np.ndarray | None = None) -> tuple[Array, np.ndarray]:
        """Per joint the triangular factor (n, r + 1, r + 1) of ``[X_j tau_j]`` over the fitted
        equations ``rows`` (default all), and the rows (n,) of each joint."""
        rows = np.arange(len(self)) if rows is None else np.asarray(rows)
        n = self.tau.shape[1]
        R, counts = None, np.zeros(n, dtype=np.int64)
        for part, X in self.blocks(rows):
            use = self.fit[rows[part]]
            joint = np.nonzero(use)[1]
            R_b = joint_factors(X[use], self.tau[rows[part]][use], joint, n)
            R = R_b if R is None else merge_factors(R, R_b)
            counts += np.bincount(joint, minlength=n)
        if R is None:  # no rows
            R = np.zeros((n, self.columns + 1, self.columns + 1))
        return R, counts

    def predict(self, beta: Array, rows: np.ndarray) -> Array:
        """Torques (m, n) ``X beta`` at the equation ``rows``."""
        rows = np.asarray(rows)
        out = np.empty((rows.size, self.tau.shape[1]))
        for part, X in self.blocks(rows):
            out[part] = X @ beta
        return out

    def subset(self, columns: np.ndarray) -> RegressorBlocks:
        """These equations with the regressor's ``columns`` (r',) only, cut from this one's blocks
        (and its cache)."""
        return RegressorBlocks(
            self.t, self.tau, self.fit,
            lambda start, _: self._block(start // self.block)[:, :, columns],
            len(columns), self.block, 0,
        )  # fmt: skip

    def equations(self, rows: np.ndarray | None = None) -> TorqueEquations:
        """The equation ``rows`` (default all) whole, X included."""
        rows = np.arange(len(self)) if rows is None else np.asarray(rows)
        X = np.concatenate([X for _, X in self.blocks(rows)])
        return TorqueEquations(self.t[rows], X, self.tau[rows], self.fit[rows])


def shared_columns(
    whole: TorqueModel, whole_base: BaseParameters, model: TorqueModel, base: BaseParameters
) -> np.ndarray | None:
    """Where each base column of ``model`` is among those of ``whole`` (a model with more drive
    terms), by the standard parameter it is the column of; None when one is not there."""
    names = [whole.names[k] for k in whole_base.independent]
    wanted = [model.names[k] for k in base.independent]
    if not set(wanted) <= set(names):
        return None
    return np.array([names.index(name) for name in wanted])


def regressor_blocks(
    model: TorqueModel, base: BaseParameters, log: Log, *, block: int | None = None,
    cache: int | None = None,
) -> RegressorBlocks:  # fmt: skip
    """The torque equations of ``log`` (those of :func:`~workbench.calibration.fitting.dynamic.
    torque_equations`: parallel decimation, borders dropped, payload taken off, the drive
    terms' inputs and delay, slow joint rows out of the fit) with the regressor given block
    by block; ``block`` equation rows per block (default: :data:`BLOCK_BYTES` of regressor),
    ``cache`` bytes of blocks kept (default :data:`CACHE_BYTES`)."""
    if log.tau is None:
        raise WorkbenchError(f"{log.source}: identification from torques needs joint torques")
    chain, factor, border = model.chain, log.decimation, log.border
    inputs = drive_inputs(model, log)
    measured = delayed_torques(log, model.drives.delay)

    def torques(start: int, stop: int) -> Array:
        return measured[start:stop] - payload_torques(chain, log, slice(start, stop))

    tau, kept = signals.decimate_segments(torques, log.spans(), factor, border)
    spans = log.spans()
    equations_of = [max(-(-(b - a) // factor) - 2 * border, 0) for a, b in spans]
    first_row = np.concatenate([[0], np.cumsum(equations_of)])

    def regressor(start: int, stop: int) -> Array:
        parts = []
        for s, (a, b) in enumerate(spans):
            lo, hi = max(start, first_row[s]), min(stop, first_row[s + 1])
            if lo < hi:
                parts.append(signals.decimate_range(
                    lambda i, j, a=a: model.columns(
                        log.q[a + i : a + j], log.dq[a + i : a + j], log.ddq[a + i : a + j],
                        select=base.independent, inputs=inputs.rows(slice(a + i, a + j)),
                    ),
                    b - a, factor, lo - first_row[s] + border, hi - first_row[s] + border,
                ))  # fmt: skip
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    r = len(base.independent)
    if block is None:
        block = max(64, BLOCK_BYTES // (8 * chain.n * r))
    cache = CACHE_BYTES if cache is None else cache
    return RegressorBlocks(log.t[kept], tau, fitted_rows(log, kept), regressor, r, block, cache)
