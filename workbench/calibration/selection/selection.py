"""What to fit, chosen by held-out folds: every candidate model cross-validated on the same splits.

A kind offers nested candidates, simplest first (the kinematic kind:
``frames``, then ``offsets`` and ``twists``, each with a ridge toward the
nominal; :mod:`workbench.calibration.problems.kinematic_problem`). Each candidate is
fitted on the training blocks of every fold and predicts that fold's
held-out block (:class:`workbench.calibration.problems.problem.CalibrationProblem`);
its score is the kind's pooled held-out ``relative_rms`` over all folds.
One candidate is the nominal model (joints as loaded, frames fitted). The
rule:

    keep the candidate with the lowest score among those that beat the
    nominal by more than chance: by more than one standard error of the
    mean per-sample difference of held-out squared errors (the nominal's
    minus the candidate's, paired on the same samples); if none does, keep
    the nominal.

A candidate that only adds parameters to another (``problem.extends(c)``:
the kinematic kind's ``twists`` on top of ``offsets``, ``compliance`` on top
of ``twists``) must also beat that one by more than one standard error: what
the extra parameters buy is tested, not only the whole.

So the kept model never predicts the held-out samples worse than the
nominal on these folds, and a calibration that only fits noise (better by
chance on these samples, e.g. a heavily ridged one that is the nominal in
all but name) does not replace it.

A problem may screen its candidates first (``problem.screen(score, beats)``:
the dynamic kind's further drive terms, :mod:`workbench.calibration.selection.term_screening`),
with the same folds and the same paired test; candidates it scores are
cross-validated once.

The held-out figures reported for the kept candidate are its scores on the
same folds that chose it: the selection's fold score, not a nested
cross-validation. With a handful of candidates that is slightly optimistic;
the summary says so (:data:`SCORE_NOTE`). A second validation log, when
given, is not used for the choice (the folds of the fitted log are), so its
figures are an independent test of the kept model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.calibration.problems.problem import CalibrationProblem, Residuals
from workbench.lie import Array

SCORE_NOTE = (
    "the kept candidate's held-out figures are its score on the same folds that chose it "
    "(selection by cross-validation, not nested cross-validation): with several candidates "
    "they can be slightly optimistic"
)


@dataclass(frozen=True)
class Score:
    """One candidate cross-validated: its residuals on every fold's held-out block, the kind's
    figures on them pooled, and per-fold figures."""

    name: str
    candidate: Any
    residuals: tuple[Residuals, ...]
    figures: dict[str, Any]
    folds: list[dict[str, Any]]

    @property
    def relative_rms(self) -> float:
        return float(self.figures["relative_rms"])

    def losses(self, problem: CalibrationProblem) -> Array:
        """Per held-out sample, its squared error as the score pools it (``problem.loss``; of
        a large log, the samples its residuals show)."""
        return problem.loss(np.concatenate([r.errors for r in self.residuals]))


def beats(score: Score, nominal: Score, problem: CalibrationProblem) -> tuple[bool, float, float]:
    """Whether ``score`` beats ``nominal`` by more than chance (module docstring), with the mean
    per-sample improvement of the squared error and its standard error."""
    d = nominal.losses(problem) - score.losses(problem)
    mean = float(np.mean(d))
    se = float(np.std(d, ddof=1) / np.sqrt(d.size)) if d.size > 1 else math.inf
    return mean > se, mean, se


@dataclass(frozen=True)
class Selection:
    """Every candidate's :class:`Score`, the nominal's, the kept one and why."""

    scores: tuple[Score, ...]
    kept: Score
    nominal: Score
    reason: str

    improvements: tuple[tuple[bool, float, float], ...]  # per score: :func:`beats` the nominal

    def summary(self, forced: bool) -> dict[str, Any]:
        """The ``selection`` entry of summary.json."""
        return {
            "rule": RULE,
            "forced": forced,
            "kept": self.kept.name,
            "reason": self.reason,
            "candidates": [
                {
                    "name": s.name,
                    **{k: v for k, v in s.figures.items() if not isinstance(v, dict)},
                    "beats_nominal": better,
                    "improvement_over_nominal": {"mean": mean, "standard_error": se},
                }
                for s, (better, mean, se) in zip(self.scores, self.improvements, strict=True)
            ],
            "heldout_figures": SCORE_NOTE,
        }


RULE = (
    "the lowest held-out relative RMS over the folds among the candidates that beat the nominal "
    "by more than one standard error of the mean per-sample difference of held-out squared "
    "errors (paired), and, for a candidate that adds parameters to another (compliance on "
    "twists), beat that one too; the nominal when none does"
)


def cross_validate(
    problem: CalibrationProblem,
    folds: Sequence[tuple[Any, Any]],
    fit: Callable[[Any], Any],
    candidate: Any = None,
    on_fit: Callable[[], None] = lambda: None,
    name: str | None = None,
) -> Score:
    """Fit ``fit(training)`` on every fold and collect the residuals of its held-out block
    (``name``: default the candidate's, else "calibrated")."""
    residuals = []
    figures = []
    for training, block in folds:
        residuals.append(problem.residuals(fit(training), block))
        on_fit()
        if len(folds) <= 20:
            numbers = problem.figures(residuals[-1:])
            figures.append(
                {"samples": residuals[-1].samples}
                | {k: v for k, v in numbers.items() if not isinstance(v, dict)}
            )
    name = name or getattr(candidate, "name", "calibrated")
    return Score(name, candidate, tuple(residuals), problem.figures(residuals), figures)


def select(
    problem: CalibrationProblem,
    folds: Sequence[tuple[Any, Any]],
    on_fit: Callable[[], None] = lambda: None,
    forced: str | None = None,
) -> Selection:
    """Cross-validate every candidate of ``problem`` (and its nominal) on ``folds``; keep the
    best (module docstring), or the last when the user ``forced`` it (the option's value)."""
    scored: dict[Any, Score] = {}

    def score(c: Any) -> Score:
        if c not in scored:
            fit = lambda train, c=c: problem.fit(train, c)  # noqa: E731
            scored[c] = cross_validate(problem, folds, fit, c, on_fit)
        return scored[c]

    screen = getattr(problem, "screen", None)  # a problem that screens its candidates first
    if screen is not None and not forced:
        screen(score, lambda s, reference: beats(s, reference, problem))
    scores = tuple(score(c) for c in problem.candidates)
    if problem.nominal_candidate is None:
        nominal = cross_validate(problem, folds, problem.baseline, name="nominal")
    else:
        nominal = next(s for s in scores if s.candidate == problem.nominal_candidate)
    improvements = tuple(beats(score, nominal, problem) for score in scores)
    extends = getattr(problem, "extends", lambda c: None)
    better = [
        s
        for s, (b, _, _) in zip(scores, improvements, strict=True)
        if b and (extends(s.candidate) is None or beats(s, score(extends(s.candidate)), problem)[0])
    ]
    kept = min(better, key=lambda s: s.relative_rms) if better else nominal
    if forced:
        kept = scores[-1]
        reason = f"forced (--parameters {forced})"
    elif len(scores) == 1 and problem.nominal_candidate is None:
        kept, reason = scores[0], "the only candidate"
    elif kept is nominal:
        reason = (
            f"no candidate predicts the held-out samples better than the nominal model "
            f"({nominal.name}, relative RMS {nominal.relative_rms:.4g}) by more than chance "
            f"(best: {_best_other(scores, nominal)})"
        )
    else:
        reason = (
            f"lowest held-out relative RMS, {kept.relative_rms:.4g}, of the {len(better)} "
            f"candidate(s) that beat the nominal ({nominal.name}, {nominal.relative_rms:.4g}) "
            "by more than one standard error"
        )
    return Selection(scores, kept, nominal, reason, improvements)


def _best_other(scores: Sequence[Score], kept: Score) -> str:
    others = [s for s in scores if s is not kept]
    best = min(others, key=lambda s: s.relative_rms)
    return f"{best.name}, {best.relative_rms:.4g}"


def table(selection: Selection) -> str:
    """The candidates' held-out figures as text lines (for the console)."""
    lines = ["held-out figures of the candidates (the same folds chose):"]
    for s in selection.scores:
        extra = ""
        if "position_rms_m" in s.figures:
            extra = f"  position {1e3 * s.figures['position_rms_m']:.4g} mm (3-D)"
        if "orientation_rms_rad" in s.figures:
            extra += f"  orientation {1e3 * s.figures['orientation_rms_rad']:.4g} mrad"
        mark = "  <- kept" if s is selection.kept else ""
        lines.append(f"  {s.name:<22} relative RMS {s.relative_rms:.5g}{extra}{mark}")
    return "\n".join(lines)
