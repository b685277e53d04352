"""Plausibility of a torque fit: symptoms of a mis-described log and their likely cause.

A log description with a wrong angle unit, sample period, column, transmission
sign or torque sign reads without error, and least squares fits *some* model to
it: one with moments of inertia of 1e5 kg m^2, or one that predicts torques of
the wrong sign. :func:`diagnose` looks for the symptoms and, when there are
any, for the mis-description that explains them; :func:`check_fit` raises
:class:`~workbench.errors.ImplausibleFit` with the diagnoses (the command line
exits with code 1, results written for inspection).

Symptoms (what was compared):

* the nominal model predicts the logged torques worse than predicting zero
  (relative RMS ``|e - n| / |e|`` above :data:`NOMINAL_WORSE_THAN_ZERO`), on the joints the
  effort check judges (not skipped nor excluded: a joint whose nominal torque is nothing, a
  wrist all friction, is predicted by it about as by zero whatever its log);
* the fitted model is impossible by orders of magnitude: a link's moment of
  inertia (about its joint origin) above :data:`MOMENT_FACTOR` times the
  nominal model's largest, or a mass below minus the link's nominal mass;
* a fitted link implausibly far from its nominal one: a mass outside 1/3 to 3
  times, a largest moment of inertia outside 1/10 to 10 times
  (:func:`workbench.calibration.checks.link_plausibility.compare_links`);
* a joint's logged effort against the nominal torque
  (:func:`workbench.calibration.checks.effort_units.compare_efforts`): a flipped
  sign (for a joint that holds a gravity load: torques against gravity), a
  ratio outside [0.5, 2], a dead or uncorrelated channel;
* two joints with identical position or effort samples;
* a joint whose transmission sign (position *and* effort negated, as a gear
  ratio of the wrong sign does) is flipped: the nominal model predicts the
  efforts with at least :data:`FLIP_IMPROVEMENT` less relative RMS once that
  joint's position, velocity, acceleration and effort are negated
  (:func:`flipped_transmissions`). Such a flip keeps the joint's own torque
  proportional to its motion (inertia and friction are even in the sign), so
  neither a ratio nor a correlation sees it; only the coupling to the other
  joints does (the Staubli TX40's joint 1: 0.182 -> 0.202).

A joint's effort finding is no symptom when the calibrated model explains
that joint's efforts (relative RMS below :data:`FIT_EXPLAINS`, and every joint
without a finding below :data:`FIT_CONSISTENT`): the nominal model, not the
log, is off there (inertias and centres of mass far from the URDF's can
reverse a wrist's gravity torque). It is a warning instead. Findings that
every compared joint shares stay symptoms: a factor common to all joints (a
torque unit, a sign) leaves every fit as good, only the nominal model sees it.

Without nominal drive parameters, each joint's viscous and Coulomb friction is
fitted out of the efforts and the nominal torques before they are compared
(:func:`workbench.calibration.checks.effort_units.without_drive_terms`); the relative RMS
above is of the torques as they are.

Causes, tried in this order, each by correcting the log and comparing again:

0. ``constant speed``: a joint that turns at a constant speed (a wheel driving
   straight; two such wheels also have identical positions) with symptoms;
1. ``duplicated column``: identical samples in two joints' columns;
2. the joint positions' shape: ``angle unit`` (revolute positions scaled by
   180/pi or pi/180), ``swapped columns`` (two joints' positions, or two
   joints' efforts, exchanged), ``transmission sign`` (one joint's position
   negated; with its effort negated too when its ratio then is -1). A
   correction is the cause when it lowers the *scale-free* misfit (each
   joint's effort fitted by its own factor times the nominal torque, so
   that unknown torque constants do not matter) below
   :data:`SHAPE_IMPROVEMENT` times the misfit as described;
3. the efforts' scale: ``torque sign`` (negative ratios), ``sample period``
   (one factor common to all joints that multiplies the dynamic torques but
   not the gravity load: velocities scale with 1/T, accelerations with
   1/T^2), ``torque scale`` (a common factor on gravity and dynamics outside
   [RATIO_LOW, RATIO_HIGH], or one per joint), ``dead channel``; the
   diagnosis also lists what the comparison says of the joints it does not
   name (ratios taken as right with their suggested scale, efforts the
   nominal model cannot judge, joints not compared);
4. ``weakly identified link``: only fitted links far from their nominal ones,
   with no effort symptom: the log hardly determines them (the joints that
   carry them barely move) or the nominal model is far from the robot;
5. ``unknown``: symptoms that no correction explains (the evidence lists
   what was compared).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from workbench import inertia
from workbench.calibration.checks.effort_units import (
    RATIO_HIGH,
    RATIO_LOW,
    SIGNIFICANT_CORRELATION,
    EffortFinding,
    findings,
    informative_fraction,
    nominal_torques,
    ratios,
    sample_rows,
    without_drive_terms,
)
from workbench.calibration.checks.link_plausibility import compare_links
from workbench.calibration.reporting.units import joint_units
from workbench.chain import REVOLUTE, Chain
from workbench.errors import ImplausibleFit, WorkbenchError, WorkbenchWarning
from workbench.lie import Array
from workbench.recordings import signals
from workbench.recordings.log import Log

NOMINAL_WORSE_THAN_ZERO = 1.0
"""Nominal relative RMS above which the log contradicts the nominal model: predicting zero
torque would do better (a correct log against a CAD model stays below about 0.5)."""

MOMENT_FACTOR = 100.0
"""A fitted link moment of inertia above this many times the nominal model's largest is no
mis-estimate: identification errors are tens of percent, unit errors factors of 57 to 1e6."""

SHAPE_IMPROVEMENT = 0.5
"""A correction of the positions is the cause when it at least halves the scale-free misfit
(a wrong correction of a correct log makes the misfit worse, never twice better)."""

SHAPE_MISFIT = 0.05
"""Scale-free misfits below this are left alone: the nominal model explains the efforts'
shape to within torque noise (a correct simulated log with 1 % noise: 0.014; radian data read
as degrees: 0.15), and no correction can do much better."""

COMMON_MISFIT = 0.05
"""One factor for all joints (a sample period or a global torque unit) rather than one per
joint (torque constants) when its relative misfit exceeds the per-joint factors' by less than
this (5 % of the RMS effort; ratios of weak, noisy joints scatter, their misfit does not)."""

GRAVITY_SHARE = 0.2
"""The gravity load tells a sample period from a torque scale when it makes at least this
fraction of the nominal RMS torque (its part does not scale with time)."""

FIT_EXPLAINS = 0.1
"""A joint's effort finding is the nominal model's fault, not the log's, when the calibrated
model predicts that joint's efforts to this relative RMS (drive terms fitted out of the
difference) and the fit is consistent elsewhere (:data:`FIT_CONSISTENT`). A simulated TIAGo
whose links are 10 % off the URDF (centres of mass moved by up to 10 cm): arm_6 fitted to
0.05 although its nominal torque has the opposite sign; a sign flipped on one joint of the
TIAGo or the iiwa: 0.13 to 0.8 on that joint."""

FIT_CONSISTENT = 0.3
"""... and every compared joint without a finding is fitted to this relative RMS or better: a
mis-described joint spoils the fit of the joints that share its parameters (one iiwa joint
negated: the fit of that joint 0.13, of its neighbours 0.8 to 1.6; a correct log: 0.17 at
most, on a weak joint with 0.05 N m noise)."""

CONSTANT_SPEED = 0.01
"""A joint whose speed's median absolute deviation is below this fraction of its median speed
turns at a constant speed (a wheel driving straight): its inertia and its viscous and Coulomb
friction are one column of the regressor, fitted to anything (a TIAGo's wheels at 3 rad/s:
deviations of 3e-6 rad/s, wheel inertias of 28 kg m^2)."""

DRIVE_TERMS = ("friction", "rotor_inertia", "offset")
"""Per-joint drive terms fitted out of the calibrated model's error (:func:`fitted_misfit`):
the calibrated chain carries the rigid body only."""

FLIP_IMPROVEMENT = 0.05
"""A joint's transmission sign is flipped when negating its position and effort lowers the
nominal model's relative RMS by at least this fraction. Negating a correctly described joint
never helps a model that describes the robot: the TX40's shipped log gets at best 0.05 % lower
(joint 4, whose flip is nearly a symmetry of the arm) and 5 to 370 % higher for the others;
its joint 1 flipped gets 10 % lower when negated back (nominal drive terms; 2.8 % when
friction is fitted out instead, below this threshold)."""

TIME_FACTORS = (
    (
        10.0,
        "the sample times look 10 times too long (a sample_period or time unit off by a factor 10)",
    ),
    (
        1e3,
        "the sample times look 1000 times too long (a time column in ms read as s: [time] "
        'unit = "ms"; or a sample_period in ms)',
    ),
    (
        1e6,
        "the sample times look 1e6 times too long (a time column in us read as s: [time] "
        'unit = "us")',
    ),
    (
        1e9,
        "the sample times look 1e9 times too long (a time column in ns read as s: [time] "
        'unit = "ns")',
    ),
    (
        0.1,
        "the sample times look 10 times too short (a sample_period or time unit off by a "
        "factor 10)",
    ),
    (
        1e-3,
        "the sample times look 1000 times too short (a time column in s read as ms, or a "
        "sample_period in s written as ms)",
    ),
)
"""(factor, what): time stamps ``factor`` times the true ones, tried as corrections of the
efforts' shape like the positions' (velocities scale with 1/T, accelerations with 1/T^2, so
the dynamic torques do not follow one factor and the ratios alone name no period)."""

MIN_RATE, MAX_RATE = 1.0, 1e5
"""Sample rates (Hz) a time correction may lead to: robot logs are sampled at 1 Hz to 100 kHz."""

CAUSES = (
    "constant speed",
    "duplicated column",
    "angle unit",
    "swapped columns",
    "transmission sign",
    "torque sign",
    "sample period",
    "torque scale",
    "dead channel",
    "weakly identified link",
    "unknown",
)


@dataclass(frozen=True)
class Diagnosis:
    """A likely cause (one of :data:`CAUSES`), the evidence, and causes it cannot be told from."""

    cause: str
    evidence: str
    alternatives: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        other = f" (or {', '.join(self.alternatives)})" if self.alternatives else ""
        return f"likely cause: {self.cause}{other}: {self.evidence}"


def check_fit(
    log: Log,
    chain: Chain,
    fitted: Chain | None = None,
    nominal_drives: dict[str, float] | None = None,
) -> None:
    """Raise :class:`~workbench.errors.ImplausibleFit` when :func:`diagnose` finds anything."""
    diagnoses = diagnose(log, chain, fitted, nominal_drives)
    if diagnoses:
        raise ImplausibleFit(implausible_message(log, diagnoses))


def implausible_message(log: Log, diagnoses: Sequence[Diagnosis]) -> str:
    """One message for :class:`~workbench.errors.ImplausibleFit`: the log and every diagnosis."""
    return f"{log.source}: implausible fit; " + "; ".join(d.message for d in diagnoses)


JITTERY = 3.0  # % of the period: a clock jittering more (RMS) is a suspect of an implausible fit


def diagnose(
    log: Log,
    chain: Chain,
    fitted: Chain | None = None,
    nominal_drives: dict[str, float] | None = None,
) -> list[Diagnosis]:
    """Diagnoses of the log behind a torque fit (module docstring); [] when it is plausible.

    ``chain`` is the nominal model, ``fitted`` the calibrated one (None: the
    parameter test and the fit's say on effort findings are skipped),
    ``nominal_drives`` the nominal drive parameters by name (friction, rotor
    inertia, offsets). Effort findings that the calibrated model explains
    (:func:`_explained_by_fit`) are warned about, not diagnosed, and so are joints at constant
    speed when nothing else is implausible.
    """
    if log.tau is None:
        raise WorkbenchError(f"{log.source}: a torque fit needs logged torques")
    sampled = log.subset(sample_rows(log))
    raw, gravity = nominal_torques(chain, sampled, nominal_drives)
    logged, nominal, gravity = _comparable(sampled, nominal_drives, sampled.tau, raw, gravity)
    fraction = informative_fraction(nominal_drives)
    found = findings(chain, logged, nominal, fraction, sampled.excluded, sampled.scale_from_nominal)
    # the nominal model is judged on the joints whose nominal torque tells something
    judged = np.array([f.verdict not in ("skipped", "excluded") for f in found])
    general = _general_symptoms(chain, fitted, sampled.tau[:, judged], raw[:, judged])
    if fitted is not None:
        found = _explained_by_fit(sampled, fitted, found)
    steady = _constant_speeds(sampled, chain)
    if steady and general:
        return [Diagnosis("constant speed", "; ".join(list(steady.values()) + general))]
    if steady:  # a plausible fit: their parameters are whatever fitted the noise
        warnings.warn(
            f"{log.source}: " + "; ".join(steady.values()), WorkbenchWarning, stacklevel=2
        )
    duplicates = _duplicates(sampled, chain, steady)
    if duplicates:
        return [Diagnosis("duplicated column", "; ".join(duplicates + general))]
    joints = _joint_symptoms(logged, nominal, gravity, found)
    flipped = (
        []
        if joints or not judged.any()
        else flipped_transmissions(chain, sampled, raw, nominal_drives)
    )
    if flipped:  # no effort finding: the flip is seen only in the coupling between joints
        return [Diagnosis("transmission sign", "; ".join(flipped + general))]
    if not general and not joints:
        return []
    jitter = (log.clock or {}).get("jitter_rms_percent", 0.0)
    if jitter > JITTERY:  # before the period's causes: noisy stamps mimic a wrong period
        symptoms = "; ".join(general + list(joints.values()))
        return [
            Diagnosis(
                "clock jitter",
                f"the time stamps jitter by {jitter:.3g} % of the period (RMS): the log was "
                "resampled onto a uniform clock at its stamps, which distorts q and its "
                "derivatives if the samples were taken regularly and only their stamps are "
                "noisy (give the [time] sample_period in a log description to use it instead "
                f"of the stamps); symptoms: {symptoms}",
            )
        ]
    shape = _shape_cause(chain, sampled, raw, nominal_drives, log)
    if shape is not None:
        symptoms = "; ".join(general + list(joints.values()))
        return [replace(shape, evidence=f"{shape.evidence}; symptoms: {symptoms}")]
    diagnoses = _scale_causes(sampled.t, *_kept(sampled, logged, nominal, gravity), found, joints)
    if diagnoses:
        first = diagnoses[0]
        diagnoses[0] = replace(first, evidence="; ".join([first.evidence, *general]))
        last = diagnoses[-1]
        others = _other_joints(found, " ".join(d.evidence for d in diagnoses))
        diagnoses[-1] = replace(last, evidence="; ".join([last.evidence, *others]))
        return diagnoses
    if not joints and fitted is not None and set(general) <= set(far_links(chain, fitted)):
        return [
            Diagnosis(
                "weakly identified link",
                "; ".join(general) + "; the efforts agree with the nominal model in unit, sign "
                "and scale, so the log hardly determines these links (excite the joints that "
                "carry them) or the nominal model is far from the robot (check its masses); "
                "the model is written for inspection, `workbench export` refuses it without "
                "--force",
            )
        ]
    return [
        Diagnosis(
            "unknown",
            "; ".join(general + list(joints.values()))
            + "; compared the logged efforts with the nominal model's torques and found no angle "
            "unit, sample period, duplicated or swapped column, transmission sign, torque sign "
            "or scale that explains them",
        )
    ]


def fitted_misfit(log: Log, fitted: Chain) -> Array:
    """Per joint (n,): RMS of the logged efforts minus the calibrated chain's torques, each
    joint's :data:`DRIVE_TERMS` fitted out of the difference, relative to the RMS logged
    effort (inf for a joint whose effort is zero)."""
    torques, _ = nominal_torques(fitted, log)
    error = without_drive_terms(log.tau - torques, log, DRIVE_TERMS)
    logged = np.sqrt(np.mean(log.tau**2, axis=0))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(logged > 0, np.sqrt(np.mean(error**2, axis=0)) / logged, np.inf)


def flipped_transmissions(
    chain: Chain, log: Log, nominal: Array, nominal_drives: dict[str, float] | None
) -> list[str]:
    """Joints whose transmission sign looks flipped (:data:`FLIP_IMPROVEMENT`), one message
    each naming the joint and the relative RMS before and after; ``nominal`` is the nominal
    torques at the log's samples as described."""
    before = _relative_rms(*_differences(log, nominal_drives, log.tau, nominal))
    out = []
    for j, name in enumerate(chain.joint_names):
        sign = np.ones(chain.n)
        sign[j] = -1.0
        moved = replace(log, q=log.q * sign, dq=log.dq * sign, ddq=log.ddq * sign,
                        tau=log.tau * sign)  # fmt: skip
        torques, _ = nominal_torques(chain, moved, nominal_drives)
        after = _relative_rms(*_differences(moved, nominal_drives, moved.tau, torques))
        if after < (1.0 - FLIP_IMPROVEMENT) * before:
            out.append(
                f"joint '{name}' looks driven through a transmission of the opposite sign: with "
                f"its position and effort negated the nominal model predicts the efforts with "
                f"relative RMS {after:.3g} instead of {before:.3g} (negate its [transmission] "
                "ratio, or its position column and its effort column)"
            )
    return out


def _differences(log: Log, nominal_drives, logged: Array, nominal: Array) -> tuple[Array, Array]:
    """(logged - nominal, logged) as compared (:func:`_comparable`), at the kept channels."""
    logged, nominal = _kept(log, *_comparable(log, nominal_drives, logged, nominal))
    return logged - nominal, logged


def _explained_by_fit(log: Log, fitted: Chain, found: list[EffortFinding]) -> list[EffortFinding]:
    """``found`` with the sign, scale and uncorrelated findings that the calibrated model
    explains set to ``explained``, with a warning naming them.

    The nominal model is then the poor reference (inertias and centres of mass
    off the URDF's), not the log: the joint's efforts are fitted to
    :data:`FIT_EXPLAINS` and every compared joint without a finding to
    :data:`FIT_CONSISTENT` (a finding the fit cannot explain stays one).
    Findings shared by every compared joint stay: a factor common to all
    joints (a torque unit, a sign) leaves any fit as good, so only the nominal
    model can see it.
    """
    compared = [j for j, f in enumerate(found) if f.verdict not in ("skipped", "excluded")]
    if not compared or all(found[j].suspicious for j in compared):
        return found
    misfit = fitted_misfit(log, fitted)
    if max(misfit[j] for j in compared if not found[j].suspicious) > FIT_CONSISTENT:
        return found
    out, notes = list(found), []
    for j in compared:
        finding = found[j]
        if finding.verdict in ("sign", "scale", "uncorrelated") and misfit[j] <= FIT_EXPLAINS:
            out[j] = replace(finding, verdict="explained")
            notes.append(f"{finding.message} [calibrated model: relative RMS {misfit[j]:.2g}]")
    if notes:
        warnings.warn(
            f"{log.source}: effort finding(s) not taken for a mis-description, since the "
            "calibrated model explains those joints (relative RMS, drive terms fitted out) and "
            "the joints without findings where the nominal model does not: the nominal "
            "inertias are off there (check the log if they should not be): " + "; ".join(notes),
            WorkbenchWarning,
            stacklevel=3,
        )
    return out


def absurd_parameters(nominal: Chain, fitted: Chain) -> list[str]:
    """Fitted links whose inertia is impossible by orders of magnitude (module docstring)."""
    phi_nominal = inertia.phi_from_matrix(nominal.local_inertias())
    phi_fitted = inertia.phi_from_matrix(fitted.local_inertias())
    largest = np.abs(np.linalg.eigvalsh(inertia.rotational_inertia(phi_nominal))).max()
    moments = np.abs(np.linalg.eigvalsh(inertia.rotational_inertia(phi_fitted))).max(axis=1)
    total = phi_nominal[:, 0].sum()
    out = []
    for i, link in enumerate(fitted.link_names):
        if largest > 0 and moments[i] > MOMENT_FACTOR * largest:
            out.append(
                f"fitted link '{link}' has a moment of inertia of {moments[i]:.4g} kg m^2, "
                f"{moments[i] / largest:.3g} times the nominal model's largest ({largest:.3g})"
            )
        floor = max(phi_nominal[i, 0], 0.01 * total)
        if phi_fitted[i, 0] < -floor:
            out.append(
                f"fitted link '{link}' has mass {phi_fitted[i, 0]:.4g} kg (nominal "
                f"{phi_nominal[i, 0]:.4g} kg)"
            )
    return out


def _kept(log: Log, *torques: Array) -> list[Array]:
    """``torques`` (m, n) at the joints whose channels the log keeps (m, k): an excluded
    channel (``[torques] exclude``) is no evidence either way."""
    kept = log.torque_channels()
    return [values[:, kept] for values in torques]


def _comparable(log: Log, nominal_drives, *torques: Array) -> list[Array]:
    """Torques (efforts, nominal ones) at the log's samples as compared: friction fitted out of
    each when the nominal model has none (:func:`~.effort_units.without_drive_terms`)."""
    if nominal_drives is not None:
        return list(torques)
    return [without_drive_terms(values, log) for values in torques]


def _relative_rms(error: Array, reference: Array) -> float:
    norm = float(np.linalg.norm(reference))
    return float(np.linalg.norm(error)) / norm if norm > 0 else np.inf


def _general_symptoms(chain, fitted, logged, nominal) -> list[str]:
    """The nominal model worse than zero (on the joints given: none, not compared); absurd
    fitted parameters."""
    out = []
    relative = _relative_rms(nominal - logged, logged) if logged.size else 0.0
    if relative > NOMINAL_WORSE_THAN_ZERO:
        out.append(
            f"the nominal model predicts the logged torques with relative RMS {relative:.3g}, "
            "worse than predicting zero"
        )
    if fitted is not None:
        out += absurd_parameters(chain, fitted) + far_links(chain, fitted)
    return out


def far_links(nominal: Chain, fitted: Chain) -> list[str]:
    """Fitted links outside the plausible factors of their nominal ones (module docstring)."""
    return compare_links(nominal, fitted)["implausible"]


def _joint_symptoms(logged, nominal, gravity, found: list[EffortFinding]) -> dict[str, str]:
    """The message of each suspicious effort finding by joint; flipped signs on joints that
    hold a gravity load said so."""
    _, against, _, gravity_rms = ratios(logged, gravity)
    nominal_rms = np.sqrt(np.mean(nominal**2, axis=0))
    out = {}
    for j, finding in enumerate(found):
        if not finding.suspicious:
            continue
        text = finding.message
        loaded = gravity_rms[j] >= GRAVITY_SHARE * nominal_rms[j]
        if finding.verdict == "sign" and loaded and against[j] < -SIGNIFICANT_CORRELATION:
            text += " (its torques act against gravity's)"
        out[finding.joint] = text
    return out


def _other_joints(found: list[EffortFinding], named: str) -> list[str]:
    """What the comparison says of the joints a scale diagnosis does not name (their names not
    in ``named``): the ratios taken as right (the suggested scale, in case they were logged like
    the named ones), the joints the nominal model cannot judge, and why."""
    rest = [f for f in found if f"'{f.joint}'" not in named and f.joint not in named]
    out = []
    ok = [f for f in rest if f.verdict == "ok"]
    if ok:
        out.append(
            "taken as the right unit (ratio logged/nominal within "
            f"[{RATIO_LOW:g}, {RATIO_HIGH:g}]): "
            + ", ".join(f"{f.joint} {f.ratio:.3g} (scale x {f.suggested_scale:.3g} for a ratio 1, "
                        "from the nominal model)" for f in ok)
        )  # fmt: skip
    for verdict, why in (
        ("uncorrelated", "the effort does not follow the nominal torque, so the nominal model "
         "cannot tell the unit or sign"),
        ("explained", "the calibrated model explains the effort although the nominal one "
         "does not, so the nominal model cannot tell the unit or sign"),
        ("skipped", "not compared, the nominal torque is too small to tell a unit"),
        ("unverified", "their scale was taken from the nominal model ([torques] "
         "scale_from_nominal), so their ratio 1 is by construction: no evidence of their unit"),
    ):  # fmt: skip
        joints = [f for f in rest if f.verdict == verdict]
        if joints:
            figures = ", ".join(
                f.joint if verdict == "skipped" else f"{f.joint} (correlation {f.correlation:.2f})"
                for f in joints
            )
            out.append(f"{figures}: {why}")
    return out


def _constant_speeds(log: Log, chain: Chain) -> dict[int, str]:
    """Joints turning at a constant nonzero speed (:data:`CONSTANT_SPEED`, of the median
    absolute deviation from the median speed: the ends of a joint published at a lower rate,
    held constant, do not count): index -> evidence."""
    median = np.median(log.dq, axis=0)
    spread = np.median(np.abs(log.dq - median), axis=0)
    units = joint_units(chain, chain.joint_names)
    return {
        j: f"joint '{name}' turns at a constant speed ({median[j]:.4g} "
        f"{units[name]['velocity']}, median deviation {spread[j]:.2g}): the log cannot tell "
        "its inertia from its friction (leave it out of [model] joints, or log it accelerating)"
        for j, name in enumerate(chain.joint_names)
        if median[j] != 0 and spread[j] < CONSTANT_SPEED * abs(median[j])
    }


def _duplicates(log: Log, chain: Chain, steady: dict[int, str]) -> list[str]:
    """Pairs of joints with identical position or effort samples; identical positions of two
    joints at constant speed (``steady``: wheels driving straight) are no duplicate."""
    out = []
    kept = log.torque_channels()
    for name, values in (("positions", log.q), ("efforts", log.tau)):
        for i in range(chain.n):
            for j in range(i + 1, chain.n):
                if name == "positions" and i in steady and j in steady:
                    continue
                if name == "efforts" and not (kept[i] and kept[j]):
                    continue
                column = values[:, i]
                if np.ptp(column) > 0 and np.array_equal(column, values[:, j]):
                    out.append(
                        f"joints '{chain.joint_names[i]}' and '{chain.joint_names[j]}' have "
                        f"identical {name} (the same column twice?)"
                    )
    return out


def shape_misfit(logged: Array, nominal: Array) -> float:
    """Scale-free misfit: RMS of ``e_j - k_j n_j`` (each joint its own least-squares factor
    ``k_j``) relative to the RMS of ``e``; 0 when every effort is proportional to the nominal."""
    ee = np.einsum("mj,mj->j", logged, logged)
    _, rho, _, _ = ratios(logged, nominal)
    total = ee.sum()
    return float(np.sqrt(np.sum(ee * (1.0 - rho**2)) / total)) if total > 0 else 0.0


def _corrections(chain: Chain) -> list[tuple[str, str, Array, np.ndarray | None]]:
    """(cause, what, position map (n, n) or None, effort permutation or None) to try."""
    n = chain.n
    revolute = np.array([k == REVOLUTE for k in chain.joint_kinds])
    out = []
    if revolute.any():
        for factor, said in ((180.0 / np.pi, "degrees"), (np.pi / 180.0, "radians")):
            other = "radians" if said == "degrees" else "degrees"
            out.append(
                ("angle unit", f"the revolute joints' positions read as {said} are in {other}",
                 np.diag(np.where(revolute, factor, 1.0)), None)
            )  # fmt: skip
    names = chain.joint_names
    for i in range(n):
        for j in range(i + 1, n):
            swap = np.arange(n)
            swap[[i, j]] = swap[[j, i]]
            what = f"'{names[i]}' and '{names[j]}'"
            out.append(("swapped columns", f"the positions of {what} are swapped",
                        np.eye(n)[swap], None))  # fmt: skip
            out.append(("swapped columns", f"the efforts of {what} are swapped", None, swap))
    for j in range(n):
        flip = np.eye(n)
        flip[j, j] = -1.0
        out.append(("transmission sign", f"the position of '{names[j]}' is negated", flip, None))
    return out


def _shape_cause(chain, log: Log, nominal: Array, nominal_drives, full: Log) -> Diagnosis | None:
    """The position, column or time correction that best explains the efforts' shape, if any
    (``log``: the compared samples of the ``full`` log; ``nominal``: the nominal torques at
    them, as described)."""
    before = shape_misfit(*_kept(log, *_comparable(log, nominal_drives, log.tau, nominal)))
    if before < SHAPE_MISFIT:
        return None
    best = None
    for cause, what, position, effort in _corrections(chain):
        moved, corrected = log, nominal
        if position is not None:
            moved = replace(log, q=log.q @ position.T, dq=log.dq @ position.T,
                            ddq=log.ddq @ position.T)  # fmt: skip
            corrected, _ = nominal_torques(chain, moved, nominal_drives)
        efforts = log.tau if effort is None else log.tau[:, effort]
        efforts, corrected = _comparable(moved, nominal_drives, efforts, corrected)
        after = shape_misfit(*_kept(log, efforts, corrected))
        if best is None or after < best[0]:
            best = (after, cause, what, position, efforts, corrected)
    for factor, what in TIME_FACTORS:
        if not MIN_RATE <= factor / _period(full.t) <= MAX_RATE:
            continue
        moved = _retimed(full, factor).subset(sample_rows(full))
        corrected, _ = nominal_torques(chain, moved, nominal_drives)
        efforts, corrected = _comparable(moved, nominal_drives, log.tau, corrected)
        after = shape_misfit(*_kept(log, efforts, corrected))
        if after < best[0]:
            best = (after, "sample period", what, None, efforts, corrected)
    after, cause, what, position, efforts, corrected = best
    if after > SHAPE_IMPROVEMENT * before:
        return None
    evidence = (
        f"{what}: with that corrected, the efforts' scale-free misfit to the nominal model drops "
        f"from {before:.3g} to {after:.3g} (ratios logged/nominal then "
        + ", ".join(f"{k:.3g}" for k in ratios(efforts, corrected)[0])
        + ")"
    )
    if cause == "transmission sign":
        j = int(np.flatnonzero(np.diag(position) < 0)[0])
        k = ratios(efforts, corrected)[0][j]
        if k < 0:
            evidence += f" and its effort is negated too (ratio {k:.3g}): a negative gear ratio"
        else:
            evidence += " (its effort is not): the position column's sign or a motor-side sign"
    return Diagnosis(cause, evidence)


def _retimed(log: Log, factor: float) -> Log:
    """``log`` as if its time stamps were ``factor`` times too long: velocities and
    accelerations differentiated again (accelerations only, from the logged velocities, when
    the log has them) in the corrected time, after a low-pass at the reader's default cut-off
    for the corrected rate (a fifth of it, at most 100 Hz) where that is below the one the
    log was read with (a period read too long filtered too little: a plain rescaling of the
    derivatives would scale their noise by ``factor**2``)."""
    dt = _period(log.t) / factor
    spans = log.segments or ((0, len(log)),)
    dq, ddq = np.empty_like(log.q), np.empty_like(log.q)
    for a, b in spans:
        rate = 1.0 / dt
        cutoff = min(rate / 5.0, 100.0)
        source = log.q[a:b] if log.differentiated else log.dq[a:b]
        if b - a > signals.filter_length(4) and cutoff < rate / 5.0 * factor:
            source = signals.lowpass(source, rate, cutoff)
        if log.differentiated:
            dq[a:b], ddq[a:b] = signals.derivatives(source, dt)
        else:
            dq[a:b], ddq[a:b] = log.dq[a:b], np.gradient(source, dt, axis=0)
    return replace(log, dq=dq, ddq=ddq)


def _scale_causes(t, logged, nominal, gravity, found, notes: dict[str, str]) -> list[Diagnosis]:
    """Torque sign, sample period, torque scale or dead channels from the ratios (``notes``:
    the message of each suspicious joint; ``logged``, ``nominal``, ``gravity`` at the joints
    whose channels are not excluded)."""
    compared = [f for f in found if f.verdict in ("ok", "scale", "sign")]
    out = []
    dead = [f.joint for f in found if f.verdict == "dead"]
    if len(dead) > 1:
        listed = ", ".join(f'"{j}"' for j in dead)
        every = f"{notes[dead[-1]]} (all of them: [torques] exclude = [{listed}])"
        notes = notes | {dead[-1]: every}
    if dead:
        out.append(Diagnosis("dead channel", "; ".join(notes[j] for j in dead)))
    flipped = [f for f in compared if f.verdict == "sign"]
    if flipped:
        every = len(flipped) == len(compared)
        where = "every joint's" if every else "joint(s) " + ", ".join(f.joint for f in flipped)
        out.append(
            Diagnosis(
                "torque sign",
                f"{where} effort has the opposite sign of the nominal torque: "
                + "; ".join(notes[f.joint] for f in flipped)
                + ("; a [torques] scale of -1 or negated torque columns" if every else ""),
                () if every else ("transmission sign",),
            )
        )
        compared = [f for f in compared if f.verdict != "sign"]
    scaled = [f for f in compared if f.verdict == "scale"]
    if not scaled:
        return out
    period = _period_by_gravity(t, logged, nominal, gravity)
    kept = [f for f in found if f.verdict != "excluded"]
    columns = [kept.index(f) for f in compared]
    e, n = logged[:, columns], nominal[:, columns]
    common = float(np.sum(e * n) / np.sum(n * n))
    one_factor = _relative_rms(common * n - e, e) <= shape_misfit(e, n) + COMMON_MISFIT
    if period is not None:
        out.append(period)
    elif len(compared) > 1 and one_factor and not RATIO_LOW <= common <= RATIO_HIGH:
        out.append(_common_factor(t, nominal, gravity, compared, common))
    else:
        out.append(Diagnosis("torque scale", "; ".join(notes[f.joint] for f in scaled)))
    return out


def _period(t: Array) -> float:
    return float(np.median(np.diff(t))) if t.size > 1 else np.nan


def _period_by_gravity(t, logged, nominal, gravity) -> Diagnosis | None:
    """A sample period off by a factor, told by the gravity load (which does not scale with
    time): ``e = alpha g + beta (n - g)`` with alpha near 1 and beta far from it, explaining the
    efforts at least as well as one factor per joint."""
    if np.linalg.norm(gravity) < GRAVITY_SHARE * np.linalg.norm(nominal):
        return None
    dynamic = nominal - gravity
    A = np.stack([gravity.ravel(), dynamic.ravel()], axis=1)
    alpha, beta = np.linalg.lstsq(A, logged.ravel(), rcond=None)[0]
    misfit = _relative_rms(alpha * gravity + beta * dynamic - logged, logged)
    if not (RATIO_LOW <= alpha <= RATIO_HIGH and beta > 0 and not RATIO_LOW <= beta <= RATIO_HIGH):
        return None
    if misfit > shape_misfit(logged, nominal):
        return None
    return Diagnosis(
        "sample period",
        f"the gravity torques match (factor {alpha:.3g}) but the dynamic torques are "
        f"{beta:.3g} times the nominal model's (relative misfit {misfit:.3g}): the sample period "
        f"{_period(t):.4g} s looks {np.sqrt(beta):.3g} times too long (velocities scale with "
        "1/T, accelerations with 1/T^2)",
    )


def _common_factor(t, nominal, gravity, compared, common: float) -> Diagnosis:
    """A factor common to all joints: a torque unit (on the gravity load too), or, without a
    gravity load to tell them apart, a sample period."""
    ratios_text = ", ".join(f"{f.joint} {f.ratio:.3g}" for f in compared)
    unit = f"the torques' unit (multiply [torques] scale by {1 / common:.3g})"
    if np.linalg.norm(gravity) >= GRAVITY_SHARE * np.linalg.norm(nominal):
        return Diagnosis(
            "torque scale",
            f"every joint's effort is about {common:.3g} times the nominal torque, gravity load "
            f"included (ratios {ratios_text}): {unit}",
        )
    period = (
        f"the sample period {_period(t):.4g} s {np.sqrt(common):.3g} times too long "
        "(velocities scale with 1/T, accelerations with 1/T^2)"
    )
    evidence = (
        f"every joint's effort is about {common:.3g} times the nominal torque (ratios "
        f"{ratios_text}); without a gravity load this is {period} or {unit}"
    )
    root = np.log10(np.sqrt(common))
    if common > 0 and abs(root - round(root)) < np.log10(1.05):
        return Diagnosis("sample period", evidence, ("torque scale",))
    return Diagnosis("torque scale", evidence, ("sample period",))
