"""Test support: central differences and references the project checks itself against.

The references are independent formulations, written from the papers and
sharing no code with the algorithms they check:

* :mod:`workbench.testing.casadi_reference`: inverse dynamics in body frames in CasADi SX;
* :mod:`workbench.testing.closed_chain_reference`: closed chains in CasADi SX;
* :mod:`workbench.testing.ocp_reference`: the reaching problem's model functions in SX;
* :mod:`workbench.testing.excitation_reference`: the excitation criteria in SX;
* :mod:`workbench.testing.pinocchio_reference`: Pinocchio's algorithms with the
  project's conventions.

Tests and benchmarks import them like any module. :func:`central_differences`
is the one finite-difference Jacobian they use.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from workbench.lie import Array

__all__ = ["central_differences", "relative_error"]


def central_differences(
    f: Callable[[Array], ArrayLike], x: ArrayLike, h: float = 1e-6, *, samples: bool = False
) -> Array:
    """d f / d x by central differences: (*f(x).shape, *x.shape) for arrays x and f(x).

    ``samples=True``: x is (N, n) independent samples and f(x) is (N, ...)
    with row i depending on x[i] only; column k is perturbed in every sample
    at once and the result is the per-sample Jacobian (N, ..., n).
    """
    x = np.asarray(x, dtype=float)
    size = x.shape[-1] if samples else x.size
    columns = []
    for k in range(size):
        step = np.zeros(size)
        step[k] = h
        step = step if samples else step.reshape(x.shape)
        columns.append((np.asarray(f(x + step)) - np.asarray(f(x - step))) / (2 * h))
    if samples:
        return np.stack(columns, axis=-1)
    return np.moveaxis(np.array(columns), 0, -1).reshape(*np.shape(columns[0]), *x.shape)


def relative_error(a: ArrayLike, b: ArrayLike) -> float:
    """max |a - b| / max(max |b|, 1e-300): the error measure of the project's tests."""
    a, b = np.asarray(a), np.asarray(b)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-300))
