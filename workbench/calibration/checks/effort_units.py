"""Logged efforts against the nominal model: units, gains, signs and dead channels.

Efforts in raw units (motor currents with unknown torque constants, a torque
sensor in the wrong unit, a differential wrist logged on the wrong motor)
parse perfectly and fit to nonsense. :func:`compare_efforts` compares, per
joint, the logged effort ``e_j`` with the nominal model's torque ``n_j``
along the log (inverse dynamics of the nominal chain at the log's q, dq and
ddq: gravity and inertia, plus friction, rotor inertia and offsets from the
nominal drive parameters when given) by two numbers:

* the least-squares ratio ``k_j = <e_j, n_j> / <n_j, n_j>`` (logged units per
  N m, or per N for a prismatic joint): ``e_j ~ k_j n_j``;
* the correlation ``rho_j = <e_j, n_j> / (|e_j| |n_j|)`` (uncentred, so that
  the gravity load, the best-known part of the model, counts).

Without nominal drive parameters, each joint's viscous and Coulomb friction
(columns ``dq_j`` and ``sign(dq_j)``) is fitted out of both by least squares
before comparing (:func:`without_drive_terms`), so that friction the model lacks
(often most of a wrist's torque) is not taken for a wrong unit; the RMS
values are then of what remains.

Verdicts (thresholds are module constants, with their reasons):

* ``skipped``: the nominal torque carries no information (the joint barely
  moves and holds no gravity load; without drive parameters, also a joint
  whose rigid-body torque is small beside the drive's own, see
  :data:`RIGID_BODY_FRACTION`);
* ``dead``: the logged effort is a small fraction of the nominal one and does
  not follow it (disconnected, logged on another motor, a differential
  drive's other half);
* ``uncorrelated``: the logged effort is of the nominal's size but does not
  follow it (a wrong column, joint order or position unit);
* ``sign``: it follows the nominal torque with the opposite sign;
* ``scale``: it follows the nominal torque at a ratio outside
  [:data:`RATIO_LOW`, :data:`RATIO_HIGH`] (raw units, torque constants);
* ``ok``;
* ``excluded``: the log leaves the joint's torque channel out (``[torques] exclude``), so it
  is not compared;
* ``unverified``: ``ok``, but the log's scale for the joint was taken from the nominal
  model (``[torques] scale_from_nominal``, after a suggestion of this check), so the ratio is
  1 by construction and says nothing of the unit: no evidence either way;
* ``explained`` (set by :func:`workbench.calibration.checks.fit_plausibility.diagnose`, not
  here): one of the above but the calibrated model explains the joint's efforts, so the
  nominal model, not the log, is off for that joint.

Each finding suggests the ``[torques] scale`` that would make the ratio 1:
``1 / k_j`` times the scale the log was read with (N m per logged unit for a
revolute joint, N per logged unit for a prismatic one). Such a gain comes from the
nominal model, not from a measurement: it is labelled so (:data:`SUGGESTED_FROM`), and a
log that applies it says so (``scale_from_nominal``), after which the check no longer
counts that joint's ratio as evidence that its unit is right.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.chain import PRISMATIC, Chain
from workbench.dynamics.inverse_dynamics import inverse_dynamics
from workbench.errors import WorkbenchError
from workbench.identification.drives import Drives, drive_torques
from workbench.identification.term_names import CLASSIC_TERMS, TERMS
from workbench.lie import Array
from workbench.recordings.log import Log

RATIO_LOW, RATIO_HIGH = 0.5, 2.0
"""Ratios logged / nominal accepted as "the right unit": a nominal model (CAD masses, no
friction) is rarely off by more than a factor 2 in RMS torque, while wrong units are off by
the torque constant times the gear ratio (typically 0.01 to 100) or by 9.81 (kgf), 1000 (mN m)."""

SIGNIFICANT_CORRELATION = 0.5
"""|rho| at and above which the logged effort follows the nominal torque: a channel in the
right unit with a nominal model within 30 % and unmodelled friction of 50 % of the RMS torque
still has rho > 0.8; an unrelated signal (another joint's effort, noise) stays below 0.3."""

DEAD_FRACTION = 0.05
"""Logged RMS below this fraction of the nominal RMS, without significant correlation: a dead
channel (noise or offset only). With significant correlation it is a scale (gains up to 20)."""

INFORMATIVE_FRACTION = 1e-3
"""A joint whose nominal RMS torque is below this fraction of the largest one among joints of
its kind (revolute: N m, prismatic: N), or zero, is skipped: its nominal torque is numerically
nothing (no motion, no gravity load) and any ratio to it measures noise."""

RIGID_BODY_FRACTION = 0.01
"""Without nominal drive parameters, the fraction for :data:`INFORMATIVE_FRACTION`: a joint
whose rigid-body torque is below 1 % of the largest is dominated by what such a model lacks
(rotor inertia reflected through the gear, ``r^2 J_rotor``, and friction: the Staubli TX40's
wrist joints 4 and 5 log 4-6 times their rigid-body torque, at 0.4-0.7 % of joint 2's), and a
ratio would measure those, not the unit."""

SUGGESTED_FROM = (
    "the nominal model's torques (a guess to check against the drive's torque constant, not "
    "a measured gain)"
)
"""Where every suggested scale comes from, as the messages and ``summary.json`` say it."""

MAX_SAMPLES = 4000
"""At most this many samples (evenly spread over the log) enter the comparison."""


@dataclass(frozen=True)
class EffortFinding:
    """One joint's logged effort against the nominal model (module docstring)."""

    joint: str
    kind: str  # "revolute" or "prismatic"
    verdict: str  # "ok", "scale", "sign", "dead", "uncorrelated", "skipped", "explained",
    # "excluded", "unverified"
    ratio: float  # k_j = logged / nominal (least squares); nan when skipped
    correlation: float  # rho_j; nan when skipped
    logged_rms: float  # in logged units (after the log's scale)
    nominal_rms: float  # N m or N
    suggested_scale: float  # 1 / k_j: multiply the log's [torques] scale by this; nan if none

    @property
    def unit(self) -> str:
        return "N" if self.kind == "prismatic" else "N m"

    @property
    def message(self) -> str:
        """One line naming the joint, the comparison and what to do."""
        head = (
            f"joint '{self.joint}': logged effort RMS {self.logged_rms:.4g}, nominal model's "
            f"{self.nominal_rms:.4g} {self.unit}"
        )
        if self.verdict == "excluded":
            return f"{head}; not compared: its torque channel is excluded ([torques] exclude)"
        if self.verdict == "skipped":
            return (
                f"{head}; not compared: the nominal torque is too small to tell a unit (little "
                "motion and gravity load, or, without drive parameters, mostly the rotor inertia "
                "and friction the nominal model lacks)"
            )
        numbers = f"ratio logged/nominal {self.ratio:.3g}, correlation {self.correlation:.2f}"
        fix = (
            f"; multiply its [torques] scale by {self.suggested_scale:.3g} "
            f"({self.unit} per logged unit, suggested from {SUGGESTED_FROM}; a log that applies "
            f'it says so with [torques] scale_from_nominal = ["{self.joint}"], so that this check '
            "does not take it for evidence of the unit)"
        )
        text = {
            "ok": f"{head}, {numbers}: consistent",
            "unverified": f"{head}, {numbers}: its scale was taken from the nominal model "
            "([torques] scale_from_nominal), so the ratio is 1 by construction and says nothing "
            "of its unit",
            "scale": f"{head}, {numbers}: raw units or an unknown torque constant?{fix}",
            "sign": f"{head}, {numbers}: the torque sign is flipped (torque column, scale or "
            f"transmission sign){fix}",
            "dead": f"{head}, correlation {self.correlation:.2f}: a dead channel (disconnected, "
            "or the effort is logged on another motor, e.g. a differential wrist); leave its "
            "torque out of the fit, its motion kept, with [torques] exclude = "
            f'["{self.joint}"]',
            "uncorrelated": f"{head}, {numbers}: the effort does not follow the nominal torque "
            "(a wrong column, joint order or position unit?)",
            "explained": f"{head}, {numbers}: unlike the nominal model, the calibrated model "
            "explains this effort",
        }
        return text[self.verdict]

    @property
    def suspicious(self) -> bool:
        return self.verdict not in ("ok", "skipped", "explained", "excluded", "unverified")


def nominal_torques(
    chain: Chain, log: Log, nominal_drives: dict[str, float] | None = None, rows=None
) -> tuple[Array, Array]:
    """(nominal torques, their gravity part), (m, n) at the log's samples ``rows`` (default all).

    Rigid-body inverse dynamics of ``chain`` plus, with ``nominal_drives``
    (drive parameter name -> value, joint side, as in a drive file), the
    per-joint friction ``fv``, ``fs``, rotor inertia ``Ia`` and offset ``off``,
    and the coupled motors' ``Iam``, ``fvm``, ``fsm`` through the log's
    transmission (:mod:`workbench.identification.drives`); the further terms' parameters
    (Stribeck, load-dependent and temperature friction) are accepted and left out.
    """
    if log.dq is None or log.ddq is None:
        raise WorkbenchError(
            f"{log.source}: comparing efforts needs joint velocities and accelerations"
        )
    rows = slice(None) if rows is None else rows
    q, dq, ddq = log.q[rows], log.dq[rows], log.ddq[rows]
    gravity = inverse_dynamics(chain, q, np.zeros_like(dq), np.zeros_like(ddq))
    tau = inverse_dynamics(chain, q, dq, ddq)
    if nominal_drives:
        drives = Drives(chain.n, TERMS, log.transmission, log.min_speed)
        unknown = sorted(set(nominal_drives) - set(drives.names))
        if unknown:
            raise WorkbenchError(
                f"nominal drive parameter(s) {', '.join(unknown)} are not terms of {chain.n} "
                "joints (Ia, fv, fs, off) or of the log's coupled motors (Iam, fvm, fsm)"
            )
        classic = Drives(chain.n, CLASSIC_TERMS, log.transmission, log.min_speed)
        x = np.array([nominal_drives.get(name, 0.0) for name in classic.names])
        tau = tau + drive_torques(classic, x, dq, ddq)
    return tau, gravity


def sample_rows(log: Log, limit: int = MAX_SAMPLES) -> np.ndarray:
    """At most ``limit`` sample indices spread evenly over the log."""
    return np.unique(np.linspace(0, len(log) - 1, min(len(log), limit)).astype(int))


def compare_efforts(
    log: Log, chain: Chain, nominal_drives: dict[str, float] | None = None
) -> list[EffortFinding]:
    """One :class:`EffortFinding` per joint of ``chain`` (module docstring)."""
    if log.tau is None:
        raise WorkbenchError(f"{log.source}: no efforts (torques) are logged")
    sampled = log.subset(sample_rows(log))
    nominal, _ = nominal_torques(chain, sampled, nominal_drives)
    logged = sampled.tau
    if nominal_drives is None:
        logged, nominal = (without_drive_terms(v, sampled) for v in (logged, nominal))
    fraction = informative_fraction(nominal_drives)
    return findings(chain, logged, nominal, fraction, log.excluded, log.scale_from_nominal)


def informative_fraction(nominal_drives: dict[str, float] | None) -> float:
    """:data:`INFORMATIVE_FRACTION` with nominal drive parameters, else
    :data:`RIGID_BODY_FRACTION`."""
    return INFORMATIVE_FRACTION if nominal_drives is not None else RIGID_BODY_FRACTION


def without_drive_terms(values: Array, log: Log, terms: tuple[str, ...] = ("friction",)) -> Array:
    """``values`` (m, n) at the log's samples minus, per joint, their least-squares fit by the
    joint's own drive ``terms`` (:class:`~workbench.identification.drives.Drives`): by default
    viscous and Coulomb friction, columns ``dq_j`` and ``sign(dq_j)`` (smooth through rest below
    the log's ``min_speed``); ``rotor_inertia`` adds ``ddq_j``, ``offset`` a constant."""
    n = values.shape[1]
    drives = Drives(n, terms, min_speed=log.min_speed)
    C = drives.columns(log.dq, log.ddq)  # (m, n, p n): joint j's p terms in row j, joint-major
    p = C.shape[2] // n
    F = np.stack([C[:, np.arange(n), p * np.arange(n) + k] for k in range(p)], axis=2)
    G = np.einsum("mjp,mjq->jpq", F, F) + 1e-12 * np.eye(p)
    b = np.einsum("mjp,mj->jp", F, values)
    coefficients = np.linalg.solve(G, b[:, :, None])[:, :, 0]
    return values - np.einsum("mjp,jp->mj", F, coefficients)


def findings(
    chain: Chain,
    logged: Array,
    nominal: Array,
    fraction: float = INFORMATIVE_FRACTION,
    excluded: Sequence[str] = (),
    from_nominal: Sequence[str] = (),
) -> list[EffortFinding]:
    """The findings of logged efforts (m, n) against nominal torques (m, n) (module docstring);
    joints whose nominal RMS is below ``fraction`` of the largest of their kind are skipped,
    those whose channel the log ``excluded`` are not compared (verdict ``excluded``), and an
    ``ok`` of a joint whose scale came ``from_nominal`` is ``unverified``."""
    ratio, correlation, logged_rms, nominal_rms = ratios(logged, nominal)
    prismatic = np.array([k == PRISMATIC for k in chain.joint_kinds])
    largest = np.array([nominal_rms[prismatic == p].max() for p in prismatic])
    informative = nominal_rms > fraction * largest
    out = []
    for j, joint in enumerate(chain.joint_names):
        kind = "prismatic" if chain.joint_kinds[j] == PRISMATIC else "revolute"
        if joint in excluded or not informative[j]:
            verdict = "excluded" if joint in excluded else "skipped"
            out.append(
                EffortFinding(joint, kind, verdict, np.nan, np.nan, logged_rms[j],
                              nominal_rms[j], np.nan)
            )  # fmt: skip
            continue
        k, rho = ratio[j], correlation[j]
        follows = abs(rho) >= SIGNIFICANT_CORRELATION
        if not follows and logged_rms[j] < DEAD_FRACTION * nominal_rms[j]:
            verdict = "dead"
        elif not follows:
            verdict = "uncorrelated"
        elif k < 0:
            verdict = "sign"
        elif not RATIO_LOW <= k <= RATIO_HIGH:
            verdict = "scale"
        else:
            verdict = "unverified" if joint in from_nominal else "ok"
        scale = 1.0 / k if follows and k != 0 else np.nan
        out.append(
            EffortFinding(joint, kind, verdict, k, rho, logged_rms[j], nominal_rms[j], scale)
        )
    return out


def ratios(logged: Array, nominal: Array) -> tuple[Array, Array, Array, Array]:
    """Per joint: least-squares ratio, uncentred correlation, logged RMS, nominal RMS."""
    cross = np.einsum("mj,mj->j", logged, nominal)
    ee = np.einsum("mj,mj->j", logged, logged)
    nn = np.einsum("mj,mj->j", nominal, nominal)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(nn > 0, cross / nn, np.nan)
        correlation = np.where((nn > 0) & (ee > 0), cross / np.sqrt(ee * nn), 0.0)
    m = max(logged.shape[0], 1)
    return ratio, correlation, np.sqrt(ee / m), np.sqrt(nn / m)


def effort_summary(found: Sequence[EffortFinding]) -> dict[str, Any]:
    """``summary.json``'s ``effort_check``: per joint the verdict, ratio, correlation and the
    suggested scale with where it comes from (:data:`SUGGESTED_FROM`); the joints whose unit the
    check supports (``ok``: the ratio of a scale measured or given, not taken from the nominal
    model) and those it cannot judge."""

    def number(value: float) -> float | None:
        return float(value) if np.isfinite(value) else None

    return {
        "joints": {
            f.joint: {
                "verdict": f.verdict,
                "ratio": number(f.ratio),
                "correlation": number(f.correlation),
                "suggested_scale": number(f.suggested_scale),
            }
            for f in found
        },
        "suggested_scale_from": SUGGESTED_FROM,
        "units_supported": [f.joint for f in found if f.verdict == "ok"],
        "units_unverified": [f.joint for f in found if f.verdict in ("unverified", "skipped")],
    }
