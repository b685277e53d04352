"""Signal processing of measured joint trajectories for identification.

The identification literature (Gautier's "parallel" filtering) estimates joint
velocities and accelerations from encoder positions and reduces the sample
rate without biasing the least-squares problem ``tau = W(q, dq, ddq) x``:

1. positions are low-passed by a zero-phase Butterworth filter
   (:func:`lowpass`: ``scipy.signal.butter`` in second-order sections,
   applied forwards and backwards by ``sosfiltfilt``), far above the
   robot's dynamics and below the encoder/quantisation noise;
2. velocities and accelerations are central differences of the *filtered*
   positions (:func:`derivatives`: ``numpy.gradient``, second order inside,
   first order at the two ends);
3. the torques and every column of ``W`` go through the same anti-aliasing
   low-pass before keeping one sample in ``factor`` (:func:`decimate`), so
   the decimated rows still satisfy the equation exactly (the filter is
   linear and ``W x`` is linear in x). The filter is a symmetric (zero
   phase) FIR low-pass of ``20 factor + 1`` taps (``scipy.signal.firwin``,
   Hamming window, cut-off at 0.8 of the new Nyquist frequency: flat to
   0.6 of it, -52 dB at it), evaluated only at the kept samples
   (``scipy.signal.upfirdn``). Decimated sample ``i`` sits at raw sample
   ``factor * i``; the signal is taken as zero beyond its ends. Because the
   filter is finite, :func:`decimate_blocks` computes the same result block
   by block from a function of the raw rows, so a long log never needs its
   full-rate regressor in memory;
4. a border of samples at both ends, where the filters see the padding, is
   dropped (:func:`border`).

Arrays carry time on axis 0.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence

import numpy as np

from workbench.errors import WorkbenchError
from workbench.lie import Array


def scipy_signal():
    """``scipy.signal``, imported when first needed (a second of every command's start-up,
    and logs of static poses never filter)."""
    return importlib.import_module("scipy.signal")


def lowpass(x: Array, sample_rate: float, cutoff: float, order: int = 4, what: str = "signal"):
    """Zero-phase Butterworth low-pass of ``x`` (time on axis 0) at ``cutoff`` Hz.

    The magnitude response is that of the order-``order`` filter squared
    (forward and backward pass), with no phase lag. Raises
    :class:`WorkbenchError` naming ``what`` when the cut-off is not below
    the Nyquist frequency or ``x`` is shorter than the filter's padding.
    """
    nyquist = sample_rate / 2.0
    if not 0.0 < cutoff < nyquist:
        raise WorkbenchError(
            f"{what}: low-pass cut-off {cutoff:g} Hz must lie in (0, {nyquist:g}) Hz, "
            f"below the Nyquist frequency of {sample_rate:g} Hz sampling"
        )
    sos = scipy_signal().butter(order, cutoff / nyquist, output="sos")
    needed = filter_length(order)
    if x.shape[0] <= needed:
        raise WorkbenchError(
            f"{what}: {x.shape[0]} samples are too few for the order-{order} low-pass filter "
            f"(it needs more than {needed})"
        )
    return scipy_signal().sosfiltfilt(sos, x, axis=0)


def filter_length(order: int) -> int:
    """Padding (samples) that ``sosfiltfilt`` uses for an order-``order`` Butterworth filter."""
    sections = (order + 1) // 2
    return 3 * (2 * sections + 1 - min(order % 2, 1))


def derivatives(q: Array, dt: float) -> tuple[Array, Array]:
    """dq, ddq of uniformly sampled ``q`` by central differences (``numpy.gradient``)."""
    dq = np.gradient(q, dt, axis=0)
    return dq, np.gradient(dq, dt, axis=0)


def fir(factor: int) -> Array:
    """The anti-aliasing filter of :func:`decimate` (module docstring, step 3)."""
    return scipy_signal().firwin(20 * factor + 1, 0.8 / factor)


def decimate(x: Array, factor: int) -> Array:
    """Anti-aliasing low-pass and downsampling by ``factor`` along axis 0 (module docstring)."""
    x = np.asarray(x, dtype=float)
    return decimate_blocks(lambda start, stop: x[start:stop], x.shape[0], factor)


def decimate_blocks(
    rows: Callable[[int, int], Array], samples: int, factor: int, block: int = 200
) -> Array:
    """:func:`decimate` of the (samples, ...) array whose raw rows ``[start, stop)`` are
    ``rows(start, stop)``, computed ``block`` output samples at a time; outputs number
    ``ceil(samples / factor)`` (:func:`decimate_range` of all of them)."""
    _check_factor(factor)
    return decimate_range(rows, samples, factor, 0, -(-samples // factor), block)


def _check_factor(factor: int) -> None:
    if factor < 1:
        raise WorkbenchError(f"decimation factor {factor} must be a positive integer")


def decimate_range(
    rows: Callable[[int, int], Array],
    samples: int,
    factor: int,
    first: int,
    last: int,
    block: int = 200,
) -> Array:
    """Outputs ``[first, last)`` of :func:`decimate_blocks`, computed ``block`` outputs at a time.

    Each block evaluates ``rows`` on its outputs' raw samples plus the
    filter's half length on both sides (``10 factor``), so every output
    equals that of the decimation of the whole array.
    """
    _check_factor(factor)
    if factor == 1:
        return np.asarray(rows(first, last), dtype=float)
    h = fir(factor)
    half = 10 * factor
    parts = []
    for begin in range(first, last, block):
        end = min(begin + block, last)
        start, stop = begin * factor - half, (end - 1) * factor + half + 1
        inside = np.asarray(rows(max(start, 0), min(stop, samples)), dtype=float)
        window = np.zeros((stop - start, *inside.shape[1:]))
        window[max(-start, 0) : max(-start, 0) + inside.shape[0]] = inside
        parts.append(_filtered(window, h, factor, end - begin))
    return np.concatenate(parts)


def _filtered(window: Array, h: Array, factor: int, outputs: int) -> Array:
    """Outputs ``[2 half / factor, + outputs)`` of scipy's ``upfirdn(h, window,
    down=factor, axis=0)`` (output j centred at sample ``2 half + j factor``), the same
    numbers: each output is the reversed filter against the window's samples from ``j
    factor`` on, for every column at once (a strided view, one einsum; upfirdn filtered the
    columns one by one, 0.4 s of the TX40 identification)."""
    flat = window.reshape(len(window), -1)
    view = np.lib.stride_tricks.sliding_window_view(flat, len(h), axis=0)[::factor][:outputs]
    return np.einsum("jcl,l->jc", view, h[::-1]).reshape(outputs, *window.shape[1:])


def decimate_segments(
    rows: Callable[[int, int], Array],
    segments: Sequence[tuple[int, int]],
    factor: int,
    border: int,
) -> tuple[Array, np.ndarray]:
    """:func:`decimate_blocks` of each ``(start, stop)`` segment on its own, ``border``
    outputs dropped at both ends of each: the stacked outputs and the raw sample each sits at.

    A recording split at gaps in its clock is never filtered across a gap.
    """
    parts, kept = [], kept_samples(segments, factor, border)
    for start, stop in segments:
        Z = decimate_blocks(lambda a, b, s=start: rows(s + a, s + b), stop - start, factor)
        parts.append(Z[border : Z.shape[0] - border])
    return np.concatenate(parts), kept


def kept_samples(segments: Sequence[tuple[int, int]], factor: int, border: int) -> np.ndarray:
    """Raw samples of the outputs :func:`decimate_segments` keeps (every ``factor``-th of each
    segment from its start, ``border`` outputs off both ends)."""
    kept = []
    for start, stop in segments:
        outputs = -(-(stop - start) // factor)
        kept.append(start + factor * np.arange(border, max(outputs - border, border)))
    return np.concatenate(kept).astype(np.int64)


def minimum_samples(factor: int, order: int = 4) -> int:
    """Fewest raw samples that the low-pass, the decimation and the borders accept.

    At least ten decimated samples must remain after dropping :func:`border`
    at both ends.
    """
    # ceil(m / factor) outputs: (9 + 2 border) factor + 1 samples give 10 + 2 border of them
    return max((9 + 2 * border(factor, order)) * factor + 1, filter_length(order) + 1)


def border(factor: int, order: int = 4) -> int:
    """Samples to drop at each end after decimation: where a filter sees the padding.

    The FIR's half length (10 output samples when decimating) and the
    Butterworth filter's padding, in output samples.
    """
    fir_half = 10 if factor > 1 else 0
    return max(fir_half, -(-filter_length(order) // factor))
