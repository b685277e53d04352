"""The kinematic calibration problem: joint twists, marker and device frames from measured poses.

Its blocks are rows of the log's poses (:class:`~workbench.calibration.problems.problem.
SampleBlocks`); its candidates are nested (:class:`Candidate`: ``frames``,
``offsets``, ``twists``, ``compliance`` (twists and a compliance per joint
under gravity, :mod:`workbench.calibration.fitting.compliance`), each with a
ridge toward the nominal that the evidence of its training rows chooses,
:mod:`workbench.calibration.selection.ridge_evidence`), chosen by the
held-out folds (:mod:`workbench.calibration.selection.selection`: each
candidate that adds parameters to a simpler one must also beat it, ``twists``
the ``offsets`` and ``compliance`` the ``twists``, of the same ridge); the fit is
:func:`workbench.calibration.fitting.kinematic.calibrate_kinematic`.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from workbench import lie
from workbench.calibration.fitting import fixtures as fx
from workbench.calibration.fitting.compliance import stiffness
from workbench.calibration.fitting.kinematic import (
    PARAMETERS,
    KinematicProblem,
    calibrate_kinematic,
)
from workbench.calibration.fitting.solver import identifiable_subspace
from workbench.calibration.problems.parameter_figures import eta_entries, relative_std
from workbench.calibration.problems.problem import Options, Residuals, SampleBlocks
from workbench.calibration.selection.ridge_evidence import ridge_by_evidence
from workbench.calibration.selection.validation import EndSplit, Folds
from workbench.chain import Chain
from workbench.errors import WorkbenchError, WorkbenchWarning
from workbench.eta import twist_covariance
from workbench.identification.drives import Drives, drive_file_text, stiffness_names
from workbench.lie import Array
from workbench.recordings.log import Log

EVIDENCE = None  # a Candidate's ridge chosen on its training rows by the evidence


@dataclass(frozen=True)
class Candidate:
    """What a kinematic calibration fits (``frames``, ``offsets``, ``twists``) and its ridge
    toward the nominal (:class:`~workbench.calibration.fitting.kinematic.KinematicProblem`):
    a number, or :data:`EVIDENCE`: on every training set, the ridge its data make most
    probable (:mod:`workbench.calibration.selection.ridge_evidence`, linearised at the
    nominal joints; compliance takes the twists' ridge of the same rows)."""

    parameters: str
    ridge: float | None = 0.0

    @property
    def name(self) -> str:
        if self.ridge is EVIDENCE:
            return f"{self.parameters}, ridge by evidence"
        return self.parameters if not self.ridge else f"{self.parameters}, ridge {self.ridge:g}"


def kinematic_candidates(parameters: str) -> tuple[Candidate, ...]:
    """The candidates of ``--parameters``: ``frames`` first (the nominal), then one forced
    structure (no ridge), or (``auto``) offsets, twists and compliance, each with its ridge
    chosen by the evidence (:data:`EVIDENCE`)."""
    if parameters == "auto":
        chosen = [Candidate(p, EVIDENCE) for p in PARAMETERS[1:]]
    elif parameters in PARAMETERS:
        chosen = [Candidate(parameters)] if parameters != "frames" else []
    else:
        raise WorkbenchError(
            f"unknown --parameters '{parameters}'; choose auto or one of {', '.join(PARAMETERS)}"
        )
    return (Candidate("frames"), *chosen)


class KinematicCalibrationProblem(SampleBlocks):
    """Joint twists, marker frames and the device frame from measured poses (:mod:`.kinematic`).

    Position errors are 3-D distances (m), orientation errors rotation
    angles (rad), in training and held-out figures alike. Rotations and
    positions are weighed together by one rotation weight (m/rad) for every
    fit and figure: ``--rotation-weight``, else the ratio of the position and
    rotation residual RMS of the nominal model (the ``frames`` candidate) on
    all samples.

    Fixtures (:mod:`workbench.calibration.fitting.fixtures`): a sample's error is its
    predicted marker origin minus the fixture's point (its distance to the
    plane), the point fitted with the model when the fit saw this log, else
    (a second log, whose fixtures are other things) the held-out samples'
    own centroid (least-squares plane); a known distance's error is that
    between the held-out samples' centroids (a fixture without held-out
    samples: its fitted point) minus the known one, on the block's first
    sample of the two. The held-out figures: per fixture its ``spread_m``
    (mean error distance: on a second log the mean distance of its predicted
    points to their centroid) and the mean absolute ``distance_error_m``;
    their ``relative_rms`` is relative to :attr:`reach`, the RMS distance
    of the fixtures' nominal marker origins from the base.
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
        self._frames: dict = {}  # the frames fit per training rows (fit)
        self._ridges: dict = {}  # the evidence's ridge per (training rows, parameters) (fit)
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
        for f in self.problem.fixtures:
            labels += [f"{f.name}:p{a}" for a in "xyz"] if f.kind == "point" else [f"{f.name}:n"]
        labels += [f"{'-'.join(d.between)}:distance" for d in self.problem.distances]
        self.labels = tuple(labels)
        self.reach = 1.0
        if self.problem.fixtures:
            start = self.problem.start(chain)
            points = np.concatenate(self.problem.fixture_points(start))
            self.reach = float(np.sqrt(np.mean(np.sum(points**2, axis=1))))

    def extends(self, candidate: Candidate) -> Candidate | None:
        """The candidate ``candidate`` adds parameters to, which it must also beat by more than
        chance to be kept (:func:`~workbench.calibration.selection.select`): twists on the
        offsets (a joint offset is a twist's motion about its own axis), compliance on the
        twists, of the same ridge."""
        if candidate.parameters == "compliance":
            return Candidate("twists", candidate.ridge)
        if candidate.parameters == "twists":
            return Candidate("offsets", candidate.ridge)
        return None

    def _calibrate(
        self, problem: KinematicProblem, rotation_weight: float | None, frames=None,
        chain: Chain | None = None,
    ):  # fmt: skip
        """Fit ``problem`` from ``chain`` (default: the nominal), its joints from ``frames``
        (the ``frames`` fit on the same rows, else fitted first)."""
        o = self.options
        return calibrate_kinematic(
            chain or self.nominal, problem, loss=o.loss, f_scale=o.f_scale or 1e-3,
            rotation_weight=rotation_weight, progress=o.progress, frames=frames,
        )  # fmt: skip

    def fit(self, rows: np.ndarray | None, candidate: Candidate | None = None):
        """Calibrate ``candidate`` (default: the last, most flexible) on ``rows`` (None: all);
        every candidate on the same rows starts from one ``frames`` fit."""
        candidate = candidate or self.candidates[-1]
        if rows is not None:
            self._check_fixtures_seen(rows)
        if rows is None and candidate == self.nominal_candidate and self._nominal_fit:
            return self._nominal_fit
        problem = self.problem if rows is None else self.problem.subset(rows)
        key = None if rows is None else np.asarray(rows).tobytes()
        frames = self._frames.get(key)
        if frames is None:
            frames = self._calibrate(replace(problem, parameters="frames"), self.rotation_weight)
            self._frames[key] = frames
        if candidate == self.nominal_candidate:
            return frames
        ridge = candidate.ridge
        if ridge is EVIDENCE:
            rigid = "twists" if candidate.parameters == "compliance" else candidate.parameters
            if (key, rigid) not in self._ridges:
                self._ridges[key, rigid] = self._evidence(problem, rigid, frames)
            ridge = self._ridges[key, rigid]
        return self._calibrate(
            replace(problem, parameters=candidate.parameters, ridge=ridge),
            self.rotation_weight, frames,
        )  # fmt: skip

    def _evidence(self, problem: KinematicProblem, parameters: str, frames) -> float:
        """The ridge of ``parameters`` on ``problem``'s rows with the largest evidence
        (:func:`~workbench.calibration.selection.ridge_evidence.ridge_by_evidence`), the
        problem linearised where its prior is centred: the nominal joints with the ``frames``
        fit of the same rows (where every fit of a joint candidate starts, and whose column
        norms are the prior's scales ``s_i``), on its identifiable steps there."""
        problem = replace(
            problem, parameters=parameters, ridge=0.0, rotation_weight=frames.rotation_weight
        )
        start = replace(
            problem.start(self.nominal), device=frames.model.device,
            placements=frames.model.placements, fixtures=frames.model.fixtures,
        )  # fmt: skip
        d, _ = problem.sizes
        k = start.coordinates.size
        linear = problem.linearise(start)
        scale2 = np.sum(linear.R[:, d : d + k] ** 2, axis=0)
        S = identifiable_subspace(
            linear.jacobian_factor, linear.candidates, preferred=linear.preferred
        ).basis
        r, J = problem.evaluate(start)
        C = problem.coordinate_jacobian(start, linear) @ S
        return ridge_by_evidence(J @ S, r, C, scale2, start.coordinates)

    def folds(self, scheme: EndSplit | Folds) -> list[tuple[np.ndarray, np.ndarray]]:
        """``scheme`` applied within each fixture's samples (and within the samples in no
        fixture), in their order, the k-th held-out parts of every group joined: every fold
        holds out samples of every fixture. A fixture's held-out samples are scored against
        its point or plane placed by its own training samples; over the whole log, the last
        20 % of a log recorded one fixture after the other (MUKCa's sockets) would hold out
        the last fixture's samples only. A group with fewer samples than folds holds out one
        sample in each of the first folds, one too small for an end split none. Leave-one-out
        and logs without fixtures: the scheme over all samples."""
        joined = self._within_fixtures(scheme)
        return super().folds(scheme) if joined is None else joined

    def label(self, scheme: EndSplit | Folds) -> str:
        if self._within_fixtures(scheme) is None:
            return scheme.label
        return f"{scheme.label}, within each fixture's samples"

    def _within_fixtures(self, scheme: EndSplit | Folds) -> list | None:
        """The folds of :meth:`folds` cut within each fixture's samples; None where they are
        not (then the scheme splits the whole log)."""
        groups = self._fixture_groups()
        if len(groups) < 2 or (isinstance(scheme, Folds) and scheme.k == -1):
            return None
        fold = np.full(len(self.times), -1)  # the fold holding each sample out (-1: none)
        for rows in groups:
            cut = scheme
            if isinstance(scheme, Folds) and rows.size < scheme.k:
                cut = Folds(-1)  # one sample in each of the first folds
            try:
                splits = cut.splits(np.arange(rows.size, dtype=float))  # by their order
            except WorkbenchError:  # too few to hold any out: always trained on
                continue
            for k, (_, test) in enumerate(splits):
                fold[rows[test]] = k
        held = np.unique(fold[fold >= 0])
        if held.size == 0:
            return None
        return [(np.flatnonzero(fold != k), np.flatnonzero(fold == k)) for k in held]

    def _fixture_groups(self) -> list[np.ndarray]:
        """The rows of each fixture (a row in two fixtures counts in the first), then the rows
        in none; empty groups left out."""
        group = np.full(len(self.times), len(self.problem.fixtures))
        for k, f in reversed(list(enumerate(self.problem.fixtures))):
            group[np.asarray(f.rows, bool)] = k
        return [rows for k in np.unique(group) if (rows := np.flatnonzero(group == k)).size]

    def _check_fixtures_seen(self, rows: np.ndarray) -> None:
        """Refuse training ``rows`` that hold too few samples of a fixture to place it (a point
        one, a plane three): the fixture's unknowns would be fitted to nothing."""
        for f in self.problem.fixtures:
            seen, need = int(np.count_nonzero(f.rows[rows])), 1 if f.kind == "point" else 3
            if seen < need:
                total = int(np.count_nonzero(f.rows))
                remedy = (
                    f"a {f.kind} fixture needs more than {need} samples to keep {need} for "
                    "training while some are held out: log more of them"
                    if total <= need
                    else "log it throughout the recording, or shuffle the folds ([validation] "
                    "shuffle = true) or hold out less"
                )
                raise WorkbenchError(
                    f"{self.problem.source}: fixture {f.name!r} has {seen} of its {total} "
                    f"samples among the training samples of a validation fold, too few to place "
                    f"its {f.kind}: {remedy}"
                )

    def baseline(self, rows: np.ndarray | None):
        """The nominal model: joints as loaded, device and marker frames fitted on ``rows``."""
        return self.fit(rows, self.nominal_candidate)

    def refit_frames(self, fit, rows: np.ndarray):
        """``fit``'s joints (twists and compliances, from another log) held, the device frame
        (when unknown in this log) and the marker frames fitted on ``rows`` of this log: how a
        calibration is scored on a session whose measuring frames moved."""
        problem = replace(
            self.problem.subset(rows), parameters="frames", compliance_start=fit.model.compliance
        )
        return self._calibrate(problem, self.rotation_weight, chain=fit.chain)

    def refitted_frames(self, where: str) -> dict[str, Any]:
        """Which measuring frames the scores of this log refit, and ``where``."""
        device = "known: the robot's base frame" if self.problem.device_known else where
        return {
            "device_frame": device,
            "marker_frames": {m.name: where for m in self.problem.markers},
        }

    def errors(self, fit, rows: np.ndarray) -> Array:
        problem = self.problem.subset(rows)
        model = problem.start(self.nominal) if fit is None else fit.model
        out = []
        predicted = problem.predict(model)
        for marker, (p, R) in zip(problem.markers, predicted, strict=True):
            if marker.position is not None:
                out.append(p - marker.position)
            if marker.rotation is not None:
                out.append(lie.log_so3(R @ np.swapaxes(marker.rotation, 1, 2)))
        if problem.fixtures:
            own = fit is None or fit.source == self.problem.source
            out.append(_fixture_errors(problem, model, predicted, own))
        return np.concatenate(out, axis=1)

    def _fixture_split(self, errors: Array) -> tuple[dict[str, Array], dict[str, Array]]:
        """Per fixture its error distances (N,) (NaN off its samples), per distance its
        errors (N,) (NaN off the rows that hold one)."""
        column = sum(3 * ((m.position is not None) + (m.rotation is not None))
                     for m in self.problem.markers)  # fmt: skip
        fixtures, distances = {}, {}
        for f in self.problem.fixtures:
            width = 3 if f.kind == "point" else 1
            block = errors[:, column : column + width]
            fixtures[f.name] = np.linalg.norm(block, axis=1) if width == 3 else np.abs(block[:, 0])
            column += width
        for d in self.problem.distances:
            distances["-".join(d.between)] = errors[:, column]
            column += 1
        return fixtures, distances

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
        """Per marker its position error (3-D distance, m) and orientation error (angle, rad);
        per fixture its error distance (m), per known distance its error (m)."""
        distances, angles = self._split(errors)
        fixtures, known = self._fixture_split(errors)
        labels = [f"{k} position [m]" for k in distances] + [f"{k} angle [rad]" for k in angles]
        labels += [f"{k} fixture [m]" for k in fixtures]
        labels += [f"{k} distance error [m]" for k in known]
        values = np.stack(
            [*distances.values(), *angles.values(), *fixtures.values(), *known.values()], axis=1
        )
        return values, tuple(labels), ""

    def rms(self, residuals: Sequence[Residuals]) -> float:
        """RMS of the 3-D position error distances over markers, fixtures and samples (m)."""
        errors = np.concatenate([r.errors for r in residuals])
        distances, _ = self._split(errors)
        fixtures, _ = self._fixture_split(errors)
        return _rms(np.stack([*distances.values(), *fixtures.values()], axis=1))

    def loss(self, errors: Array) -> Array:
        """Per sample, squared distances plus weighted squared angles over the markers, squared
        fixture and distance errors (the pooled score's)."""
        distances, angles = self._split(errors)
        fixtures, known = self._fixture_split(errors)
        lengths = [*distances.values(), *fixtures.values(), *known.values()]
        out = np.nansum(np.stack(lengths, axis=1) ** 2, axis=1)
        if angles:
            angle2 = np.nansum(np.stack(list(angles.values()), axis=1) ** 2, axis=1)
            out = out + self.rotation_weight**2 * angle2
        return out

    def figures(self, residuals: Sequence[Residuals]) -> dict[str, Any]:
        """Relative RMS of the position (and weighted angle) errors to the spread of the
        measured positions about their mean (and of the rotations about theirs); per marker
        the position RMS (m) and orientation RMS (rad)."""
        errors = np.concatenate([r.errors for r in residuals])
        rows = np.concatenate([r.block for r in residuals])
        distances, angles = self._split(errors)
        error2 = spread2 = 0.0
        figures: dict[str, Any] = {}
        if distances:
            measured = np.stack(
                [m.position[rows] for m in self.problem.markers if m.position is not None], axis=1
            )
            centred = measured - np.nanmean(measured, axis=0)
            error2 = np.nanmean(np.stack(list(distances.values()), axis=1) ** 2)
            spread2 = np.nanmean(np.sum(centred**2, axis=2))
            figures["position_rms_m"] = float(np.sqrt(error2))
        per_marker = {k: {"position_rms_m": (_rms(v))} for k, v in distances.items()}
        if self.problem.fixtures:
            fixed, known = self._fixture_split(errors)
            both = np.concatenate([*fixed.values(), *known.values()])
            error2 += np.nanmean(both**2)
            spread2 += self.reach**2
            figures["fixture_rms_m"] = _rms(both)
            held = {k: v[np.isfinite(v)] for k, v in fixed.items() if np.isfinite(v).any()}
            figures["spread_m"] = float(np.mean([v.mean() for v in held.values()]))
            figures["fixtures"] = {k: {"spread_m": float(v.mean())} for k, v in held.items()}
            if known:
                values = np.concatenate(list(known.values()))
                figures["distance_error_m"] = float(np.nanmean(np.abs(values)))
        if angles:
            angle = np.stack(list(angles.values()), axis=1)
            figures["orientation_rms_rad"] = _rms(angle)
            for k, v in angles.items():
                per_marker.setdefault(k, {})["orientation_rms_rad"] = _rms(v)
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
        """eta per joint, device and marker frames (log of their poses), compliances and
        fixtures, with relative stds:
        0 (fixed) for those the fit did not move (outside its directions, e.g. every joint's
        for the ``frames`` candidate)."""
        chain, n = self.nominal, self.nominal.n
        rows = []
        std = np.sqrt(np.clip(np.diag(fit.covariance), 0.0, None))
        for k, name in enumerate(chain.joint_names):
            for c, axis in enumerate(("wx", "wy", "wz", "vx", "vy", "vz")):
                value = float(fit.eta[6 * k + c])
                rows.append((f"eta_{name}_{axis}", value, relative_std(std[6 * k + c], value)))
        d, _ = self.problem.sizes
        if d:
            xi = lie.log_se3(fit.model.device)
            for c, axis in enumerate(("wx", "wy", "wz", "vx", "vy", "vz")):
                rows.append((f"device_{axis}", float(xi[c]), relative_std(std[6 * n + c], xi[c])))
        for k, marker in enumerate(self.problem.markers):
            p = fit.model.placements[k]
            xi = lie.log_se3(p)
            base = 6 * n + d + 6 * k
            for c, axis in enumerate(("wx", "wy", "wz", "vx", "vy", "vz")):
                rows.append(
                    (
                        f"marker_{marker.name}_{axis}",
                        float(xi[c]),
                        relative_std(std[base + c], xi[c]),
                    )
                )
        if fit.parameters == "compliance":
            first = 6 * n + d + 6 * len(self.problem.markers)
            for k, name in enumerate(chain.joint_names):
                value = float(fit.model.compliance[k])
                rows.append((f"compliance_{name}", value, relative_std(std[first + k], value)))
        width = replace(self.problem, parameters=fit.parameters).width(self.nominal)
        for f, fixture in enumerate(self.problem.fixtures):
            state, col = fit.model.fixtures[f], width + fx.STEP * f
            cov = fit.covariance[col : col + fx.STEP, col : col + fx.STEP]
            if fixture.kind == "point":
                values, stds = state[:3], np.sqrt(np.clip(np.diag(cov), 0.0, None))
                names = ("x", "y", "z")
            else:  # dn = a (t1 x n) + b (t2 x n): the normal's covariance from the step's
                normal = state[:3]
                D = np.cross(fx.tangent_basis(normal), normal).T
                cov_n = D @ cov[:2, :2] @ D.T
                values = state
                stds = np.sqrt(np.clip([*np.diag(cov_n), cov[2, 2]], 0.0, None))
                names = ("nx", "ny", "nz", "d")
            for name, value, sd in zip(names, values, stds, strict=True):
                rows.append(
                    (f"fixture_{fixture.name}_{name}", float(value), relative_std(sd, value))
                )
        return rows

    def chain(self, fit) -> Chain:
        """The calibrated chain, each marker's frame (a frame attached to a link: a fixed link of
        the URDF) moved to the marker's calibrated place (the tool frame already is)."""
        chain = fit.chain
        moved = {
            m.frame: fit.model.placements[k]
            for k, m in enumerate(self.problem.markers)
            if m.frame not in (None, chain.tool_name)
        }
        frames = tuple(
            replace(f, placement=moved[f.name]) if f.name in moved else f for f in chain.frames
        )
        return replace(chain, frames=frames)

    def dynamics(self, fit) -> dict[str, tuple[float, float]]:
        return {}

    def files(self, fit) -> dict[str, str]:
        """With compliant joints, ``calibrated.drives.toml``: their stiffnesses ``k<j>`` (a
        drive file without torque terms, :func:`~workbench.calibration.drives.stiffness_names`),
        which ``workbench export`` writes as MuJoCo joint stiffness."""
        entry = self._compliance(fit).get("compliance")
        if entry is None or all(j["stiffness"] is None for j in entry["joints"].values()):
            return {}
        names = stiffness_names(self.nominal.n)
        springs = {
            names[k]: (j["stiffness"], j["stiffness_std"])
            for k, j in enumerate(entry["joints"].values())
            if j["stiffness"] is not None
        }
        note = "joint stiffnesses of a kinematic calibration with compliance under gravity"
        return {
            "calibrated.drives.toml": drive_file_text(
                Drives(self.nominal.n, ()), np.zeros(0), note=note, stiffness=springs
            )
        }

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
                m.name: _marker_entry(self.chain(fit), m.frame or self.nominal.tool_name, k, fit)
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
            **self._compliance(fit),
            **eta_entries(
                fit.eta, fit.eta_std, fit.subspace.null[: 6 * (self.nominal.n + 1)], self.nominal
            ),
        }
        if self.problem.fixtures:
            summary["fixtures"] = self._fixture_summary(fit)
        return summary

    def _fixture_summary(self, fit) -> dict[str, Any]:
        """The fixtures' points and planes (world frame), their training spread, the known
        distances as fitted, and the gauge held."""
        problem = self.problem
        points = problem.fixture_points(fit.model)
        entries = {}
        for f, fixture in enumerate(problem.fixtures):
            state = fit.model.fixtures[f]
            entry: dict[str, Any] = {"type": fixture.kind, "marker": fixture.marker,
                                     "samples": int(fixture.rows.sum())}  # fmt: skip
            if fixture.kind == "point":
                entry["point_m"] = state[:3].tolist()
                entry["spread_m"] = fx.spread(points[f])
            else:
                entry |= {"normal": state[:3].tolist(), "offset_m": float(state[3])}
                entry["rms_m"] = float(np.sqrt(np.mean((points[f] @ state[:3] - state[3]) ** 2)))
                entry["span_m"] = fx.plane_span(points[f]).tolist()
            entries[fixture.name] = entry
        names = [f.name for f in problem.fixtures]
        distances = []
        for d in problem.distances:
            a, b = (names.index(x) for x in d.between)
            fitted = np.linalg.norm(fit.model.fixtures[a, :3] - fit.model.fixtures[b, :3])
            distances.append({"between": list(d.between), "value_m": d.value,
                              "fitted_m": float(fitted)})  # fmt: skip
        held = []
        if not problem.measured:
            held.append(
                "the world placement (6: the robot, its markers and the fixtures moved together "
                "change no residual's size; every step is orthogonal to that motion)"
            )
            if not problem.distances:
                held.append("the scale (1: no known distance; held like the placement)")
        for name, entry in entries.items():
            span = entry.get("span_m", [np.inf, np.inf])
            if span[1] < fx.PLANE_SPAN:
                free = 1 if span[0] >= fx.PLANE_SPAN else 2
                note = (
                    f"the normal of plane '{name}': its samples span {1e3 * span[0]:.3g} x "
                    f"{1e3 * span[1]:.3g} mm (RMS), {'a line' if free == 1 else 'a point'}, "
                    f"not a plane, and leave {free} of the normal's 2 directions free (where "
                    "the nominal model's errors put them, not the data)"
                )
                held.append(note)
                warnings.warn(f"{problem.source}: {note}", WorkbenchWarning, stacklevel=2)
        return {"fixtures": entries, "distances": distances,
                "gauge": held or ["none: a measured marker ties the fixtures to the robot"],
                "frame": "fixture points and planes in the measuring device's frame (the base "
                         "frame when it is known or nothing is measured)"}  # fmt: skip

    def _compliance(self, fit) -> dict[str, Any]:
        """The ``compliance`` entry: per joint its compliance and stiffness with standard
        deviations (:func:`~workbench.calibration.fitting.compliance.stiffness`), when fitted."""
        if fit.parameters != "compliance":
            return {}
        chain = self.nominal
        d, m = self.problem.sizes
        first = 6 * chain.n + d + m
        last = first + chain.n  # the compliances' entries (the fixtures' follow)
        std = np.sqrt(np.clip(np.diag(fit.covariance)[first:last], 0.0, None))
        seen = np.linalg.norm(fit.solution.S[first:last], axis=1) > 1e-9
        joints = {}
        for k, name in enumerate(chain.joint_names):
            entry = stiffness(fit.model.compliance[k], std[k], chain.joint_kinds[k])
            entry["estimated"] = bool(seen[k])
            entry["held_rigid"] = k in fit.held
            joints[name] = entry
        return {
            "compliance": {
                "model": _COMPLIANCE,
                "payload": self.problem.payload is not None,
                "joints": joints,
            }
        }


def _marker_entry(chain: Chain, frame: str, k: int, fit) -> dict[str, Any]:
    """A marker's calibrated placement relative to the frame its frame hangs from (for a
    frame attached to a link, as the URDF joint that carries it; for the tool frame or a
    link's own frame, relative to that link's joint frame), and in the base frame at q = 0."""
    placement = fit.model.placements[k]
    parent = chain.parent_of(frame)
    hangs_from, reference = chain.base_name if parent < 0 else chain.link_names[parent], None
    for f in chain.attached_frames:
        if f.name == frame and f.attached_to is not None:
            hangs_from = f.attached_to
    if frame in chain.link_names:  # a link's own frame: its place relative to that frame
        hangs_from = frame
    reference = chain.placement_of(hangs_from)
    relative = lie.inverse(reference) @ placement
    return {
        "frame": frame,
        "hangs_from": hangs_from,
        "placement": relative.tolist(),
        "xyz": relative[:3, 3].tolist(),
        "rpy": lie.matrix_to_rpy(relative[:3, :3]).tolist(),
        "placement_in_base_at_zero": placement.tolist(),
    }


_COMPLIANCE = (
    "q_link = q - c tau_g(q): each joint sags by its compliance c = 1/k times the model's "
    "gravity torque (inverse dynamics at zero velocity and acceleration, with the log's "
    "payload) at the logged position; a joint whose compliance the data do not tell from zero "
    "(below two standard deviations, or negative: no spring), or that carries no gravity in "
    "the log (its largest torque below 2 % of the largest joint's), is held rigid "
    "('held_rigid'), "
    "'estimated' false where the compliance is not fitted (held, or unseen: a joint that "
    "carries no gravity torque), stiffness null when rigid"
)

_COORDINATES = {
    "frames": "none: the joints are as loaded",
    "offsets": "joint zero offsets o (q + o), rad for revolute and m for prismatic joints",
    "twists": "the joints' move from the nominal in its twist-changing eta directions "
    "(identifiable_eta_basis of the nominal), rad and m",
    "compliance": "as for twists (the compliances are in 'compliance')",
}


def _rotation_spread(R: Array) -> Array:
    """Angles (N,) of rotations from their mean (the rotation nearest the arithmetic mean)."""
    U, _, Vt = np.linalg.svd(np.nanmean(R, axis=0))
    mean = U @ np.diag([1.0, 1.0, np.linalg.det(U @ Vt)]) @ Vt
    return np.linalg.norm(lie.log_so3(R @ mean.T), axis=-1)


def _rms(x: Array) -> float:
    return float(np.sqrt(np.nanmean(np.square(x))))


def _fixture_errors(problem: KinematicProblem, model, predicted, own: bool) -> Array:
    """Per fixture its samples' errors, then per distance its error
    (:class:`KinematicCalibrationProblem`); ``own``: the model's fixtures are this log's."""
    N = len(problem)
    index = {m.name: k for k, m in enumerate(problem.markers)}
    kinds = [f.kind for f in problem.fixtures]
    held = [predicted[index[f.marker]][0][f.rows] for f in problem.fixtures]
    if own:
        states = model.fixtures
    else:
        states = np.full((len(kinds), 4), np.nan)
        for f, (kind, points) in enumerate(zip(kinds, held, strict=True)):
            if points.shape[0] >= (1 if kind == "point" else 3):
                states[f] = fx.start_states([kind], [points])[0]
    out = []
    for f, fixture in enumerate(problem.fixtures):
        if fixture.kind == "point":
            column = np.full((N, 3), np.nan)
            column[fixture.rows] = held[f] - states[f, :3]
        else:
            column = np.full((N, 1), np.nan)
            column[fixture.rows, 0] = held[f] @ states[f, :3] - states[f, 3]
        out.append(column)
    names = {f.name: k for k, f in enumerate(problem.fixtures)}
    for distance in problem.distances:
        a, b = (names[name] for name in distance.between)
        centres = [held[k].mean(axis=0) if held[k].shape[0] else states[k, :3] for k in (a, b)]
        column = np.full((N, 1), np.nan)
        rows = np.flatnonzero(problem.fixtures[a].rows | problem.fixtures[b].rows)
        if rows.size:
            column[rows[0], 0] = np.linalg.norm(centres[0] - centres[1]) - distance.value
        out.append(column)
    return np.concatenate(out, axis=1)
