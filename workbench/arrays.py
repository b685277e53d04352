"""Checking user arguments: arrays (shape, batch axis, real and finite values) and the chain.

Every public entry point checks what a user passes before any compiled code
sees it, with a :class:`~workbench.errors.WorkbenchError` that names the
argument: a string or ``None`` where a :class:`~workbench.chain.Chain` is
expected, complex numbers (never silently reduced to their real part),
wrong shapes, NaN and inf.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from workbench.errors import WorkbenchError


def as_samples(
    x: ArrayLike, width: int, what: str, labels: Sequence[str] | None = None
) -> tuple[NDArray[np.float64], bool]:
    """Return ``x`` as a C-contiguous (N, width) float array and whether it was batched.

    Accepts ``(width,)`` (one sample, returned as N = 1) or ``(N, width)``.
    Raises :class:`WorkbenchError` naming ``what``, the expected shape and,
    for NaN or inf, the first offending sample and column (``labels`` names
    the columns, e.g. joint names).
    """
    arr = as_real_array(x, what)
    batched = arr.ndim == 2
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != width:
        raise WorkbenchError(f"{what} has shape {np.shape(x)}; expected ({width},) or (N, {width})")
    if not np.isfinite(arr).all():
        bad = ~np.isfinite(arr)
        sample, column = np.argwhere(bad)[0]
        name = labels[column] if labels is not None else f"column {column}"
        where = f"sample {sample}, " if batched else ""
        raise WorkbenchError(
            f"{what} contains {arr[sample, column]} at {where}{name} "
            f"({bad.sum()} non-finite entries)"
        )
    return np.ascontiguousarray(arr), batched


def as_real_array(x: ArrayLike, what: str) -> NDArray[np.float64]:
    """``x`` as a float array; complex, non-numeric or ragged input is an error naming ``what``."""
    try:
        raw = np.asarray(x)
        real = raw.dtype.kind != "c"
        arr = raw.astype(float, copy=False) if real else raw
    except (TypeError, ValueError) as exc:
        raise WorkbenchError(f"{what} is not a numeric array: {exc}") from None
    if not real:
        raise WorkbenchError(f"{what} is complex; expected real numbers")
    return arr


def same_batch(*arrays: tuple[NDArray[np.float64], str]) -> int:
    """Check that (array, name) pairs share their sample count; return it.

    A single sample (N = 1) is broadcast against any N.
    """
    counts = {name: a.shape[0] for a, name in arrays}
    sizes = {n for n in counts.values() if n != 1}
    if len(sizes) > 1:
        listing = ", ".join(f"{name}: {n}" for name, n in counts.items())
        raise WorkbenchError(f"sample counts differ ({listing})")
    return sizes.pop() if sizes else 1


def broadcast_samples(arr: NDArray[np.float64], n_samples: int) -> NDArray[np.float64]:
    """Repeat a single-sample (1, width) array to (n_samples, width)."""
    if arr.shape[0] == n_samples:
        return arr
    return np.ascontiguousarray(np.broadcast_to(arr, (n_samples, arr.shape[1])))
