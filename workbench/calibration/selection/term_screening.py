"""Which further drive terms a dynamic calibration keeps: each tried alone on the held-out folds.

The classic drive terms of a log (``friction``, ``rotor_inertia``,
``offset``, ``coupled_motors``, in the log's order) are nested candidates,
simplest first, as before. Each further term the log switches on
(:data:`~workbench.identification.term_names.FURTHER_TERMS`: ``stribeck``,
``load_friction``, ``temperature``, ``sensor_delay``) is *tried* alone on
top of all the classic terms, on the same folds (forward step): its held-out
benefit is that trial's held-out relative RMS against the classic
candidate's (with vs without the term), and the term passes when the trial
beats the classic candidate by more than one standard error of the mean
paired per-sample difference of held-out squared errors
(:func:`workbench.calibration.selection.selection.beats`, the rule the selection
applies against the nominal). A term can pass by soaking up part of another,
true, term missing from the classic candidate; so the terms that passed are
then checked together (backward step): each must make the candidate with all
of them beat the same candidate without it, by the same rule; while one does
not, the one with the least benefit (mean improvement minus its standard
error) is dropped and the rest checked again. The selection then chooses
among the classic prefixes and the classic terms with every term that stayed
(one candidate); trials of terms that did not stay are not offered, so a term
that only fits noise is dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workbench.identification.term_names import FURTHER_TERMS


def split_terms(terms: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(classic terms, further terms) of ``terms``, each in the given order."""
    classic = tuple(t for t in terms if t not in FURTHER_TERMS)
    return classic, tuple(t for t in terms if t in FURTHER_TERMS)


def trial_terms(terms: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """The candidates' terms before screening: the classic prefixes, then one trial per
    further term (module docstring)."""
    classic, further = split_terms(terms)
    prefixes = tuple(classic[:k] for k in range(len(classic) + 1))
    return prefixes + tuple((*classic, t) for t in further)


def screen_terms(
    terms: tuple[str, ...],
    make: Callable[[tuple[str, ...]], Any],
    score: Callable[[Any], Any],
    beats: Callable[[Any, Any], tuple[bool, float, float]],
) -> tuple[tuple[Any, ...], list[dict[str, Any]]]:
    """The candidates after screening (``make(terms)`` each) and every further term's held-out
    benefit; ``score(candidate)`` cross-validates one candidate (a
    :class:`~workbench.calibration.selection.selection.Score`), ``beats(score, reference)`` is the
    selection's paired test."""
    classic, further = split_terms(terms)
    reference = score(make(classic))
    kept, benefits = [], {}
    for term in further:
        trial = score(make((*classic, term)))
        benefits[term] = {"term": term, "alone": _benefit(trial, reference, beats)}
        if benefits[term]["alone"]["beats"]:
            kept.append(term)
    while len(kept) > 1:
        together = score(make((*classic, *kept)))
        checks = {}
        for term in kept:
            without = score(make((*classic, *(t for t in kept if t != term))))
            checks[term] = benefits[term]["with_the_others"] = _benefit(together, without, beats)
        failed = [t for t in kept if not checks[t]["beats"]]
        if not failed:
            break
        worst = min(failed, key=lambda t: checks[t]["mean"] - checks[t]["standard_error"])
        kept.remove(worst)
    for term in further:
        benefits[term]["kept"] = term in kept
    candidates = [make(classic[:k]) for k in range(len(classic) + 1)]
    if kept:
        candidates.append(make((*classic, *kept)))
    return tuple(candidates), list(benefits.values())


def _benefit(score: Any, reference: Any, beats: Callable) -> dict[str, Any]:
    """Held-out relative RMS with (``score``) and without (``reference``) a term, and the test."""
    better, mean, se = beats(score, reference)
    return {
        "relative_rms_with": score.relative_rms,
        "relative_rms_without": reference.relative_rms,
        "beats": better,
        "mean": mean,
        "standard_error": se,
    }


def benefit_summary(benefits: list[dict[str, Any]] | None) -> dict[str, Any]:
    """``{"term_benefits": ...}`` for summary.json (empty when nothing was screened)."""
    if benefits is None:
        return {}
    return {"term_benefits": {"rule": BENEFIT_NOTE, "terms": benefits}}


def benefit_rows(entry: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Report rows (label, text) of summary.json's ``term_benefits`` entry (none without)."""
    if not entry:
        return []
    rows = []
    for b in entry["terms"]:
        parts = [_figures("alone", b["alone"])]
        if "with_the_others" in b:
            parts.append(_figures("with the others", b["with_the_others"]))
        verdict = "kept" if b["kept"] else "dropped"
        if b.get("passed_screening") and not b["kept"]:
            verdict = "passed the screening, not in the final model"
        rows.append((f"further drive term {b['term']} ({verdict})", "; ".join(parts)))
    return rows


def _figures(label: str, benefit: dict[str, Any]) -> str:
    return (
        f"{label}: held-out relative RMS {benefit['relative_rms_with']:.4g} with, "
        f"{benefit['relative_rms_without']:.4g} without"
        + ("" if benefit["beats"] else " (not better by one standard error)")
    )


BENEFIT_NOTE = (
    "alone: each further term tried on top of the classic terms on the same folds, held-out "
    "relative RMS with and without it; with_the_others: the candidate with every term that "
    "passed against it without this one; beats: by more than one standard error (mean) of the "
    "paired per-sample difference of held-out squared errors; passed_screening: the term stayed "
    "through these tests; kept: the term is in the final model (the selection may choose a "
    "simpler candidate)"
)
