"""The contract every optimal-control problem kind meets: read, solve, write.

A problem kind is one module (registered by name in :mod:`workbench.ocp.kinds`)
that defines three functions and the name of its kind::

    NAME = "reach"
    def read(raw: dict, source: str, base: Path) -> Problem      # a parsed problem file
    def solve(problem, progress: bool = True, warm: dict | None = None) -> Result
    def write(result, stage: Path) -> None                       # every result file

``read`` gets the problem file's TOML table without its ``kind`` key,
``source`` (the file, for messages) and ``base`` (the directory relative paths
in it are resolved against); every error is a :class:`WorkbenchError` naming
the file and key. ``solve`` returns a :class:`Result` whose status says
whether it solved; a problem that is provably impossible before any solve (a
goal beyond the model's reach) raises :class:`Infeasible`. ``warm`` holds the
arrays of a neighbouring problem's :meth:`Result.arrays` (a sweep's warm
start) or is None. ``write`` writes into a staging directory that
:func:`workbench.ocp.kinds.write` publishes whole.

The command line (``workbench reach``) and the sweep (:mod:`workbench.sweep`)
use only this contract: a new kind is a new module and one entry in
:data:`workbench.ocp.kinds.KINDS` (``ocp/reach_kind.py`` is the one to copy).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from workbench.errors import WorkbenchError
from workbench.lie import Array

STATUSES = ("solved", "infeasible", "failed")


class Infeasible(WorkbenchError):
    """A problem shown impossible before any solve (e.g. a goal beyond the model's reach).

    The message names the problem file and why. The command line prints it as
    one line and exits with code 2 (the input is wrong); a sweep records the
    task as "infeasible".
    """


class Problem(Protocol):
    """A problem as its kind's ``read`` returns it."""

    kind: str  # the name it is registered under in workbench.ocp.kinds
    source: str  # the problem file, for messages


@runtime_checkable
class GoalProblem(Protocol):
    """A problem with a goal a sweep's ``[goal]`` table may vary (``task.goal``).

    ``task_space`` is "pointing" (a direction) or "position" (m).
    """

    kind: str
    source: str
    goal: Array

    @property
    def task_space(self) -> str: ...


class Result(Protocol):
    """What ``solve`` returns: a dataclass with these fields and methods.

    ``status`` is one of :data:`STATUSES`; ``objective`` is in the problem's
    objective unit; ``solve_time_s`` is the solver's time (s); ``warnings``
    are one-line sentences.
    """

    problem: Problem
    status: str
    message: str
    objective: float
    iterations: int
    solve_time_s: float
    warnings: list[str]

    def row(self) -> dict[str, float | str]:
        """The kind's own columns of a sweep's table (numbers and strings; NaN when unknown)."""
        ...

    def arrays(self) -> dict[str, Array] | None:
        """The trajectory a sweep stores and warm-starts neighbours from, or None."""
        ...

    def describe(self) -> str:
        """One line for the command line: objective with its unit, iterations, checks."""
        ...
