"""D-optimal calibration postures: choose N of C candidate postures for kinematic calibration.

Information. A posture q_c measured by a tool (or marker) position, or a
full pose, gives rows ``A_c = Sigma^{-1/2} J_c S`` (k = 3 or 6 rows, p
columns): ``J_c`` is the Jacobian of the measurement with respect to the
calibration parameters of :class:`~workbench.calibration.fitting.kinematic.KinematicProblem`
(joint eta, the device frame when unknown, the marker frame), ``S`` (., p) an
orthonormal basis of the directions the *candidate set* determines
(:func:`~workbench.calibration.fitting.solver.identifiable_subspace` of all
candidates stacked, device frame preferred, as calibration does), and
``Sigma`` the measurement noise (``sigma_position`` m, ``sigma_rotation``
rad). Posture c contributes ``I_c = A_c^T A_c``; a set S of postures has
``F(S) = sum_{c in S} I_c`` and the criterion is ``log det F(S)``.

Selection (:func:`select_postures`): greedy, then exchange.

1. Greedy: start from ``eps I`` (eps = 1e-9 of the mean candidate
   information's trace per parameter, so that rank-deficient early sets
   compare) and add, N times, the candidate with the largest gain
   ``log det(I_k + A_c F^{-1} A_c^T)`` (matrix determinant lemma).
2. Fedorov exchange: for each selected posture i, the best replacement j
   maximises ``log det(F - I_i + I_j)`` (the same lemma on ``F - I_i``);
   swaps that increase log det F are made until a full pass makes none.

Bound on the gap (Kiefer-Wolfowitz equivalence theorem). The continuous
relaxation, weights w on the simplex and ``M(w) = sum_c w_c I_c``, is
concave in w; for any w, ``f* = max_w log det M(w) <= log det M(w) +
max_c tr(M(w)^{-1} I_c) - p`` (the duality gap of the concave problem; it
is 0 exactly at the optimum, where ``max_c tr(M^{-1} I_c) = p``). Any set
of N postures (even with repeats) is ``N M(w)`` for some w, so its log det
is at most ``p log N + f*``: the bound reported is ``p log N + log det M(w)
+ max_c tr(M(w)^{-1} I_c) - p`` at the w of the multiplicative algorithm
(Titterington; ``w_c <- w_c tr(M^{-1} I_c) / p``, monotone for D-optimality)
run on all candidates, and the selection's D-efficiency is at least
``exp((log det F(S) - bound) / p)``.

Memory. The candidates' Jacobian (C k, P) with its products, then the rows
(C, k, p) and the per-candidate information (C, p, p), grow linearly in C:
:func:`check_candidates` refuses a count whose estimate
(:func:`information_bytes`) is over the budget of
:func:`workbench.config.check_memory` before anything is allocated.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from workbench.calibration.fitting.kinematic import KinematicProblem
from workbench.calibration.fitting.solver import identifiable_subspace
from workbench.chain import Chain
from workbench.config import check_memory
from workbench.errors import WorkbenchError
from workbench.io import check_input_file
from workbench.lie import Array
from workbench.recordings.log import Marker


@dataclass(frozen=True)
class PostureInformation:
    """Per-candidate weighted rows A (C, k, p) in the identifiable directions S (P, p)."""

    q: Array  # (C, n) candidate postures
    rows: Array  # (C, k, p)
    directions: Array  # (P, p) columns in the KinematicProblem parameter space
    parameter_labels: tuple[str, ...]  # (P,) what each coordinate of the parameter space is
    measure: str

    @property
    def size(self) -> int:
        return self.rows.shape[2]

    def matrix(self, selected: np.ndarray) -> Array:
        A = self.rows[selected].reshape(-1, self.size)
        return A.T @ A


def information_bytes(n: int, measure: str, device_known: bool) -> int:
    """Bytes one candidate posture needs in :func:`posture_information` and
    :func:`select_postures` for ``n`` joints, at most.

    With k = 3 (position) or 6 (pose) rows and P = 6 n + 6 parameters (the joints' eta and
    the marker frame, + 6 for an unknown device frame), the Jacobian phase holds about 4 k P
    doubles per candidate and the selection k p + p^2 (p <= P identifiable directions);
    measured on the iiwa: 12.8 KB per candidate (pose, device unknown, P = 54, p = 34)
    against 25.9 KB estimated.
    """
    k = 6 if measure == "pose" else 3
    P = 6 * n + 6 + (0 if device_known else 6)
    return 8 * max(4 * k * P, k * P + P * P)


def check_candidates(where: str, count: int, n: int, measure: str, device_known: bool) -> None:
    """Refuse ``count`` candidate postures whose information would not fit in memory, naming
    ``where`` (the key or file that set the count) and the estimate."""
    per = information_bytes(n, measure, device_known)
    device = "known" if device_known else "unknown"
    check_memory(
        where, count * per,
        f"{per / 2**10:.1f} KiB per candidate for {n} joints, {measure} measured, device "
        f"frame {device}",
    )  # fmt: skip


def random_postures(
    chain: Chain, count: int, lower: Array, upper: Array, rng: np.random.Generator
) -> Array:
    """``count`` postures uniform in [lower, upper] (C, n)."""
    return rng.uniform(lower, upper, size=(count, chain.n))


def read_postures(path: str | os.PathLike, chain: Chain) -> Array:
    """Candidate postures from a CSV with a header row naming joints ``q_<joint>`` (or ``<joint>``).

    Other columns (t, measured positions) are ignored; rows must be finite.
    """
    path = check_input_file(path, "candidate postures file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkbenchError(f"cannot read candidate postures {path}: {exc}") from None
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    if len(lines) < 2:
        raise WorkbenchError(f"{path}: needs a header row and at least one posture")
    header = [h.strip() for h in lines[0].split(",")]
    columns = []
    for name in chain.joint_names:
        for candidate in (f"q_{name}", name):
            if candidate in header:
                columns.append(header.index(candidate))
                break
        else:
            raise WorkbenchError(f"{path}: line 1: no column q_{name} (joint '{name}')")
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split(",")
        if len(cells) != len(header):
            raise WorkbenchError(
                f"{path}: line {number} has {len(cells)} fields; the header has {len(header)}"
            )
        try:
            rows.append([float(cells[c]) for c in columns])
        except ValueError:
            raise WorkbenchError(f"{path}: line {number}: a joint value is not a number") from None
    q = np.array(rows)
    if not np.all(np.isfinite(q)):
        raise WorkbenchError(f"{path}: postures contain NaN or inf")
    return q


def posture_information(
    chain: Chain,
    q: Array,
    *,
    measure: str = "position",
    device_known: bool = True,
    sigma_position: float = 1e-4,
    sigma_rotation: float = 1e-3,
    rtol: float = 1e-8,
) -> PostureInformation:
    """Rows A_c of every candidate (module docstring); ``measure`` 'position' or 'pose'."""
    if measure not in ("position", "pose"):
        raise WorkbenchError(f"unknown measure '{measure}'; choose 'position' or 'pose'")
    C = q.shape[0]
    rotation = np.broadcast_to(np.eye(3), (C, 3, 3)) if measure == "pose" else None
    marker = Marker("tool", None, position=np.zeros((C, 3)), rotation=rotation)
    problem = KinematicProblem(q, (marker,), device_known=device_known)
    start = problem.start(chain)
    position, R = problem.predict(start)[0]  # measurements equal to the prediction: r = 0
    marker = Marker("tool", None, position=position, rotation=R if measure == "pose" else None)
    problem = KinematicProblem(q, (marker,), device_known=device_known)
    _, J = problem.evaluate(start)
    k = 6 if measure == "pose" else 3
    prior, preferred = problem.prior(start)
    S = identifiable_subspace(J, prior, rtol=rtol, preferred=preferred).basis
    weights = np.array([1 / sigma_position] * 3 + [1 / sigma_rotation] * 3)[:k]
    rows = (J @ S).reshape(C, k, -1) * weights[None, :, None]
    n = chain.n
    labels = [f"eta{j + 1}[{i}]" for j in range(n) for i in range(6)]
    labels += [f"device[{i}]" for i in range(6)] if not device_known else []
    labels += [f"marker[{i}]" for i in range(6)]
    return PostureInformation(q, rows, S, tuple(labels), measure)


@dataclass(frozen=True)
class PostureSelection:
    """Selected candidates (N,), log det F, the relaxation bound and the D-efficiency bound."""

    selected: np.ndarray
    log_det: float
    greedy_log_det: float
    upper_bound: float
    efficiency_bound: float
    condition_number: float
    exchanges: int
    relaxation_gap: float  # max_c tr(M^-1 I_c) - p at the relaxation's final weights


def _gains(A: Array, Finv: Array) -> Array:
    """log det(I + A_c F^{-1} A_c^T) for every candidate (C,)."""
    G = np.einsum("ckp,pq,clq->ckl", A, Finv, A)
    G = G + np.eye(A.shape[1])
    sign, value = np.linalg.slogdet(G)
    return np.where(sign > 0, value, -np.inf)


def select_postures(
    information: PostureInformation, count: int, max_passes: int = 50, relaxation_steps: int = 2000
) -> PostureSelection:
    """Greedy then Fedorov-exchange selection of ``count`` distinct postures (module docstring)."""
    A = information.rows
    C, k, p = A.shape
    if count > C:
        raise WorkbenchError(f"{count} postures requested from only {C} candidates")
    if count * k < p:
        raise WorkbenchError(
            f"{count} postures give {count * k} equations for {p} identifiable parameters; "
            f"select at least {int(np.ceil(p / k))}"
        )
    info = np.einsum("ckp,ckq->cpq", A, A)
    eps = 1e-9 * np.trace(info.mean(axis=0)) / p
    F = eps * np.eye(p)
    chosen = np.zeros(C, dtype=bool)
    order: list[int] = []
    for _ in range(count):
        gains = _gains(A, np.linalg.inv(F))
        gains[chosen] = -np.inf
        c = int(np.argmax(gains))
        chosen[c] = True
        order.append(c)
        F = F + info[c]
    greedy = _logdet(F - eps * np.eye(p))
    selected = np.array(order)
    F = info[selected].sum(axis=0)
    exchanges = 0
    for _ in range(max_passes):
        improved = False
        for slot in range(count):
            i = selected[slot]
            reduced = F - info[i]
            base = np.linalg.slogdet(reduced + eps * np.eye(p))[1]
            gains = _gains(A, np.linalg.inv(reduced + eps * np.eye(p))) + base
            gains[chosen] = -np.inf
            j = int(np.argmax(gains))
            if gains[j] > _logdet(F) + 1e-10 * max(1.0, abs(_logdet(F))):
                chosen[i], chosen[j] = False, True
                selected[slot] = j
                F = reduced + info[j]
                exchanges += 1
                improved = True
        if not improved:
            break
    value = _logdet(F)
    bound, gap = _relaxation_bound(info, count, relaxation_steps)
    eigen = np.linalg.eigvalsh(F)
    return PostureSelection(
        selected=np.sort(selected), log_det=value, greedy_log_det=greedy, upper_bound=bound,
        efficiency_bound=float(np.exp((value - bound) / p)),
        condition_number=float(np.sqrt(eigen[-1] / eigen[0])) if eigen[0] > 0 else np.inf,
        exchanges=exchanges, relaxation_gap=gap,
    )  # fmt: skip


def _logdet(F: Array) -> float:
    sign, value = np.linalg.slogdet(F)
    return float(value) if sign > 0 else -np.inf


def _relaxation_bound(
    info: Array, count: int, steps: int, tol: float = 1e-4
) -> tuple[float, float]:
    """p log N + log det M(w) + max_c tr(M^-1 I_c) - p after the multiplicative algorithm."""
    C, p, _ = info.shape
    w = np.full(C, 1.0 / C)
    gap = np.inf
    for _ in range(steps):
        M = np.einsum("c,cpq->pq", w, info)
        Minv = np.linalg.inv(M)
        d = np.einsum("pq,cqp->c", Minv, info)
        gap = float(d.max() - p)
        if gap <= tol * p:
            break
        w = w * d / p
        w /= w.sum()
    M = np.einsum("c,cpq->pq", w, info)
    d = np.einsum("pq,cqp->c", np.linalg.inv(M), info)
    gap = float(d.max() - p)
    return p * np.log(count) + _logdet(M) + gap, gap
