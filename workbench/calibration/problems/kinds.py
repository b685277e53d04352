"""The calibration kinds, registered in one place: what each needs and the problems it makes.

A kind turns a log into a problem satisfying
:class:`workbench.calibration.problems.problem.CalibrationProblem`, the contract the
one validation loop (:mod:`workbench.calibration.cross_validation`) runs:

* ``kinematic``: :mod:`workbench.calibration.problems.kinematic_problem` (measured poses);
* ``twist``: :mod:`workbench.calibration.problems.twist_problem` (torques; closed chains too);
* ``dynamic``: :mod:`workbench.calibration.problems.dynamic_problem` in memory and
  :mod:`workbench.calibration.problems.accumulated_dynamic` for a log too long for memory.

To add a kind: write its problem module (copy
:mod:`workbench.calibration.problems.twist_problem`), add a :class:`Kind` to
:data:`KINDS` and its name and description to
:mod:`workbench.calibration.problems.kind_names`; the command line
(``calibrate``, ``simulate-log``) and :mod:`workbench.calibration.run` read
their choices and the options' legality here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workbench.calibration.problems.accumulated_dynamic import AccumulatedDynamicProblem
from workbench.calibration.problems.dynamic_problem import DynamicProblem
from workbench.calibration.problems.kind_names import DESCRIPTIONS
from workbench.calibration.problems.kinematic_problem import KinematicCalibrationProblem
from workbench.calibration.problems.problem import CalibrationProblem, Options
from workbench.calibration.problems.twist_problem import TwistCalibrationProblem
from workbench.chain import Chain
from workbench.errors import WorkbenchError
from workbench.recordings.chunked_logs import ChunkedLog
from workbench.recordings.log import Log


@dataclass(frozen=True)
class Kind:
    """A registered calibration kind.

    ``prepare`` makes the problem of a log in memory, ``accumulate`` that of
    a large log (:class:`~workbench.recordings.chunked_logs.ChunkedLog`,
    given the validation scheme its blocks follow), None when the kind has
    none; ``reads`` names the run options (fields of
    :class:`workbench.calibration.run.Request`) that only this kind reads;
    ``closed_chains`` whether it calibrates a closed chain from its motors' log.
    """

    name: str
    requires: tuple[str, ...]  # what read_log must find: "tau", "position"
    prepare: Callable[[Chain, Log, Options], CalibrationProblem]
    accumulate: Callable[[Chain, ChunkedLog, Options, Any], CalibrationProblem] | None = None
    reads: tuple[str, ...] = ()
    closed_chains: bool = False

    @property
    def description(self) -> str:
        return DESCRIPTIONS[self.name]

    def problem(
        self, chain: Chain, log: Log | ChunkedLog, options: Options, validation: Any = None
    ) -> CalibrationProblem:
        """The problem of ``log``: accumulated for a large log, else in memory (``validation``:
        the scheme, a second log or None, as :func:`workbench.calibration.calibrate` got it)."""
        if not isinstance(log, ChunkedLog):
            self.check_log_fields(log)
            return self.prepare(chain, log, options)
        self.check_large_log(log.source)
        return self.accumulate(chain, log, options, validation)

    def check_log_fields(self, log: Log) -> None:
        """Refuse a log in memory without what the kind fits: torques with the joint velocities
        and accelerations, or measured poses (a tool position or markers)."""
        missing = []
        if "tau" in self.requires:
            missing += [name for name in ("dq", "ddq", "tau") if getattr(log, name) is None]
        if "position" in self.requires and log.position is None and not log.markers:
            missing.append("position (or markers)")
        if missing:
            raise WorkbenchError(
                f"{log.source}: the {self.name} calibration needs {', '.join(missing)} in the log"
            )

    def check_large_log(self, source: str) -> None:
        """Refuse a large log (Parquet, a directory of chunks) if the kind has no accumulated
        problem, naming the kinds that have one."""
        if self.accumulate is None:
            accumulated = [k.name for k in KINDS.values() if k.accumulate is not None]
            raise WorkbenchError(
                f"--log {source}: a Parquet file or a directory of chunks is a large log, "
                f"which --kind {' or '.join(accumulated)} reads chunk by chunk; --kind "
                f"{self.name} needs a log that fits in memory (a CSV or NPZ table, a log "
                "description or a bag)"
            )


KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind("kinematic", ("position",), KinematicCalibrationProblem,
             reads=("rotation_weight",)),
        Kind("twist", ("tau",), TwistCalibrationProblem, reads=("inertial",),
             closed_chains=True),
        Kind("dynamic", ("tau",), DynamicProblem, AccumulatedDynamicProblem,
             reads=("physical", "unconstrained", "payload_log", "prior_weights")),
    )
}  # fmt: skip


def kind(name: str) -> Kind:
    """The registered kind ``name``."""
    try:
        return KINDS[name]
    except KeyError:
        raise WorkbenchError(
            f"unknown calibration kind '{name}'; choose one of {', '.join(KINDS)}"
        ) from None
