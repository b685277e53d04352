"""The calibration kinds, registered in one place: what each needs, fits, predicts and reports.

A kind turns a log into a *problem* whose samples (torque equations after
decimation, or measured poses) can be split for validation. Every problem
offers the same operations, which :mod:`workbench.calibration.report` runs
for any kind:

* ``times`` (M,) of its samples, ``labels`` and ``unit`` of its channels;
* ``candidates``: the models it may fit, simplest first (the kinematic
  kind's nested :class:`Candidate` s, chosen by the held-out folds in
  :mod:`workbench.calibration.selection`; one ``None`` for the others) and
  ``nominal_candidate``, the one that is the nominal model (or None);
* ``fit(rows, candidate)``: calibrate on the samples ``rows`` (None: all);
* ``baseline(rows)``: the nominal model on those samples: for the
  kinematic kind the ``frames`` candidate (the model as loaded, joints
  untouched, with the device and marker frames fitted on ``rows``);
  otherwise the nominal model as loaded (None);
* ``errors(fit, rows)`` (len(rows), k): prediction minus measurement;
  ``measured(rows)`` the measurements (torques) or None (poses);
* ``heldout(errors, rows)``: the figures of merit, ``relative_rms`` first;
  ``channels(errors)``: the errors as the report plots them (3-D distances
  and angles for poses), with labels and unit; ``rms(errors)``: the RMS
  figure of ``summary.json``'s ``rms`` entries, ``rms_convention`` what it is;
* ``summary(fit)``, ``parameters(fit)`` (rows of ``parameters.csv``),
  ``chain(fit)`` (the calibrated model) and ``files(fit)`` (extra outputs).

To add a kind: write its problem class and add a :class:`Kind` to
:data:`KINDS`; the command line and ``simulate-log`` read their choices here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from workbench import lie
from workbench.calibration.chunked_logs import ChunkedLog
from workbench.calibration.closed_chain import ClosedChainTwistProblem
from workbench.calibration.drive_shapes import (
    ShapeSearch,
    has_shapes,
    refuse_further,
    shape_note,
    shape_parameters,
    shape_summary,
    shaped_fit,
)
from workbench.calibration.drives import DEFAULT_TERMS, Drives, drive_file_text
from workbench.calibration.dynamic import fit_equations, payload_torques, torque_equations
from workbench.calibration.kinematic import PARAMETERS, KinematicProblem, calibrate_kinematic
from workbench.calibration.normal_equations import Split, accumulate
from workbench.calibration.samples import Log
from workbench.calibration.term_screening import benefit_summary, screen_terms, trial_terms
from workbench.calibration.torque_model import TorqueModel, base_parameters
from workbench.calibration.twist import TwistModel, TwistProblem, calibrate_twist
from workbench.calibration.units import effort_unit, joint_units
from workbench.calibration.validation import relative_rms
from workbench.chain import Chain
from workbench.closed_chains.kinematics import solve_passive
from workbench.closed_chains.model import ClosedChain
from workbench.errors import WorkbenchError
from workbench.eta import twist_covariance
from workbench.lie import Array


@dataclass(frozen=True)
class Options:
    """What a calibration run may set; None keeps the kind's or the log's default."""

    loss: str = "linear"
    f_scale: float | None = None
    physical: bool = False
    inertial: bool = False
    weighted: bool = True
    terms: tuple[str, ...] | None = None
    nominal_drives: dict[str, float] | None = None  # name -> value, e.g. from a drive file
    rotation_weight: float | None = None
    # kinematic: frames, offsets, twists or auto (chosen by the folds, with a ridge); with
    # auto the dynamic kind also chooses its drive terms (DynamicProblem)
    parameters: str = "auto"
    progress: bool = False


RIDGES = (0.0, 1e-4, 1e-2, 1.0)  # the ridge weights auto tries (KinematicProblem.ridge)


@dataclass(frozen=True)
class Candidate:
    """What a kinematic calibration fits (``frames``, ``offsets``, ``twists``) and its ridge
    toward the nominal (:class:`~workbench.calibration.kinematic.KinematicProblem`)."""

    parameters: str
    ridge: float = 0.0

    @property
    def name(self) -> str:
        return self.parameters if not self.ridge else f"{self.parameters}, ridge {self.ridge:g}"


def kinematic_candidates(parameters: str) -> tuple[Candidate, ...]:
    """The candidates of ``--parameters``: ``frames`` first (the nominal), then one forced
    structure, or (``auto``) offsets and twists with every ridge of :data:`RIDGES`."""
    if parameters == "auto":
        chosen = [Candidate(p, r) for p in PARAMETERS[1:] for r in RIDGES]
    elif parameters in PARAMETERS:
        chosen = [Candidate(parameters)] if parameters != "frames" else []
    else:
        raise WorkbenchError(
            f"unknown --parameters '{parameters}'; choose auto or one of {', '.join(PARAMETERS)}"
        )
    return (Candidate("frames"), *chosen)


@dataclass(frozen=True)
class Kind:
    """A registered calibration kind."""

    name: str
    requires: tuple[str, ...]  # what read_log must find: "tau", "position"
    f_scale: float  # default robust-loss scale, in the residual unit
    description: str
    prepare: Callable[[Chain, Log, Options], Any]


def _drives(log: Log | ChunkedLog, terms: tuple[str, ...] | None = None) -> Drives:
    """The drives of ``log`` with ``terms`` (default: the log description's, else friction)."""
    terms = tuple(terms if terms is not None else log.defaults.terms or DEFAULT_TERMS)
    return Drives(len(log.joint_names), terms, log.transmission, log.min_speed)


def _nominal_drive_values(drives: Drives, options: Options) -> Array:
    given = options.nominal_drives or {}
    return np.array([given.get(name, 0.0) for name in drives.names])


def _rms(x: Array, axis=None) -> Any:
    return np.sqrt(np.nanmean(np.square(x), axis=axis))


def _torque_heldout(errors: Array, measured: Array, labels) -> dict[str, Any]:
    """Pooled relative RMS, then per joint: relative RMS |e_j| / |tau_j| and RMS (its unit)."""
    error2 = np.nansum(np.square(errors), axis=0)
    measured2 = np.nansum(np.square(measured), axis=0)
    return {
        "relative_rms": relative_rms(errors + measured, measured),
        "relative_rms_per_joint": dict(
            zip(labels, _ratio(error2, measured2).tolist(), strict=True)
        ),
        "rms": dict(zip(labels, _rms(errors, axis=0).tolist(), strict=True)),
    }


def _ratio(error2: Array, measured2: Array) -> Array:
    """sqrt(error2 / measured2) per joint (inf where nothing was measured)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(measured2 > 0, np.sqrt(error2 / measured2), np.inf)


class _TorqueKind:
    """What the torque kinds share: one candidate, channels and RMS in each joint's unit."""

    candidates: tuple[None, ...] = (None,)
    nominal_candidate = None
    nominal_model = (
        "the model as loaded, with the drive file's drive terms (zero where it has none): "
        "nothing fitted"
    )
    rms_convention = "RMS over the joints' samples, each in its joint's effort unit"

    joint_chain: Chain  # the chain whose joints ``labels`` name

    @property
    def unit(self) -> str:
        return effort_unit(self.joint_chain, self.labels)

    def units(self) -> dict[str, Any]:
        return {"effort": self.unit, "joints": joint_units(self.joint_chain, self.labels)}

    def channels(self, errors: Array) -> tuple[Array, tuple[str, ...], str]:
        units = self.units()
        labels = tuple(f"{j} [{units['joints'][j]['effort']}]" for j in self.labels)
        return errors, labels, units["effort"]

    def rms(self, errors: Array) -> float:
        return float(np.sqrt(np.nanmean(np.square(errors))))

    def loss(self, errors: Array) -> Array:
        """Per sample, the squared torque errors summed over the joints (the pooled score's)."""
        return np.nansum(np.square(errors), axis=1)


# ----------------------------------------------------------------- dynamic
@dataclass(frozen=True)
class Terms:
    """A dynamic candidate: the torque model with these drive terms (nested prefixes of the
    log's or the default terms, chosen by the folds like the kinematic candidates)."""

    terms: tuple[str, ...]

    @property
    def name(self) -> str:
        return " + ".join(("inertial base parameters", *self.terms))


@dataclass(frozen=True)
class _TorqueSetup:
    """The torque model of some terms, its base parameters, nominal values and equations."""

    model: TorqueModel
    base: Any
    x0: Array
    equations: Any
    shapes: ShapeSearch | None = None  # outer searches of Stribeck speeds and sensor delay

    def equations_of(self, fit) -> Any:
        """The equations with ``fit``'s drive shapes."""
        return self.equations if self.shapes is None else self.shapes.equations_of(fit.shapes)


class DynamicProblem(_TorqueKind):
    """Base parameters and drive terms from joint torques (:mod:`.dynamic`).

    Candidates (in-memory logs, ``parameters`` auto and no ``terms`` given):
    the inertial base parameters alone, then with each of the log's (or the
    default) drive terms added in their order; further terms (Stribeck,
    load-dependent friction, temperature, sensor delay) are screened one by
    one first (:mod:`workbench.calibration.term_screening`); given ``terms``
    are fitted as they are.
    """

    term_benefits: list[dict[str, Any]] | None = None

    def __init__(
        self, chain: Chain, log: Log | ChunkedLog, options: Options, split: Split | None = None
    ) -> None:
        """``split``: the validation blocks of a large log's accumulated equations
        (:mod:`workbench.calibration.normal_equations`); its problem has no ``times``."""
        self.options = options
        self.log = log
        drives = _drives(log, options.terms)
        self.labels = chain.joint_names
        self.joint_chain = chain
        self.setups: dict[tuple[str, ...], _TorqueSetup] = {}
        full = self.setup(drives.terms, split)
        self.model, self.base, self.x0, self.equations = (
            full.model, full.base, full.x0, full.equations,
        )  # fmt: skip
        if isinstance(log, ChunkedLog):
            return
        self.times = self.equations.t
        if options.terms is None and options.parameters == "auto" and drives.terms:
            self.candidates = tuple(Terms(t) for t in trial_terms(drives.terms))

    def screen(self, score, beats) -> None:
        """Keep the further drive terms that the folds find useful (:mod:`.term_screening`)."""
        terms = self.model.drives.terms
        if len(self.candidates) > 1 and terms != trial_terms(terms)[-1]:
            self.candidates, self.term_benefits = screen_terms(terms, Terms, score, beats)

    def setup(self, terms: tuple[str, ...], split: Split | None = None) -> _TorqueSetup:
        """The torque model with ``terms``, built once."""
        if terms not in self.setups:
            log, options = self.log, self.options
            drives = _drives(log, terms)
            model = TorqueModel(self.joint_chain, drives)
            base = base_parameters(model)
            x0 = model.values(_nominal_drive_values(drives, options))
            if isinstance(log, ChunkedLog):
                refuse_further(drives, log.source, "a log read chunk by chunk")
                equations = accumulate(model, base, log, split, progress=options.progress)
            else:
                equations = torque_equations(model, base, log)
            shapes = None
            if has_shapes(drives) and not isinstance(log, ChunkedLog):
                payload = payload_torques(model.chain, log, slice(0, len(log)))
                shapes = ShapeSearch(model, base, log, equations, payload, x0)
            self.setups[terms] = _TorqueSetup(model, base, x0, equations, shapes)
        return self.setups[terms]

    def fit(self, rows: np.ndarray | None, candidate: Terms | None = None):
        """Identify the model of ``candidate`` (default: all terms) on ``rows`` (None: all)."""
        o = self.options
        s = self.setup(candidate.terms) if candidate else self.setups[self.model.drives.terms]

        def fit(model: TorqueModel, equations) -> Any:
            return fit_equations(
                model, s.base, equations, rows, x0=s.x0, weighted=o.weighted,
                loss=o.loss, f_scale=o.f_scale or 1.0, physical=o.physical,
            )  # fmt: skip

        if s.shapes is None:
            return fit(s.model, s.equations)
        result, shapes = shaped_fit(s.shapes, rows, fit)
        return replace(result, shapes=shapes)

    def baseline(self, rows: np.ndarray | None) -> None:
        return None

    def errors(self, fit, rows: np.ndarray) -> Array:
        if fit is None:
            return self.equations.X[rows] @ (self.base.matrix @ self.x0) - self.equations.tau[rows]
        equations = self.setups[fit.model.drives.terms].equations_of(fit)
        return equations.X[rows] @ fit.beta - equations.tau[rows]

    def measured(self, rows: np.ndarray) -> Array:
        return self.equations.tau[rows]

    def heldout(self, errors: Array, rows: np.ndarray) -> dict[str, Any]:
        return _torque_heldout(errors, self.measured(rows), self.labels)

    def parameters(self, fit) -> list[tuple[str, float, float]]:
        names = fit.base.names
        rows = list(zip(names, fit.beta.tolist(), _relative(fit.std, fit.beta), strict=True))
        return rows + shape_parameters(fit.shapes)

    def chain(self, fit) -> Chain:
        return fit.chain

    def dynamics(self, fit) -> dict[str, tuple[float, float]]:
        return _urdf_dynamics(fit.model.drives, fit.drive_values, self.labels)

    def files(self, fit) -> dict[str, str]:
        if not fit.model.drives.names:
            return {}
        note = "Identified by workbench calibrate --kind dynamic (completed base parameters)."
        note += shape_note(fit.shapes)
        return {
            "calibrated.drives.toml": drive_file_text(
                fit.model.drives, fit.drive_values, note=note + _prismatic_note(self.units())
            )
        }

    def summary(self, fit) -> dict[str, Any]:
        n = fit.model.chain.n
        names = fit.model.names
        x0 = self.setups[fit.model.drives.terms].x0
        return {
            "terms": list(fit.model.drives.terms),
            "condition_number": fit.condition_number,
            "sigma_per_joint": dict(zip(self.labels, fit.sigma.tolist(), strict=True)),
            "units": self.units(),
            "equations": {"samples": len(self.equations), "rows_fitted": fit.rows},
            "base_parameters": {
                "names": list(fit.base.names),
                "value": fit.beta.tolist(),
                "std": fit.std.tolist(),
                "relative_std_percent": [std_figure(r) for r in _relative(fit.std, fit.beta)],
                "nominal": (fit.base.matrix @ x0).tolist(),
            },
            "standard_parameters": dict(zip(names, fit.x.tolist(), strict=True)),
            "phi_order": ["m", "hx", "hy", "hz", "Ixx", "Iyy", "Izz", "Ixy", "Ixz", "Iyz"],
            "phi": fit.chain.phi.reshape(n, 10).tolist(),
            "physically_consistent": fit.physically_consistent,
            "iterations": fit.iterations,
            **shape_summary(fit.shapes, self.labels),
            **benefit_summary(self.term_benefits),
        }


# ------------------------------------------------------------------- twist
class TwistCalibrationProblem(_TorqueKind):
    """Joint twists (and optionally inertias) with drive terms from torques (:mod:`.twist`).

    ``chain`` may be a closed chain, whose log holds the motors only
    (:mod:`workbench.calibration.closed_chain`).
    """

    def __init__(self, chain: Chain, log: Log, options: Options) -> None:
        self.options = options
        self.nominal = chain
        drives = _drives(log, options.terms)
        refuse_further(drives, log.source, "the twist calibration")
        closed = isinstance(chain, ClosedChain)
        kind = ClosedChainTwistProblem if closed else TwistProblem
        self.problem = kind(log, options.inertial, drives)
        self.tree = chain.tree if closed else chain
        self.x0 = _nominal_drive_values(drives, options)
        n_equations = self.problem.measured().shape[0]
        self.times = log.t[log.equation_samples()][:n_equations]
        self.labels = chain.actuated if closed else chain.joint_names
        self.joint_chain = self.tree

    def _rows(self, rows):
        return replace(self.problem, rows=rows)

    def fit(self, rows: np.ndarray | None, candidate: None = None):
        o = self.options
        return calibrate_twist(
            self.nominal, self._rows(rows), start=self.x0, loss=o.loss, f_scale=o.f_scale or 1.0,
            progress=o.progress,
        )  # fmt: skip

    def baseline(self, rows: np.ndarray | None) -> None:
        return None

    def errors(self, fit, rows: np.ndarray) -> Array:
        model = TwistModel(self.nominal, self.x0) if fit is None else fit.model
        problem = self._rows(rows)
        return problem.predict(model) - problem.measured()

    def measured(self, rows: np.ndarray) -> Array:
        return self._rows(rows).measured()

    def heldout(self, errors: Array, rows: np.ndarray) -> dict[str, Any]:
        return _torque_heldout(errors, self.measured(rows), self.labels)

    def parameters(self, fit) -> list[tuple[str, float, float]]:
        chain, n = self.tree, self.tree.n
        std = np.sqrt(np.clip(np.diag(fit.covariance), 0.0, None))
        std[np.linalg.norm(fit.solution.S, axis=1) < 1e-9] = 0.0  # not moved: fixed
        rows = []
        names = [*chain.joint_names, f"tool:{chain.tool_name}"]
        for k, name in enumerate(names[:n]):
            for c, axis in enumerate(("wx", "wy", "wz", "vx", "vy", "vz")):
                value = float(fit.eta[6 * k + c])
                rows.append((f"eta_{name}_{axis}", value, _rel(std[6 * k + c], value)))
        offset = 6 * (n + 1) + (10 * n if self.options.inertial else 0)
        for k, name in enumerate(self.problem.terms.names):
            value = float(fit.model.drive[k])
            rows.append((name, value, _rel(std[offset + k], value)))
        return rows

    def chain(self, fit) -> Chain:
        return fit.chain.tree if self.tree is not self.nominal else fit.chain

    def dynamics(self, fit) -> dict[str, tuple[float, float]]:
        return _urdf_dynamics(self.problem.terms, fit.model.drive, self.labels)

    def files(self, fit) -> dict[str, str]:
        note = "Identified by workbench calibrate --kind twist." + _prismatic_note(self.units())
        files = {
            "calibrated.drives.toml": drive_file_text(
                self.problem.terms, fit.model.drive, note=note
            )
        }
        if self.tree is not self.nominal:  # a closed chain: its closure file on the new tree
            closed = fit.chain
            home = solve_passive(closed, closed.home[closed.active], guess=closed.home)
            files["calibrated.toml"] = replace(closed, home=home).closure_file_text(
                "calibrated.urdf"
            )
        return files

    def summary(self, fit) -> dict[str, Any]:
        chain, n = self.tree, self.tree.n
        fitted = self.chain(fit)
        p = 6 * (n + 1)
        std = np.sqrt(np.clip(np.diag(fit.covariance), 0.0, None))
        summary = {
            "terms": list(self.problem.terms.terms),
            "inertial": self.options.inertial,
            "iterations": fit.solution.iterations,
            "identifiable_dimension": int(fit.subspace.basis.shape[1]),
            "condition_number": fit.subspace.condition_number,
            "sigma": fit.solution.sigma,
            "units": self.units(),
            "twists": fitted.twists.tolist(),
            "twist_std": np.sqrt(
                np.einsum("nii->ni", twist_covariance(fitted, fit.covariance[:p, :p]))
            ).tolist(),
            "drive_parameters": dict(
                zip(self.problem.terms.names, fit.model.drive.tolist(), strict=True)
            ),
            "eta_observability": {
                "max_std": fit.observability.max_std,
                "calibrated_directions": fit.observability.kept,
                "principal_std": fit.observability.std.tolist(),
                "note": "standard deviations (rad, m) of the principal eta directions with the "
                "inertial and drive parameters fitted too; only those below max_std move",
            },
            **_eta_entries(fit.eta, std[:p], fit.subspace.null[:p], chain),
        }
        if self.options.inertial:
            summary["phi"] = fitted.phi.tolist()
        return summary


# --------------------------------------------------------------- kinematic
class KinematicCalibrationProblem:
    """Joint twists, marker frames and the device frame from measured poses (:mod:`.kinematic`).

    Position errors are 3-D distances (m), orientation errors rotation
    angles (rad), in training and held-out figures alike. Rotations and
    positions are weighed together by one rotation weight (m/rad) for every
    fit and figure: ``--rotation-weight``, else the ratio of the position and
    rotation residual RMS of the nominal model (the ``frames`` candidate) on
    all samples.
    """

    unit = "m"
    nominal_candidate = Candidate("frames")
    nominal_model = (
        "the model as loaded (joint twists and zeros untouched) with the measuring device's "
        "frame (when unknown) and the marker frames fitted on the same training samples: the "
        "'frames' candidate"
    )
    rms_convention = "3-D distance, m"

    def __init__(self, chain: Chain, log: Log, options: Options) -> None:
        self.options = options
        self.nominal = chain
        self.problem = KinematicProblem.from_log(log)
        self.candidates = kinematic_candidates(options.parameters)
        self.times = log.t
        self.rotation_weight = options.rotation_weight or 1.0
        self._nominal_fit = None
        if options.rotation_weight is None and self.problem.has_rotation:
            self._nominal_fit = self._calibrate(
                replace(self.problem, parameters="frames"), rotation_weight=None
            )
            self.rotation_weight = self._nominal_fit.rotation_weight
        labels = []
        for m in self.problem.markers:
            if m.position is not None:
                labels += [f"{m.name}:p{a}" for a in "xyz"]
            if m.rotation is not None:
                labels += [f"{m.name}:r{a}" for a in "xyz"]
        self.labels = tuple(labels)

    def _calibrate(self, problem: KinematicProblem, rotation_weight: float | None):
        o = self.options
        return calibrate_kinematic(
            self.nominal, problem, loss=o.loss, f_scale=o.f_scale or 1e-3,
            rotation_weight=rotation_weight, progress=o.progress,
        )  # fmt: skip

    def fit(self, rows: np.ndarray | None, candidate: Candidate | None = None):
        """Calibrate ``candidate`` (default: the last, most flexible) on ``rows`` (None: all)."""
        candidate = candidate or self.candidates[-1]
        if rows is None and candidate == self.nominal_candidate and self._nominal_fit:
            return self._nominal_fit
        problem = self.problem if rows is None else self.problem.subset(rows)
        return self._calibrate(
            replace(problem, parameters=candidate.parameters, ridge=candidate.ridge),
            self.rotation_weight,
        )

    def baseline(self, rows: np.ndarray | None):
        """The nominal model: joints as loaded, device and marker frames fitted on ``rows``."""
        return self.fit(rows, self.nominal_candidate)

    def errors(self, fit, rows: np.ndarray) -> Array:
        problem = self.problem.subset(rows)
        model = problem.start(self.nominal) if fit is None else fit.model
        out = []
        for marker, (p, R) in zip(problem.markers, problem.predict(model), strict=True):
            if marker.position is not None:
                out.append(p - marker.position)
            if marker.rotation is not None:
                out.append(lie.log_so3(R @ np.swapaxes(marker.rotation, 1, 2)))
        return np.concatenate(out, axis=1)

    def measured(self, rows: np.ndarray) -> None:
        return None

    def _split(self, errors: Array) -> tuple[dict[str, Array], dict[str, Array]]:
        """Per marker: position error distances (N,) in m and rotation angles (N,) in rad."""
        distances, angles = {}, {}
        column = 0
        for m in self.problem.markers:
            if m.position is not None:
                distances[m.name] = np.linalg.norm(errors[:, column : column + 3], axis=1)
                column += 3
            if m.rotation is not None:
                angles[m.name] = np.linalg.norm(errors[:, column : column + 3], axis=1)
                column += 3
        return distances, angles

    def channels(self, errors: Array) -> tuple[Array, tuple[str, ...], str]:
        """Per marker its position error (3-D distance, m) and orientation error (angle, rad)."""
        distances, angles = self._split(errors)
        labels = [f"{k} position [m]" for k in distances] + [f"{k} angle [rad]" for k in angles]
        values = np.stack([*distances.values(), *angles.values()], axis=1)
        return values, tuple(labels), ""

    def rms(self, errors: Array) -> float:
        """RMS of the 3-D position error distances over markers and samples (m)."""
        distances, _ = self._split(errors)
        return float(_rms(np.stack(list(distances.values()), axis=1)))

    def loss(self, errors: Array) -> Array:
        """Per sample, squared distances plus weighted squared angles over the markers (the
        pooled score's)."""
        distances, angles = self._split(errors)
        out = np.nansum(np.stack(list(distances.values()), axis=1) ** 2, axis=1)
        if angles:
            angle2 = np.nansum(np.stack(list(angles.values()), axis=1) ** 2, axis=1)
            out = out + self.rotation_weight**2 * angle2
        return out

    def heldout(self, errors: Array, rows: np.ndarray) -> dict[str, Any]:
        distances, angles = self._split(errors)
        measured = np.stack(
            [m.position[rows] for m in self.problem.markers if m.position is not None], axis=1
        )
        centred = measured - np.nanmean(measured, axis=0)
        error2 = np.nanmean(np.stack(list(distances.values()), axis=1) ** 2)
        spread2 = np.nanmean(np.sum(centred**2, axis=2))
        figures = {"position_rms_m": float(np.sqrt(error2))}
        per_marker = {k: {"position_rms_m": float(_rms(v))} for k, v in distances.items()}
        if angles:
            angle = np.stack(list(angles.values()), axis=1)
            figures["orientation_rms_rad"] = float(_rms(angle))
            for k, v in angles.items():
                per_marker.setdefault(k, {})["orientation_rms_rad"] = float(_rms(v))
            spread = [
                _rotation_spread(m.rotation[rows])
                for m in self.problem.markers
                if m.rotation is not None
            ]
            w = self.rotation_weight
            error2 += w**2 * np.nanmean(angle**2)
            spread2 += w**2 * np.mean(np.square(np.concatenate(spread)))
            figures["rotation_weight_m_per_rad"] = w
        return {"relative_rms": float(np.sqrt(error2 / spread2)), **figures, "markers": per_marker}

    def parameters(self, fit) -> list[tuple[str, float, float]]:
        """eta per joint, device and marker frames (log of their poses), with relative stds:
        0 (fixed) for those the fit did not move (outside its directions, e.g. every joint's
        for the ``frames`` candidate)."""
        chain, n = self.nominal, self.nominal.n
        rows = []
        std = np.sqrt(np.clip(np.diag(fit.covariance), 0.0, None))
        for k, name in enumerate(chain.joint_names):
            for c, axis in enumerate(("wx", "wy", "wz", "vx", "vy", "vz")):
                value = float(fit.eta[6 * k + c])
                rows.append((f"eta_{name}_{axis}", value, _rel(std[6 * k + c], value)))
        d, _ = self.problem.sizes
        if d:
            xi = lie.log_se3(fit.model.device)
            for c, axis in enumerate(("wx", "wy", "wz", "vx", "vy", "vz")):
                rows.append((f"device_{axis}", float(xi[c]), _rel(std[6 * n + c], xi[c])))
        for k, marker in enumerate(self.problem.markers):
            p = fit.model.placements[k]
            xi = lie.log_se3(p)
            base = 6 * n + d + 6 * k
            for c, axis in enumerate(("wx", "wy", "wz", "vx", "vy", "vz")):
                rows.append(
                    (f"marker_{marker.name}_{axis}", float(xi[c]), _rel(std[base + c], xi[c]))
                )
        return rows

    def chain(self, fit) -> Chain:
        return fit.chain

    def dynamics(self, fit) -> dict[str, tuple[float, float]]:
        return {}

    def files(self, fit) -> dict[str, str]:
        return {}

    def summary(self, fit) -> dict[str, Any]:
        cov_twist = twist_covariance(fit.chain, fit.covariance)
        summary = {
            "iterations": fit.solution.iterations,
            "identifiable_dimension": int(fit.subspace.basis.shape[1]),
            "condition_number": fit.subspace.condition_number,
            "sigma": fit.solution.sigma,
            "rotation_weight_m_per_rad": fit.rotation_weight,
            "device_frame_known": self.problem.device_known,
            "base_in_device_frame": fit.model.device.tolist(),
            "markers": {
                m.name: {
                    "frame": m.frame or self.nominal.tool_name,
                    "placement": fit.model.placements[k].tolist(),
                }
                for k, m in enumerate(self.problem.markers)
            },
            "position_error": "3-D distance, m",
            "orientation_error": "rotation angle, rad",
            "parameters": fit.parameters,
            "ridge": fit.ridge,
            "joint_coordinates": {
                "meaning": _COORDINATES[fit.parameters],
                "value": fit.model.coordinates.tolist(),
            },
            "twists": fit.chain.twists.tolist(),
            "twist_std": np.sqrt(np.einsum("nii->ni", cov_twist)).tolist(),
            "tool_position": fit.chain.tool_frame[:3, 3].tolist(),
            **_eta_entries(
                fit.eta, fit.eta_std, fit.subspace.null[: 6 * (self.nominal.n + 1)], self.nominal
            ),
        }
        return summary


_COORDINATES = {
    "frames": "none: the joints are as loaded",
    "offsets": "joint zero offsets o (q + o), rad for revolute and m for prismatic joints",
    "twists": "the joints' move from the nominal in its twist-changing eta directions "
    "(identifiable_eta_basis of the nominal), rad and m",
}


def _rotation_spread(R: Array) -> Array:
    """Angles (N,) of rotations from their mean (the rotation nearest the arithmetic mean)."""
    U, _, Vt = np.linalg.svd(np.nanmean(R, axis=0))
    mean = U @ np.diag([1.0, 1.0, np.linalg.det(U @ Vt)]) @ Vt
    return np.linalg.norm(lie.log_so3(R @ mean.T), axis=-1)


# ----------------------------------------------------------------- helpers
def _rel(std: float, value: float) -> float:
    """Relative std in percent: 0 for a fixed parameter (std 0), inf for a value of 0."""
    if std == 0:
        return 0.0
    return float(100.0 * std / abs(value)) if value != 0 else float("inf")


def _relative(std: Array, values: Array) -> list[float]:
    return [_rel(float(s), float(v)) for s, v in zip(std, values, strict=True)]


MEANINGFUL_PERCENT = 1e-9  # relative standard deviations below this are rounding, not data


def std_figure(percent: float) -> float | str:
    """A relative std (percent) as reports show it: ``"0 (fixed)"`` for a parameter that was
    not estimated (std 0: fixed by the gauge or the candidate), ``"<1e-9"`` below numerical
    meaning, ``"inf"`` for a value of 0, else the number."""
    if percent == 0:
        return "0 (fixed)"
    if not np.isfinite(percent):
        return "inf"
    return "<1e-9" if percent < MEANINGFUL_PERCENT else float(percent)


def _prismatic_note(units: dict[str, Any]) -> str:
    """A sentence giving the units of the prismatic joints' drive terms ('' when none)."""
    prismatic = [j for j, u in units["joints"].items() if u["effort"] == "N"]
    if not prismatic:
        return ""
    return (
        f" Prismatic joint(s) {', '.join(prismatic)}: fv in N s/m, fs and off in N, Ia in kg "
        "(the units above are those of revolute joints)."
    )


def _urdf_dynamics(drives: Drives, values: Array, joints) -> dict[str, tuple[float, float]]:
    """URDF <dynamics> of each joint: (damping = fv, friction = fs) when identified.

    URDF friction cannot be negative (Pinocchio refuses it): a negative
    estimate (noise around zero) is written as 0; the drive file keeps it.
    """
    lookup = dict(zip(drives.names, values, strict=True))
    out = {}
    for j, joint in enumerate(joints):
        if f"fv{j + 1}" in lookup:
            out[joint] = (
                max(float(lookup[f"fv{j + 1}"]), 0.0),
                max(float(lookup[f"fs{j + 1}"]), 0.0),
            )
    return out


def _eta_entries(eta: Array, std: Array, null: Array, chain: Chain) -> dict[str, Any]:
    names = [*chain.joint_names, f"tool:{chain.tool_name}"]
    return {
        "eta_order": "per joint then tool: (omega_x, omega_y, omega_z, v_x, v_y, v_z)",
        "eta": {name: eta[6 * k : 6 * k + 6].tolist() for k, name in enumerate(names)},
        "eta_std": {name: std[6 * k : 6 * k + 6].tolist() for k, name in enumerate(names)},
        "non_identifiable_directions": null.T.tolist(),
    }


KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind("kinematic", ("position",), 1e-3, "joint twists and frames from measured poses",
             KinematicCalibrationProblem),
        Kind("twist", ("tau",), 1.0, "joint twists from joint torques (d tau / d eta)",
             TwistCalibrationProblem),
        Kind("dynamic", ("tau",), 1.0, "inertial base parameters and drive terms from torques",
             DynamicProblem),
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
