"""The registry of optimal-control problem kinds and the contract's entry points.

A problem file says its kind with a top-level key (default ``"reach"``, so
files written before kinds existed keep working)::

    kind = "reach"

:data:`KINDS` maps each kind to the module that implements the contract
(:mod:`workbench.ocp.contract`): reaching and co-design (a reach problem
with a ``[design]`` table) are the kind ``reach``. :func:`read`,
:func:`solve` and :func:`write` dispatch on it; the command line and the
sweep use nothing else. A kind defined outside the package is added with
:func:`register`.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

from workbench.config import Section, read_toml
from workbench.errors import WorkbenchError
from workbench.io import results_directory
from workbench.lie import Array
from workbench.ocp.contract import Problem, Result

DEFAULT = "reach"
KINDS: dict[str, str] = {"reach": "workbench.ocp.reach_kind"}  # kind -> module


def register(name: str, module: str) -> None:
    """Add the kind ``name`` implemented by the importable ``module`` (a dotted name).

    Registering a name again with the same module does nothing; with another
    module it is an error, as are a name that is not a non-empty string and a
    module that does not import or lacks the contract's functions (so that a
    problem file of the kind is never met by an ImportError or AttributeError).
    """
    if not isinstance(name, str) or not name.strip():
        raise WorkbenchError(f"problem kind name {name!r} must be a non-empty string")
    if not isinstance(module, str):
        raise WorkbenchError(f"problem kind '{name}': module {module!r} must be a dotted name")
    try:
        implementation = importlib.import_module(module)
    except ImportError as error:
        raise WorkbenchError(
            f"problem kind '{name}': module {module} cannot be imported ({error})"
        ) from None
    missing = [
        f for f in ("read", "solve", "write") if not callable(getattr(implementation, f, None))
    ]
    if missing:
        raise WorkbenchError(
            f"problem kind '{name}': module {module} lacks {', '.join(missing)} "
            "(the contract is read, solve, write; workbench.ocp.contract)"
        )
    if KINDS.get(name, module) != module:
        raise WorkbenchError(f"problem kind '{name}' is already {KINDS[name]}, not {module}")
    KINDS[name] = module


def module(name: str) -> ModuleType:
    """The module of the kind ``name`` (WorkbenchError naming the known kinds)."""
    if name not in KINDS:
        raise WorkbenchError(f"unknown problem kind '{name}'; known: {', '.join(KINDS)}")
    return importlib.import_module(KINDS[name])


def kind_of(raw: dict, source: str) -> str:
    """The kind a problem file's table says (``kind``, default :data:`DEFAULT`)."""
    return Section(raw, source).string("kind", DEFAULT, choices=tuple(KINDS))


def read_dict(raw: dict, source: str, base: Path) -> Problem:
    """A problem from a problem file's table (``source`` names it, ``base`` is its folder)."""
    name = kind_of(raw, source)
    rest = {key: value for key, value in raw.items() if key != "kind"}
    return module(name).read(rest, source, Path(base))


def read(path: str | os.PathLike) -> Problem:
    """Read a problem file of any kind; every error names the file and the key."""
    path = Path(path)
    return read_dict(read_toml(path, "problem file"), str(path), path.parent)


def solve(problem: Problem, progress: bool = True, warm: dict[str, Array] | None = None) -> Result:
    """Solve ``problem`` with its kind (``progress``: the solver's iteration lines;
    ``warm``: a neighbour's :meth:`Result.arrays` to start from)."""
    return module(problem.kind).solve(problem, progress=progress, warm=warm)


def write(result: Result, out: str | os.PathLike) -> None:
    """Write ``result``'s files into the results directory ``out``, replaced whole and
    atomically (:func:`workbench.io.results_directory`)."""
    with results_directory(out) as stage:
        module(result.problem.kind).write(result, stage)
