"""Lazy public names of a package: one style for every ``__init__`` of the project.

A package lists its public names and the module each lives in; they are
imported on first use, so that ``import workbench.calibration`` stays light
(no Pinocchio, numba, CasADi or Dask until a name needs them) and the
command line starts fast::

    __all__, __getattr__ = exports(__name__, {"read_log": "log_files", "plots": None})

A module ``"log_files"`` is relative to the package (``"workbench.io"``: absolute);
``None`` makes the name a submodule of the package. A name kept one release after it
moved is listed in ``deprecated`` as ``name: (module, what to use instead)``: it still
resolves, with a :class:`DeprecationWarning`, and is not in ``__all__``.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any


def exports(
    package: str,
    names: dict[str, str | None],
    eager: tuple[str, ...] = (),
    deprecated: dict[str, tuple[str, str]] | None = None,
) -> tuple[list[str], Callable[[str], Any]]:
    """``(__all__, __getattr__)`` for ``package`` (module docstring); ``eager`` names are
    defined in the package itself and only listed."""
    deprecated = deprecated or {}

    def module_of(where: str) -> str:
        return where if where.startswith("workbench.") else f"{package}.{where}"

    def getattr_(name: str) -> Any:
        if name in deprecated:
            where, instead = deprecated[name]
            warnings.warn(
                f"{package}.{name} is deprecated and goes in the next release: use {instead}",
                DeprecationWarning,
                stacklevel=2,
            )
            return getattr(importlib.import_module(module_of(where)), name)
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        where = names[name]
        if where is None:
            return importlib.import_module(f"{package}.{name}")
        return getattr(importlib.import_module(module_of(where)), name)

    return sorted({*names, *eager}), getattr_
