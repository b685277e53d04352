"""The dynamic calibration problem of a log in memory: base parameters and drive terms from torques.

Its blocks are rows of the torque equations after decimation
(:class:`~workbench.calibration.problems.problem.SampleBlocks`), whose regressor is
computed block by block and reduced to triangular factors and predictions,
never held whole (:mod:`workbench.calibration.problems.regressor_blocks`); what it reports of a
fit (:class:`DynamicOutputs`) is shared with the large-log problem
(:mod:`workbench.calibration.problems.accumulated_dynamic`), whose equations are
accumulated triangular factors instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from workbench.calibration.fitting.drive_shapes import (
    Shapes,
    ShapeSearch,
    has_shapes,
    shape_note,
    shape_parameters,
    shape_summary,
    shaped_fit,
)
from workbench.calibration.fitting.dynamic import (
    TorqueEquations,
    fit_equations,
    payload_torques,
    torque_equations,
)
from workbench.calibration.problems.parameter_figures import relative_stds, std_figure
from workbench.calibration.problems.problem import Options, SampleBlocks
from workbench.calibration.problems.regressor_blocks import (
    RegressorBlocks,
    regressor_blocks,
    shared_columns,
)
from workbench.calibration.problems.torque_problem import (
    TorqueProblem,
    log_drives,
    nominal_drive_values,
    prismatic_note,
    urdf_dynamics,
)
from workbench.calibration.selection.term_screening import (
    benefit_summary,
    screen_terms,
    trial_terms,
)
from workbench.calibration.selection.validation import EndSplit, Folds
from workbench.chain import Chain
from workbench.identification.consistency import PRIOR_WEIGHT
from workbench.identification.drives import drive_file_text
from workbench.identification.least_squares import fit_factors, merge_factors
from workbench.identification.torque_model import BaseParameters, TorqueModel, base_parameters
from workbench.lie import Array
from workbench.recordings.chunked_logs import ChunkedLog
from workbench.recordings.log import Log


@dataclass(frozen=True)
class Terms:
    """A dynamic candidate: the torque model with these drive terms (nested prefixes of the
    log's or the default terms, chosen by the folds like the kinematic candidates)."""

    terms: tuple[str, ...]

    @property
    def name(self) -> str:
        return " + ".join(("inertial base parameters", *self.terms))


@dataclass(frozen=True)
class TorqueSetup:
    """The torque model of some terms, its base parameters, nominal values and equations."""

    model: TorqueModel
    base: Any
    x0: Array
    equations: Any
    shapes: ShapeSearch | None = None  # outer searches of Stribeck speeds and sensor delay
    nominal: Any = None  # with shapes: the equations with the drive file's (None: equations)

    def errors(self, fit, rows: np.ndarray) -> Array:
        """Predicted minus measured torques (m, n) at the equation ``rows``, of ``fit`` (None:
        the nominal values, with the drive file's shapes) and with its drive shapes."""
        beta = self.base.matrix @ self.x0 if fit is None else fit.beta
        if self.shapes is None:
            return self.equations.predict(beta, rows) - self.equations.tau[rows]
        if fit is not None:
            equations = self.shapes.equations_of(fit.shapes)
        else:
            equations = self.equations if self.nominal is None else self.nominal
        return equations.X[rows] @ beta - equations.tau[rows]


def torque_setup(
    chain: Chain,
    log: Log | ChunkedLog,
    terms: tuple[str, ...],
    options: Options,
    equations: Callable[[TorqueModel, BaseParameters], Any],
) -> TorqueSetup:
    """The torque model of ``log``'s drives with ``terms`` and its ``equations(model, base)``."""
    drives = log_drives(log, terms)
    model = TorqueModel(chain, drives)
    base = base_parameters(model, channels=log.torque_channels())
    x0 = model.values(nominal_drive_values(drives, options))
    return TorqueSetup(model, base, x0, equations(model, base))


def final_benefits(
    benefits: list[dict[str, Any]] | None, terms: tuple[str, ...]
) -> list[dict[str, Any]] | None:
    """The screened terms' benefits against the final model (``terms``, what the selection
    chose): ``kept`` says whether the term is in it, ``passed_screening`` whether the
    screening offered it (the selection may still choose a simpler candidate)."""
    if benefits is None:
        return None
    return [b | {"passed_screening": b["kept"], "kept": b["term"] in terms} for b in benefits]


class DynamicOutputs(TorqueProblem):
    """What a dynamic problem reports of a fit (a :class:`~workbench.identification.least_squares.
    DynamicFit`); the problem gives ``setup(terms)`` and ``samples``. Its ``labels`` are the
    joints whose torque channels enter (``channels`` (n,) bool: all but the log's excluded
    ones), the figures theirs only."""

    samples: int
    kept_channels: np.ndarray
    term_benefits: list[dict[str, Any]] | None = None  # the further drive terms screened

    def parameters(self, fit) -> list[tuple[str, float, float]]:
        names = fit.base.names
        rows = list(zip(names, fit.beta.tolist(), relative_stds(fit.std, fit.beta), strict=True))
        return rows + shape_parameters(fit.shapes)

    def chain(self, fit) -> Chain:
        return fit.chain

    def dynamics(self, fit) -> dict[str, tuple[float, float]]:
        return urdf_dynamics(fit.model.drives, fit.drive_values, self.joint_chain.joint_names)

    def files(self, fit) -> dict[str, str]:
        if not fit.model.drives.names:
            return {}
        note = "Identified by workbench calibrate --kind dynamic (completed base parameters)."
        note += shape_note(fit.shapes)
        excluded = [j for j in self.joint_chain.joint_names if j not in self.labels]
        if excluded:
            note += (
                f" Torque channels excluded ([torques] exclude): {', '.join(excluded)}; what "
                "only their torques would show (their own drive terms) stays nominal."
            )
        return {
            "calibrated.drives.toml": drive_file_text(
                fit.model.drives, fit.drive_values, note=note + prismatic_note(self.units())
            )
        }

    def summary(self, fit) -> dict[str, Any]:
        n = fit.model.chain.n
        names = fit.model.names
        x0 = self.setup(fit.model.drives.terms).x0
        return {
            "terms": list(fit.model.drives.terms),
            "condition_number": fit.condition_number,
            "sigma_per_joint": dict(
                zip(self.labels, fit.sigma[self.kept_channels].tolist(), strict=True)
            ),
            "torques_excluded": [j for j in self.joint_chain.joint_names if j not in self.labels],
            "units": self.units(),
            "equations": {"samples": self.samples, "rows_fitted": fit.rows},
            "base_parameters": {
                "names": list(fit.base.names),
                "value": fit.beta.tolist(),
                "std": fit.std.tolist(),
                "relative_std_percent": [std_figure(r) for r in relative_stds(fit.std, fit.beta)],
                "nominal": (fit.base.matrix @ x0).tolist(),
            },
            "standard_parameters": dict(zip(names, fit.x.tolist(), strict=True)),
            "phi_order": ["m", "hx", "hy", "hz", "Ixx", "Iyy", "Izz", "Ixy", "Ixz", "Iyz"],
            "phi": fit.chain.phi.reshape(n, 10).tolist(),
            "physically_consistent": fit.physically_consistent,
            "iterations": fit.iterations,
            **shape_summary(fit.shapes, self.joint_chain.joint_names),
            **benefit_summary(final_benefits(self.term_benefits, fit.model.drives.terms)),
            **self.prior_weights(fit),
        }

    def prior_weights(self, fit) -> dict[str, Any]:
        """``{"prior_weight": ...}``: the held-out figures of other weights of the consistent
        fit's prior; none here (a log in memory gives them, :class:`DynamicProblem`)."""
        return {}


class DynamicProblem(SampleBlocks, DynamicOutputs):
    """Base parameters and drive terms from joint torques (:mod:`.dynamic`).

    Candidates (``parameters`` auto and no ``terms`` given): the inertial
    base parameters alone, then with each of the log's (or the default)
    drive terms added in their order; further terms (Stribeck,
    load-dependent friction, temperature, sensor delay) are screened one by
    one first (:mod:`workbench.calibration.selection.term_screening`); given ``terms``
    are fitted as they are.
    """

    def __init__(self, chain: Chain, log: Log, options: Options) -> None:
        self.options = options
        self.log = log
        drives = log_drives(log, options.terms)
        self.kept_channels = log.torque_channels()
        self.logged_unit = log.effort_unit
        self.labels = tuple(np.asarray(chain.joint_names)[self.kept_channels].tolist())
        self.joint_chain = chain
        self.setups: dict[tuple[str, ...], TorqueSetup] = {}
        self.all_terms = drives.terms
        full = self.setup(drives.terms)
        self.model, self.base, self.x0, self.equations = (
            full.model, full.base, full.x0, full.equations,
        )  # fmt: skip
        self.times = self.equations.t
        self.blocks: list[np.ndarray] = []  # the held-out rows of :meth:`folds`
        self.splits: list[tuple[tuple[int, ...], np.ndarray]] = []  # (training blocks, rows)
        self.factors: dict[tuple[tuple[str, ...], int], tuple[Array, np.ndarray]] = {}
        if options.terms is None and options.parameters == "auto" and drives.terms:
            self.candidates = tuple(Terms(t) for t in trial_terms(drives.terms))

    def screen(self, score, beats) -> None:
        """Keep the further drive terms that the folds find useful (:mod:`.term_screening`)."""
        terms = self.model.drives.terms
        if len(self.candidates) > 1 and terms != trial_terms(terms)[-1]:
            self.candidates, self.term_benefits = screen_terms(terms, Terms, score, beats)

    def setup(self, terms: tuple[str, ...]) -> TorqueSetup:
        """The torque model with ``terms``, built once (with its shapes' outer searches)."""
        if terms not in self.setups:
            s = torque_setup(
                self.joint_chain, self.log, terms, self.options,
                self._equations,
            )  # fmt: skip
            if has_shapes(s.model.drives):
                payload = payload_torques(s.model.chain, self.log, slice(0, len(self.log)))
                search = ShapeSearch(s.model, s.base, self.log, s.equations, payload, s.x0)
                o = self.options
                speeds = o.nominal_stribeck_speed if search.stribeck else None
                delay = o.nominal_delay if search.delayed else 0.0
                nominal = None
                if speeds is not None or delay != 0.0:  # else the equations as built
                    nominal = search.equations_of(Shapes(speeds, None, delay, None, True))
                s = replace(s, shapes=search, nominal=nominal)
            self.setups[terms] = s
        return self.setups[terms]

    def _equations(
        self, model: TorqueModel, base: BaseParameters
    ) -> RegressorBlocks | TorqueEquations:
        """The torque equations of ``model``: columns of the full model's (one regressor for
        every candidate) when it has them all, else their own; whole for a model with drive
        shapes (their outer searches change columns of the whole regressor)."""
        if has_shapes(model.drives):
            return torque_equations(model, base, self.log)
        full = self.setups.get(self.all_terms)
        if full is not None and full.shapes is None:
            columns = shared_columns(full.model, full.base, model, base)
            if columns is not None:
                return full.equations.subset(columns)
        return regressor_blocks(model, base, self.log)

    def folds(self, scheme: EndSplit | Folds) -> list[tuple[tuple[int, ...], np.ndarray]]:
        """The held-out rows of each split of ``scheme``; a fold's training blocks are the
        indices (into :attr:`blocks`) of the others (an end split's: its training rows)."""
        splits = scheme.splits(self.times)
        self.blocks = [test for _, test in splits]
        self.factors.clear()
        if len(splits) == 1:  # an end split: the training rows are the other block
            self.blocks.insert(0, splits[0][0])
        everything = range(len(self.blocks))
        self.splits = [
            (tuple(b for b in everything if b != k), self.blocks[k])
            for k in everything[len(self.blocks) - len(splits) :]
        ]
        return self.splits

    def prior_weights(self, fit) -> dict[str, Any]:
        """``{"prior_weight": ...}`` for summary.json: the pooled held-out relative RMS of the
        final model's terms on the folds (:meth:`folds`) with each weight the options ask for
        (``prior_weights``) and the one used as the weight of the consistent fit's prior
        (:mod:`workbench.identification.consistency`); empty when none is asked for, and for
        the least-squares fit, a robust loss or drive shapes (whose fits are not one solve
        of the factors). Each weight refits every fold's consistent completion."""
        o = self.options
        s = self.setup(fit.model.drives.terms)
        if not (o.prior_weights and o.physical and o.loss == "linear" and s.shapes is None):
            return {}
        figures = {}
        for weight in sorted({*o.prior_weights, PRIOR_WEIGHT}):
            error2 = measured2 = 0.0
            for training, test in self.splits:
                R, counts = self._training_factors(s, training)
                trial = fit_factors(
                    s.model, s.base, R, counts, x0=s.x0, weighted=o.weighted, physical=True,
                    prior_weight=weight,
                )  # fmt: skip
                error2 += float(np.sum(self.errors(trial, test) ** 2))
                measured2 += float(np.sum(self.measured(test) ** 2))
            figures[f"{weight:g}"] = float(np.sqrt(error2 / measured2))
        return {
            "prior_weight": {
                "used": PRIOR_WEIGHT,
                "heldout_relative_rms": figures,
                "note": "pooled held-out relative RMS on the folds of the final model's terms "
                "with each weight of the prior toward the nominal pseudo-inertias; the weight "
                "used is fixed, these figures check it",
            }
        }

    def _training_factors(self, setup: TorqueSetup, training: tuple[int, ...]):
        """The merged per-joint factors and rows of the ``training`` blocks of ``setup``."""
        factors = [self._factors(setup, b) for b in training]
        R, counts = factors[0]
        for R_b, counts_b in factors[1:]:
            R, counts = merge_factors(R, R_b), counts + counts_b
        return R, counts

    def fit(self, training: tuple[int, ...] | None, candidate: Terms | None = None):
        """Identify the model of ``candidate`` (default: all terms) on the ``training`` blocks
        (None: all samples). By least squares, from the blocks' triangular factors, each
        computed once per candidate and merged per fold (all samples: the factors of the
        whole log, block by block of the regressor, :mod:`.regressor_blocks`)."""
        o = self.options
        s = self.setup(candidate.terms) if candidate else self.setups[self.model.drives.terms]
        if o.loss == "linear" and s.shapes is None:
            if training is None:
                R, counts = s.equations.factors()
            else:
                R, counts = self._training_factors(s, training)
            return fit_factors(
                s.model, s.base, R, counts, x0=s.x0, weighted=o.weighted, physical=o.physical
            )
        rows = None if training is None else np.concatenate([self.blocks[b] for b in training])

        def fit(model: TorqueModel, equations, rows: np.ndarray | None) -> Any:
            return fit_equations(
                model, s.base, equations, rows, x0=s.x0, weighted=o.weighted,
                loss=o.loss, f_scale=o.f_scale or 1.0, physical=o.physical,
            )  # fmt: skip

        if s.shapes is None:  # the rows' equations whole, for the re-weighting
            return fit(s.model, s.equations.equations(rows), None)
        result, shapes = shaped_fit(s.shapes, rows, lambda model, eq: fit(model, eq, rows))
        return replace(result, shapes=shapes)

    def _factors(self, setup: TorqueSetup, block: int) -> tuple[Array, np.ndarray]:
        """Per-joint factors and rows of ``block``'s equations of ``setup``, computed once."""
        key = (setup.model.drives.terms, block)
        if key not in self.factors:
            self.factors[key] = setup.equations.factors(self.blocks[block])
        return self.factors[key]

    def baseline(self, rows: np.ndarray | None) -> None:
        return None

    def errors(self, fit, rows: np.ndarray) -> Array:
        """Predicted minus measured torques (m, k) of the joints whose channels enter."""
        if fit is None:
            return self.setups[self.all_terms].errors(None, rows)[:, self.kept_channels]
        return self.setup(fit.model.drives.terms).errors(fit, rows)[:, self.kept_channels]

    def measured(self, rows: np.ndarray) -> Array:
        return self.equations.tau[rows][:, self.kept_channels]
