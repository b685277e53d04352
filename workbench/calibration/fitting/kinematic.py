"""POE kinematic calibration of joint twists, marker frames and the measuring device's frame.

Model (zero-reference normal form, all frames in the base frame at q = 0,
[Kwon] §2 footnote 1): marker m hangs from link ``k_m`` at ``M_m`` and is
measured in the frame of a device (camera, motion capture) whose pose in the
robot's base frame is unknown in general:

    T_m(q) = X prod_{j on the path to k_m} exp([A_j(eta)] q_j) M_m,
    A_j(eta) = Ad_{exp(eta_j)} A_j                                      (eq. 6)

with ``X`` the base frame seen from the device (identity when the
measurements are in the base frame). Parameters, relinearised at every
iteration: ``eta_j`` per joint (eq. 6), then ``X <- exp(d_X) X`` when the
device frame is unknown, then ``M_m <- exp(d_m) M_m`` per marker.

Derivatives at the current model. With ``E_j = exp([A_j] q_j)`` and the
partial products ``P_a = E_1 ... E_a`` (P_0 = I) along the path, perturbing
eta_j conjugates ``E_j <- exp(d eta_j) E_j exp(-d eta_j)``, so the marker
moves by the spatial (base-frame) twist

    d xi = (Ad_{P_{a-1}} - Ad_{P_a}) d eta_j      (joint j at path position a),
    d xi = Ad_{P_k} d_m                           (the marker frame, k joints on the path),

which is eq. 8 (``dA_j = -ad_{A_j} d eta_j``) integrated along the chain; in
the device frame it is ``Ad_X d xi``, and ``d_X`` adds itself. A point p of
the marker moves by ``dp = [-[p], I] d xi``; the orientation residual
``r = log(R R_meas^T)`` by ``J_l^{-1}(r) d omega``.

Identifiable directions: per joint, those that change its twist
(``identifiable_eta_basis``), every device and marker direction, refined by
the SVD of the stacked Jacobian at the start (:func:`identifiable_subspace`).
The device frame is *preferred*: a motion of all joint axes together is the
same as moving the device, and is given to the device, so that the joints
move only as much as the data require; after convergence the base frame,
which nothing measured can fix, is set to the one in which the joint twists
are closest to the nominal ones (:func:`_align_base`), and each joint frame
is the nominal one moved least onto its calibrated axis
(:meth:`Chain.with_frames_near`), so that eta holds only what changes twists.
Position-only data leave, e.g., a marker's own rotation unseen; those
directions are reported and kept.

What the joints may do is one of nested candidates (``parameters``): nothing
(``frames``: the device and marker frames only, the nominal kinematics' best
case), a zero offset per joint (``offsets``: ``q_j + o_j``, which is exactly
the eta ``A_j o_j`` on every joint and marker after j, applied joint by
joint so that the model stays the nominal with offsets), or every twist
(``twists``). Joints start from the ``frames`` fit, and an optional ridge
pulls their coordinates toward the nominal (:class:`KinematicProblem`);
:mod:`workbench.calibration.selection.selection` chooses among them by held-out folds.

Position and rotation residuals are made commensurate by ``rotation_weight``
(metres per radian); by default it is estimated from the data: a first fit
with 1 m/rad, then the weight is the ratio of the position and rotation
residual RMS and the model is refitted (variance components).

Computation: residuals, poses and Jacobian rows come from compiled kernels
(:mod:`workbench.calibration.fitting.kinematic_kernels`), batched over samples on the
kernel thread pool. The solver never holds the (m x p) Jacobian: each
linearisation folds the rows of ``[J P | r]`` (P the candidate directions of
:meth:`KinematicProblem.prior`) into a triangular factor R, which gives the
identifiable subspace (the singular values and right singular vectors of J P
are those of R) and the Levenberg-Marquardt normal equations, and a trial step
costs one residual pass. :meth:`KinematicProblem.evaluate` still returns the
dense Jacobian for callers that want it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import numpy as np
from scipy.linalg import block_diag

from workbench import lie
from workbench.calibration.fitting import compliance
from workbench.calibration.fitting import fixtures as fx
from workbench.calibration.fitting import kinematic_kernels as kk
from workbench.calibration.fitting.compliance import Deflection
from workbench.calibration.fitting.solver import (
    Normal,
    Solution,
    Subspace,
    identifiable_subspace,
    irls_weights,
    minimise,
    orthogonal_complement,
    robust_cost,
)
from workbench.chain import Chain
from workbench.dynamics.kinematics import path_to
from workbench.errors import WorkbenchError
from workbench.eta import eta_between, identifiable_eta_basis
from workbench.lie import Array
from workbench.recordings.log import Distance, Fixture, Log, Marker
from workbench.runtime import run_batched

PARAMETERS = ("frames", "offsets", "twists", "compliance")  # nested: each holds the one before


@dataclass(frozen=True)
class KinematicModel:
    """A chain, the base frame seen from the device (4, 4), and marker placements (M, 4, 4).

    ``coordinates`` (k,) hold how far the joints moved from the nominal in the
    problem's joint directions, what the ridge weighs: offsets in rad or m;
    for twists ``T (A - A_nominal)``, the twists' change in the coordinates
    of the twist-changing eta directions B at the nominal
    (``identifiable_eta_basis``; ``T`` (k, 6 n) is the left inverse of their
    twist changes ``-ad_A B``, eq. 8). Both are functions of the model
    (twists, not joint frames, which the data do not fix), not of the path
    the fit took to it.
    """

    chain: Chain
    device: Array
    placements: Array
    coordinates: Array = field(default_factory=lambda: np.zeros(0))
    reference: Array | None = None  # (n, 6) twists: the nominal's twists
    twist_map: Array | None = None  # (k, 6 n) twists: T above
    fixtures: Array = field(default_factory=lambda: np.zeros((0, 4)))  # (F, 4) fixtures' states
    compliance: Array = field(default_factory=lambda: np.zeros(0))  # (n,) c_i = 1 / k_i


@dataclass(frozen=True)
class Linearisation:
    """Residuals at a model and, without forming J, triangular factors of the least squares.

    With ``P`` (p, k) the candidate directions of :meth:`KinematicProblem.prior`
    (independent columns), ``R`` (k + 1, k + 1) is the R of a
    QR factorisation of ``[J P | r]`` and ``Rw`` that of ``sqrt(w) [J P | r]``
    (``R`` itself without weights). Every use of J goes through span(P): the
    subspace (:attr:`jacobian_factor`, a matrix with the singular values and
    right singular vectors of J on span(P)) and the normal equations
    ``(J S)^T W (J S)``, ``(J S)^T W r`` for S in span(P). ``J`` is the dense
    Jacobian, only when asked for (:meth:`KinematicProblem.evaluate`).
    """

    r: Array
    J: Array | None = None
    R: Array | None = None
    Rw: Array | None = None
    P: Array | None = None
    preferred: int = 0
    gauge: Array | None = None  # (g, p): steps must satisfy gauge @ step = 0
    free: Array | None = None  # (p, l): the columns of P the steps may take (the gauge held)

    @property
    def candidates(self) -> Array:
        """The directions the subspace is chosen among: ``P``, or ``P free`` with a gauge."""
        return self.P if self.free is None else self.P @ self.free

    @functools.cached_property
    def coordinates(self) -> Array:
        """``P^+`` (k, p): the coordinates in P's columns of a direction in span(P)."""
        return np.linalg.pinv(self.P)

    @property
    def jacobian_factor(self) -> Array:
        """``R_JP P^+`` (min(m, k), p): stands in for J in :func:`identifiable_subspace`
        (equal to J on span(P), which is all the subspace asks of it)."""
        k = self.P.shape[1]
        return self.R[: min(self.r.size, k), :k] @ self.coordinates  # min(m, k) rows of QR

    def normal_equations(self, S: Array) -> tuple[Array, Array]:
        """``(J S)^T W (J S)`` and ``(J S)^T W r`` for S (p, l) in span(P), from ``Rw``."""
        JS = self.Rw[:, :-1] @ (self.coordinates @ S)
        return JS.T @ JS, JS.T @ self.Rw[:, -1]


@dataclass(frozen=True)
class KinematicProblem:
    """Measured marker poses over a log and what is estimated (module docstring).

    ``markers`` hold positions (N, 3) and/or rotations (N, 3, 3) in the
    device frame (NaN rows: not seen in that sample); ``device_known``
    whether that frame is the robot's base frame. ``parameters`` says what
    the joints may do, in nested candidates (:data:`PARAMETERS`): ``frames``
    fits the device and marker frames only (the nominal kinematics' best
    case), ``offsets`` adds one zero offset per joint (``q_j + o_j``: exactly
    the eta ``A_j o_j`` on every joint and marker after j), ``twists`` moves
    every joint twist (eq. 6), ``compliance`` adds a compliance per joint
    under gravity (:mod:`workbench.calibration.fitting.compliance`: the kernels see
    the deflected joint positions and, through ``qdir``, their derivatives;
    ``payload`` is the log's known payload, ``compliance_start`` the
    compliances of the start, held by the other candidates, and ``held`` the
    joints whose compliance stays there). ``ridge`` >= 0 adds the prior
    ``ridge * sum_i s_i^2 c_i^2 / 2`` toward the nominal to the cost, with
    ``c`` the joints' coordinates (:class:`KinematicModel`) and ``s_i`` the
    norm of the data Jacobian's column of ``c_i`` at the nominal: with
    ``ridge = 1`` the prior weighs each coordinate as much as all the data
    alone would.

    ``fixtures`` hold samples whose unmeasured marker rests at an unknown
    point or on an unknown plane, estimated with the rest, and ``distances``
    known distances between point fixtures (:mod:`workbench.calibration.
    fixtures`: their residuals follow the markers', their steps (3 each) the
    markers' frames; without a measured marker the world placement, and
    without a distance the scale, are held: :meth:`free`).
    """

    q: Array
    markers: tuple[Marker, ...]
    device_known: bool = True
    rotation_weight: float = 1.0
    parameters: str = "twists"
    ridge: float = 0.0
    fixtures: tuple[Fixture, ...] = ()
    distances: tuple[Distance, ...] = ()
    source: str = "<memory>"
    payload: tuple[int, Array] | None = None
    compliance_start: Array | None = None
    held: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        if self.parameters not in PARAMETERS:
            raise WorkbenchError(
                f"unknown kinematic parameters '{self.parameters}'; choose one of "
                f"{', '.join(PARAMETERS)}"
            )
        if not (np.isfinite(self.ridge) and self.ridge >= 0):
            raise WorkbenchError(f"the ridge weight {self.ridge} must be >= 0")

    @classmethod
    def from_log(cls, log: Log, rotation_weight: float = 1.0) -> KinematicProblem:
        markers = log.measured_markers()
        if not any(m.position is not None for m in markers) and not log.fixtures:
            raise WorkbenchError(
                f"{log.source}: kinematic calibration needs measured positions (px, py, pz "
                "or markers) or fixtures"
            )
        measured = any(m.position is not None or m.rotation is not None for m in markers)
        return cls(
            log.q, markers, log.frame_known or not measured, rotation_weight,
            payload=log.payload, fixtures=log.fixtures, distances=log.distances,
            source=log.source,
        )  # fmt: skip

    def __len__(self) -> int:
        return self.q.shape[0]

    def subset(self, rows: np.ndarray) -> KinematicProblem:
        return replace(
            self, q=self.q[rows], markers=tuple(m.subset(rows) for m in self.markers),
            fixtures=tuple(f.subset(rows) for f in self.fixtures),
        )  # fmt: skip

    @property
    def has_rotation(self) -> bool:
        return any(m.rotation is not None for m in self.markers)

    # ---------------------------------------------------------------- model
    def start(self, chain: Chain) -> KinematicModel:
        """The nominal model: identity device frame, marker frames from the chain."""
        placements = np.array([_placement(chain, m) for m in self.markers]).reshape(-1, 4, 4)
        n = chain.n
        reference = twist_map = None
        size = {"frames": 0, "offsets": n}.get(self.parameters)
        if self.parameters in ("twists", "compliance"):
            basis = identifiable_eta_basis(chain)[: 6 * n, :-6]
            reference = chain.twists.copy()
            twist_map = np.linalg.pinv(block_diag(*-lie.ad(chain.twists)) @ basis)
            size = basis.shape[1]
        c = np.zeros(n) if self.compliance_start is None else self.compliance_start
        model = KinematicModel(
            chain, np.eye(4), placements, np.zeros(size), reference, twist_map,
            compliance=c.copy(),
        )  # fmt: skip
        if not self.fixtures:
            return model
        states = fx.start_states(self._kinds, self.fixture_points(model))
        return replace(model, fixtures=states)

    def fixture_points(self, model: KinematicModel) -> list[Array]:
        """Per fixture, its samples' predicted marker origins (N_f, 3) in the device frame."""
        points = self.predict(model)
        return [points[self._marker_index[f.marker]][0][f.rows] for f in self.fixtures]

    @functools.cached_property
    def _kinds(self) -> tuple[str, ...]:
        return tuple(f.kind for f in self.fixtures)

    @functools.cached_property
    def _marker_index(self) -> dict[str, int]:
        return {m.name: k for k, m in enumerate(self.markers)}

    @functools.cached_property
    def _distance_index(self) -> tuple[tuple[int, int, float], ...]:
        index = {f.name: k for k, f in enumerate(self.fixtures)}
        return tuple((index[a], index[b], d.value) for d in self.distances for a, b in [d.between])

    @property
    def measured(self) -> bool:
        """Whether some marker is measured (else the world placement is a gauge)."""
        return any(m.position is not None or m.rotation is not None for m in self.markers)

    def _model(self, model: Chain | KinematicModel) -> KinematicModel:
        return self.start(model) if isinstance(model, Chain) else model

    @property
    def sizes(self) -> tuple[int, int]:
        """Lengths of the device and marker blocks, after the 6 n joint entries (then the n
        compliances if estimated, and the fixtures' 3 F entries last: :meth:`width`)."""
        return 0 if self.device_known else 6, 6 * len(self.markers)

    @property
    def compliant(self) -> bool:
        """Whether the compliances are estimated: one entry per joint after the markers."""
        return self.parameters == "compliance"

    def width(self, chain: Chain) -> int:
        """Entries before the fixtures' steps: joints (6 n), device, markers, and the n
        compliances if estimated."""
        d, m = self.sizes
        return 6 * chain.n + d + m + (chain.n if self.compliant else 0)

    def step_size(self, chain: Chain) -> int:
        """All the entries of a step: :meth:`width`, then the fixtures' (3 each)."""
        return self.width(chain) + fx.STEP * len(self.fixtures)

    def retract(self, model: KinematicModel, delta: Array) -> KinematicModel:
        """Apply a step: eta by ``with_eta`` (eq. 6), device and markers by left motions,
        compliances by addition, fixtures by :func:`~workbench.calibration.fitting.fixtures.
        retract` (the entries in the order of :meth:`width`, then the fixtures').

        Offsets move every link by the product of exponentials of the offsets
        (one chain update), each moving what comes after it, so that the model
        stays exactly the nominal with offsets.
        """
        n = model.chain.n
        d, m = self.sizes
        k = model.coordinates.size
        step = np.zeros(k)
        if self.parameters == "offsets":  # the offsets of the step (delta is in span(P))
            P, _ = self.prior(model)
            step = np.linalg.lstsq(P, delta, rcond=None)[0][d : d + k]
            delta = delta - P[:, d : d + k] @ step  # the frames' part
        chain = model.chain.with_eta(np.concatenate([delta[: 6 * n], np.zeros(6)]))
        device = model.device
        if d:
            device = lie.exp_se3(delta[6 * n : 6 * n + 6]) @ device
        w = self.width(model.chain)
        frames = lie.exp_se3(delta[6 * n + d : 6 * n + d + m].reshape(-1, 6)) @ model.placements
        states = fx.retract(self._kinds, model.fixtures, delta[w:])
        coordinates = model.coordinates + step
        if self.parameters in ("twists", "compliance"):
            coordinates = model.twist_map @ (chain.twists - model.reference).ravel()
        compliance = model.compliance + delta[6 * n + d + m : w] if self.compliant else None
        moved = replace(
            model, chain=chain, device=device, placements=frames, coordinates=coordinates,
            compliance=model.compliance if compliance is None else compliance, fixtures=states,
        )  # fmt: skip
        if self.parameters == "offsets":  # q + o: link i moves by L_i = L_parent E_i, E_i =
            chain = moved.chain  # exp(A_i o_i) (the product of exponentials at q = o)
            E = lie.exp_se3(chain.twists * step[:, None])
            L = np.empty((n, 4, 4))
            for i, parent in enumerate(chain.parents):
                L[i] = E[i] if parent < 0 else L[parent] @ E[i]
            by_link = np.concatenate([np.eye(4)[None], L])  # index link + 1 (base: -1)
            eta = np.zeros((n + 1, 6))
            eta[:n] = lie.log_se3(by_link[chain.parents + 1])  # a joint moves with its parent
            links = np.array([_parent(chain, m) for m in self.markers], dtype=np.int64)
            moved = replace(
                moved, chain=chain.with_eta(eta.ravel()),
                placements=by_link[links + 1] @ moved.placements,
            )  # fmt: skip
        return moved

    def prior(self, model: KinematicModel) -> tuple[Array, int]:
        """Candidate directions (p, d + k + 6 M [+ free compliances]): device (d), joints (k),
        markers, compliances; d leads.

        Joints: none (``frames``); per joint j the zero offset, ``A_j`` on the
        eta block of every joint after j and on the frame of every marker
        after j (``offsets``, at the current twists, so that steps add up
        exactly); the twist-changing eta directions at the current twists
        (``twists``, ``compliance``). A marker whose rotation is not measured
        moves by translations only (its rotation is unseen and stays the
        nominal's). Then the fixtures' steps, independent like the markers',
        and (``compliance``) one column per compliance not ``held``, whose
        rows sit between the markers' and the fixtures' (:meth:`width`).
        """
        chain = model.chain
        n = chain.n
        d, m = self.sizes
        m += fx.STEP * len(self.fixtures)
        frames = np.eye(d + m)  # device, markers and fixtures: their own directions
        unseen = [6 * k + d + a for k, mk in enumerate(self.markers) if mk.rotation is None
                  for a in range(3)]  # fmt: skip
        frames = np.delete(frames, unseen, axis=1)
        if self.parameters == "offsets":
            joints = np.zeros((6 * n + d + m, n))
            after = chain.ancestors[:, chain.parents.clip(0)] & (chain.parents >= 0)[None]
            for j in range(n):  # joint k is after j when j is an ancestor of k's parent link
                for k in np.flatnonzero(after[j]):
                    joints[6 * k : 6 * k + 6, j] = chain.twists[j]
            for k, path in enumerate(self._paths(chain)):
                for j in path:
                    joints[6 * n + d + 6 * k : 6 * n + d + 6 * k + 6, j] = chain.twists[j]
            placed = np.zeros((6 * n + d + m, frames.shape[1]))
            placed[6 * n :] = frames
            return np.hstack([placed[:, :d], joints, placed[:, d:]]), d
        joints = np.zeros((6 * n, 0))
        if self.parameters in ("twists", "compliance"):
            joints = identifiable_eta_basis(chain)[: 6 * n, :-6]
        k = joints.shape[1]
        P = np.zeros((6 * n + d + m, k + frames.shape[1]))  # joints, the rest block-diagonal
        P[: 6 * n, :k] = joints
        P[6 * n :, k:] = frames
        order = np.r_[k : k + d, :k, k + d : P.shape[1]]  # device first (preferred)
        P = P[:, order]
        if self.compliant:  # the compliances' rows after the markers', before the fixtures'
            first = 6 * n + d + 6 * len(self.markers)
            free = np.setdiff1d(np.arange(n), self.held)
            C = np.zeros((P.shape[0] + n, free.size))
            C[first + free, np.arange(free.size)] = 1.0
            P = np.hstack([np.insert(P, [first] * n, 0.0, axis=0), C])
        return P, d

    def free(self, model: KinematicModel, P: Array) -> Array | None:
        """Orthonormal columns N (c, l) such that the steps ``P N y`` hold the gauge; None when
        nothing needs holding (a measured marker, or no fixture).

        The held directions (:mod:`workbench.calibration.fitting.fixtures`): the world
        placement, moving the joints (``eta_j = xi``), the markers (``xi``) and
        the fixtures together (6), and without a known distance the scale
        (``-ad_{A_j} eta_j = (0, v_j)``, marker translations, fixture points
        and plane offsets, 1). A step of P is held when its effect (the twist
        changes ``-ad_{A_j} eta_j``, eq. 8, and the marker and fixture
        steps) is one of theirs: N spans the complement of those steps in
        P's coordinates (for ``twists`` all of them, for ``offsets`` the base
        joint's, for ``frames`` none).
        """
        if self.measured or not self.fixtures:
            return None
        chain, n = model.chain, model.chain.n
        M = len(self.markers)
        rigid = np.zeros(n if self.compliant else 0)  # the compliances take no part
        held = []
        for xi in np.eye(6):
            steps = fx.gauge_steps(self._kinds, model.fixtures, xi)
            held.append(np.concatenate([np.tile(xi, n), np.tile(xi, M), rigid, steps]))
        if not self.distances:
            ad = -lie.ad(chain.twists)  # (n, 6, 6)
            twist_scale = np.zeros_like(chain.twists)
            twist_scale[:, 3:] = chain.twists[:, 3:]
            eta = np.concatenate(
                [np.linalg.pinv(a) @ v for a, v in zip(ad, twist_scale, strict=True)]
            )
            markers = np.zeros((M, 6))
            markers[:, 3:] = model.placements[:, :3, 3]
            steps = fx.scale_steps(self._kinds, model.fixtures)
            held.append(np.concatenate([eta, markers.ravel(), rigid, steps]))
        effect_held = self._effect(model, np.stack(held, axis=1))
        effect = self._effect(model, P)
        Q = np.linalg.qr(effect_held)[0]
        rest = effect - Q @ (Q.T @ effect)  # what of each step is not a gauge motion
        _, s, Vt = np.linalg.svd(rest / np.linalg.norm(effect, axis=0), full_matrices=True)
        rank = int(np.sum(s > 1e-9 * s[0]))
        return Vt[:rank].T

    def _effect(self, model: KinematicModel, X: Array) -> Array:
        """Effects of steps X (p, c): twist changes ``-ad_{A_j} eta_j`` (eq. 8), the marker
        frame's motion (of its origin, ``v + omega x t``, when its rotation is not measured),
        the device's, compliances' and fixtures' steps as they are."""
        chain = model.chain
        n = chain.n
        d, _ = self.sizes
        X = X.reshape(X.shape[0], -1)
        parts = [np.einsum("nij,njc->nic", -lie.ad(chain.twists), X[: 6 * n].reshape(n, 6, -1))
                 .reshape(6 * n, -1), X[6 * n : 6 * n + d]]  # fmt: skip
        for k, marker in enumerate(self.markers):
            block = X[6 * n + d + 6 * k : 6 * n + d + 6 * k + 6]
            if marker.rotation is None:
                t = model.placements[k, :3, 3]
                block = block[3:] + np.cross(block[:3].T, t).T
            parts.append(block)
        parts.append(X[6 * n + d + 6 * len(self.markers) :])  # compliances, fixtures
        return np.concatenate(parts)

    def coordinate_jacobian(self, model: KinematicModel, linear: Linearisation) -> Array:
        """``d coordinates / d delta`` (k, p) at ``model`` (:class:`KinematicModel`): offsets
        add up (P's joint rows of ``P^+``); for twists ``T (-ad_{A_j})`` per joint (eq. 8)."""
        d, _ = self.sizes
        k = model.coordinates.size
        if self.parameters not in ("twists", "compliance"):
            return linear.coordinates[d : d + k]
        out = np.zeros((k, linear.P.shape[0]))
        n = model.chain.n
        out[:, : 6 * n] = model.twist_map @ block_diag(*-lie.ad(model.chain.twists))
        return out

    # ------------------------------------------------------------ residuals
    def residual(self, model: Chain | KinematicModel) -> Array:
        """Stacked residuals: per marker and seen sample, 3 position (m) then 3 rotation entries."""
        return self._run(self._model(model)).r

    def evaluate(self, model: Chain | KinematicModel) -> tuple[Array, Array]:
        """Residuals and their Jacobian d r / d params (dense, m x p) at the current model."""
        run = self._run(self._model(model), dense=True)
        return run.r, run.J

    def linearise(self, model: KinematicModel, weights: Array | None = None) -> Linearisation:
        """Residuals and triangular factors of ``[J P | r]`` (and with weights) (no dense J)."""
        P, preferred = self.prior(model)
        linear = self._run(model, projection=P, weights=weights, preferred=preferred)
        return replace(linear, gauge=self.gauge(model), free=self.free(model, P))

    def gauge(self, model: KinematicModel) -> Array | None:
        """With compliance and an unknown device frame, the constraint (6, p) that keeps the
        base's tilt against gravity the nominal's: steps whose twist changes (``-ad_{A_j}
        eta_j``, eq. 8) have no part along a common motion of all joints (``-ad_{A_j} xi``,
        which the device frame absorbs in a rigid model and only gravity would see), else
        None."""
        if not self.compliant or self.device_known:
            return None
        n = model.chain.n
        change = -lie.ad(model.chain.twists)  # (n, 6, 6)
        Q, _ = np.linalg.qr(change.reshape(6 * n, 6))
        C = np.zeros((6, self.step_size(model.chain)))
        C[:, : 6 * n] = Q.T @ block_diag(*change)
        return C

    def predict(self, model: KinematicModel) -> list[tuple[Array, Array]]:
        """Per marker: predicted positions (N, 3) and rotations (N, 3, 3) in the device frame."""
        out = []
        q, twists = _c(self.deflected(model).q), _c(model.chain.twists)
        for k, path in enumerate(self._paths(model.chain)):
            T = np.empty((q.shape[0], 4, 4))
            args = (q, twists, path, _c(model.placements[k]), _c(model.device), T)
            run_batched(kk.marker_poses, q.shape[0], *args)
            out.append((T[:, :3, 3], T[:, :3, :3]))
        return out

    def _run(
        self,
        model: KinematicModel,
        *,
        dense: bool = False,
        projection: Array | None = None,
        weights: Array | None = None,
        preferred: int = 0,
    ) -> Linearisation:
        """One pass of :func:`kinematic_kernels.marker_rows` per marker over all samples.

        ``projection`` P (p, k) folds ``[J P | r]`` into triangular factors.
        """
        chain = model.chain
        n, N = chain.n, len(self)
        d, _ = self.sizes
        p = self.width(chain)  # joints, device, markers, compliances; the fixtures' follow
        fold = projection is not None
        if fold:
            proj, lo, hi = _block_projection(projection[:p])
            c = projection.shape[1] + 1
        else:
            proj, lo, hi, c = np.zeros((0, 0)), np.zeros(0, np.int64), np.zeros(0, np.int64), 0
        moved = self.compliant or np.any(model.compliance != 0.0)
        bent = self.deflected(model, derivatives=moved and (fold or dense))
        q, twists = _c(bent.q), _c(chain.twists)
        qdir = np.zeros((0, 0, 0))
        if bent.dtau_deta is not None:
            free = np.ones(n, bool) if self.compliant else np.zeros(n, bool)
            free[list(self.held)] = False
            qdir = _c(compliance.joint_directions(bent, model.compliance, p, p - n, free))
        device = _c(model.device)
        jobs = []
        for k, (marker, path) in enumerate(zip(self.markers, self._paths(chain), strict=True)):
            rows = 3 * ((marker.position is not None) + (marker.rotation is not None))
            jobs.append(
                (
                    path,
                    _c(model.placements[k]),
                    np.zeros((0, 3)) if marker.position is None else _c(marker.position),
                    np.zeros((0, 3, 3)) if marker.rotation is None else _c(marker.rotation),
                    6 * n if d else -1,
                    6 * n + d + 6 * k,
                    np.empty((N, rows)),
                    np.zeros((N, rows, p)) if dense else np.zeros((0, 0, 0)),
                )
            )
        sqrt_w = [np.zeros((0, 0))] * len(jobs)
        if weights is not None:  # the weights of the seen rows, on each marker's (N, rows) grid
            sqrt_w, offset = [], 0
            for seen, job in zip(self._seen, jobs, strict=True):
                grid = np.zeros(job[6].shape)
                size = int(seen.sum()) * grid.shape[1]
                if size:
                    grid[seen] = np.sqrt(weights[offset : offset + size]).reshape(seen.sum(), -1)
                sqrt_w.append(grid)
                offset += size
        factors: list[tuple[int, Array, Array]] = []

        def chunk(start: int, stop: int) -> None:
            R = np.zeros((c, c))
            Rw = np.zeros((c, c) if weights is not None else (0, 0))
            for (path, placement, position, rotation, dcol, mcol, r, J), w in zip(
                jobs, sqrt_w, strict=True
            ):
                if r.shape[1] == 0:  # a marker that only fixtures see
                    continue
                kk.marker_rows(
                    q, twists, path, placement, device, position, rotation,
                    float(self.rotation_weight), dcol, mcol, p, fold, dense, proj, lo, hi, w,
                    qdir, r, J, R, Rw, start, stop,
                )  # fmt: skip
            factors.append((start, R, Rw))

        run_batched(chunk, N)
        seen = [np.all(np.isfinite(job[6]), axis=1) for job in jobs]
        r = np.concatenate([job[6][s].ravel() for job, s in zip(jobs, seen, strict=True)])
        r_fixed, J_fixed = self._fixture_rows(model, fold or dense, q, qdir)
        if dense:
            J = np.concatenate(
                [job[7][s].reshape(-1, p) for job, s in zip(jobs, seen, strict=True)]
            )
            if self.fixtures:
                J = np.vstack([np.pad(J, ((0, 0), (0, J_fixed.shape[1] - p))), J_fixed])
            return Linearisation(np.concatenate([r, r_fixed]), J=J)
        if not fold:
            return Linearisation(np.concatenate([r, r_fixed]))
        factors.sort(key=lambda f: f[0])
        R = [f[1] for f in factors]
        Rw = [f[2] for f in factors]
        if self.fixtures:  # the fixtures' rows [J P | r], folded by a QR of their own
            rows = np.hstack([J_fixed @ projection, r_fixed[:, None]])
            R.append(np.linalg.qr(rows, mode="r"))
            if weights is not None:
                w = np.sqrt(weights[weights.size - r_fixed.size :])[:, None]
                Rw.append(np.linalg.qr(w * rows, mode="r"))
        R_all = _combine(R)
        Rw_all = R_all if weights is None else _combine(Rw)
        r = np.concatenate([r, r_fixed])
        return Linearisation(r, R=R_all, Rw=Rw_all, P=projection, preferred=preferred)

    def _fixture_rows(
        self, model: KinematicModel, jacobian: bool, q: Array, qdir: Array
    ) -> tuple[Array, Array]:
        """The fixtures' residuals and (with ``jacobian``) rows (:mod:`.fixtures`), from each
        fixture's samples' marker origins and their derivatives (kernel rows of a zero
        measurement: the prediction itself), at the joint positions ``q`` (N, n) the markers
        see and their directions ``qdir`` (:meth:`_run`)."""
        if not self.fixtures:
            return np.zeros(0), np.zeros((0, 0))
        chain = model.chain
        d, _ = self.sizes
        n, p = chain.n, self.width(chain)
        twists, device = _c(chain.twists), _c(model.device)
        empty2, empty3 = np.zeros((0, 0)), np.zeros((0, 0, 0))
        index = np.zeros(0, np.int64)
        points, jacobians = [], []
        paths = self._paths(chain)
        for fixture in self.fixtures:
            k = self._marker_index[fixture.marker]
            qf = _c(q[fixture.rows])
            qdir_f = _c(qdir[fixture.rows]) if qdir.shape[0] else qdir
            Nf = qf.shape[0]
            out = np.empty((Nf, 3))
            J = np.zeros((Nf, 3, p)) if jacobian else empty3
            kk.marker_rows(
                qf, twists, paths[k], _c(model.placements[k]), device, np.zeros((Nf, 3)),
                np.zeros((0, 3, 3)), 1.0, 6 * n if d else -1, 6 * n + d + 6 * k, p, False,
                jacobian, empty2, index, index, empty2, qdir_f, out, J, empty2, empty2, 0, Nf,
            )  # fmt: skip
            points.append(out)
            jacobians.append(J)
        r, J = fx.residual_rows(
            self._kinds, model.fixtures, points, jacobians if jacobian else None,
            self._distance_index, p,
        )  # fmt: skip
        return r, (J if jacobian else np.zeros((0, 0)))

    def deflected(self, model: KinematicModel, derivatives: bool = False) -> Deflection:
        """The joint positions the markers see: the log's, deflected by the model's
        compliances under gravity (:func:`workbench.calibration.fitting.compliance.deflection`)."""
        if not (derivatives or np.any(model.compliance != 0.0)):
            return Deflection(self.q, np.zeros_like(self.q), None)
        chain = compliance.loaded(model.chain, self.payload)
        return compliance.deflection(chain, self.q, model.compliance, derivatives)

    def _paths(self, chain: Chain) -> tuple[np.ndarray, ...]:
        """Per marker, the joints from the base to its link (cached per chain topology)."""
        key = (
            chain.link_names, chain.tool_name, chain.tool_parent, tuple(chain.parents.tolist()),
            tuple((f.name, f.parent) for f in chain.frames),
        )  # fmt: skip
        paths = self._path_cache.get(key)
        if paths is None:
            paths = tuple(path_to(chain, _parent(chain, m)) for m in self.markers)
            self._path_cache[key] = paths
        return paths

    @functools.cached_property
    def _path_cache(self) -> dict:
        return {}

    @functools.cached_property
    def _seen(self) -> list[np.ndarray]:
        """Per marker, the samples with finite q and measurements: those with a finite residual."""
        q = np.all(np.isfinite(self.q), axis=1)
        out = []
        for marker in self.markers:
            seen = q.copy()
            if marker.position is not None:
                seen &= np.all(np.isfinite(marker.position), axis=1)
            if marker.rotation is not None:
                seen &= np.all(np.isfinite(marker.rotation), axis=(1, 2))
            out.append(seen)
        return out


def _c(a: Array) -> Array:
    return np.ascontiguousarray(a, dtype=float)


def _block_projection(P: Array) -> tuple[Array, Array, Array]:
    """P and, per 6-row block b, the columns ``lo[b]:hi[b]`` that hold its nonzeros."""
    blocks = P.shape[0] // 6
    lo, hi = np.zeros(blocks, np.int64), np.zeros(blocks, np.int64)
    for b in range(blocks):
        cols = np.flatnonzero(np.any(P[6 * b : 6 * b + 6] != 0.0, axis=0))
        if cols.size:
            lo[b], hi[b] = cols[0], cols[-1] + 1
    return _c(P), lo, hi


def _combine(factors: list[Array]) -> Array:
    """One triangular factor of the rows of several (QR of the stacked factors)."""
    R = factors[0].copy()
    for other in factors[1:]:
        for first in range(0, R.shape[0], kk.BLOCK):
            rows = other[first : first + kk.BLOCK]
            Bt = np.zeros((R.shape[0], kk.BLOCK))
            Bt[:, : rows.shape[0]] = rows.T
            kk.fold_rows(R, Bt, rows.shape[0])
    return R


def _parent(chain: Chain, marker: Marker) -> int:
    return chain.tool_parent if marker.frame is None else chain.parent_of(marker.frame)


def _placement(chain: Chain, marker: Marker) -> Array:
    return chain.tool_frame if marker.frame is None else chain.placement_of(marker.frame)


@dataclass(frozen=True)
class KinematicFit:
    """A kinematic calibration: calibrated chain and frames, eta from the nominal, statistics."""

    chain: Chain  # calibrated; its tool frame follows the marker on the tool frame, if any
    model: KinematicModel
    eta: Array  # (6(n+1),) nominal.with_eta(eta) == chain
    eta_std: Array  # (6(n+1),) first-order standard deviations (0 outside the subspace)
    covariance: Array  # (p, p) of the steps: joints, device, markers, compliances, fixtures
    subspace: Subspace  # identifiable directions at the nominal
    solution: Solution
    rotation_weight: float
    parameters: str = "twists"  # what was fitted (KinematicProblem.parameters)
    ridge: float = 0.0
    prior_weight: Array | None = None  # (k,) ridge * s_i^2: the prior is sum w_i c_i^2 / 2
    source: str = "<memory>"  # the log fitted (its fixtures' states belong to it)
    held: tuple[int, ...] = ()  # joints whose compliance was held rigid (_solve_physical)


def calibrate_kinematic(
    chain: Chain,
    problem: KinematicProblem,
    *,
    loss: str = "linear",
    f_scale: float = 1e-3,
    rtol: float = 1e-8,
    max_iterations: int = 50,
    rotation_weight: float | None = None,
    progress: bool = False,
    frames: KinematicFit | None = None,
) -> KinematicFit:
    """Estimate eta, the device frame and marker frames by LM with the analytic Jacobian.

    The step is restricted to the identifiable subspace (module docstring),
    recomputed at every relinearised model (a nominal model with parallel or
    intersecting axes may see fewer directions than the perturbed one).
    ``loss``/``f_scale`` select a robust loss (IRLS).
    ``rotation_weight`` (m/rad): None estimates it when rotations are
    measured (module docstring); a number fixes it. ``frames``: the ``frames``
    candidate already fitted on the same problem with the same settings, where
    the joints start from (else it is fitted first).
    """
    weight = 1.0 if rotation_weight is None else rotation_weight
    problem = replace(problem, rotation_weight=weight)
    fit = _solve_physical(
        chain, problem, loss, f_scale, rtol, max_iterations, progress, frames=frames
    )
    if rotation_weight is None and problem.has_rotation and len(problem) > 1:
        estimated = _rotation_weight(problem, fit.model)
        if estimated is not None:
            problem = replace(problem, rotation_weight=estimated)
            fit = _solve_physical(chain, problem, loss, f_scale, rtol, max_iterations, progress)
    return fit


SIGNIFICANT = 2.0  # a compliance below this many standard deviations is held rigid


def _weak_compliances(problem: KinematicProblem, fit: KinematicFit, n: int) -> np.ndarray:
    """The free joints whose compliance the data do not tell from zero
    (:func:`_solve_physical`): below :data:`SIGNIFICANT` standard deviations, negative,
    without a standard deviation (outside the identifiable steps: the data do not see it), or
    whose deflection moves no prediction by as much as the residuals' standard deviation
    (``c_i max |d r / d c_i|`` below ``sigma``: no sample can see it, whatever its t-value)."""
    first = 6 * n + sum(problem.sizes)  # the compliances' entries (then the fixtures')
    c = fit.model.compliance
    std = np.sqrt(np.clip(np.diag(fit.covariance)[first : first + n], 0.0, None))
    _, J = problem.evaluate(fit.model)
    effect = c * np.abs(J[:, first : first + n]).max(axis=0, initial=0.0)
    weak = (c < SIGNIFICANT * std) | (c < 0.0) | (std <= 0.0) | (effect < fit.solution.sigma)
    return np.setdiff1d(np.flatnonzero(weak), problem.held)


def _solve_physical(chain, problem, *args, frames=None) -> KinematicFit:
    """:func:`_solve`, with only compliances the data tell from zero: a joint whose estimate
    is weak (:func:`_weak_compliances`: below :data:`SIGNIFICANT` standard deviations,
    negative ones included: no spring; unseen; or deflecting no prediction beyond the noise) is
    held rigid (``held``, c = 0) and the rest refitted, until every free one is significant
    (an active set, warm-started); joints that carry no gravity in the log
    (:func:`~workbench.calibration.fitting.compliance.loaded_joints`) are rigid from the start.
    When none is left, the fit is the rigid one (``twists``, the same numbers as that
    candidate's). ``frames``: as for :func:`calibrate_kinematic`."""
    if problem.compliant:
        carried = compliance.loaded_joints(compliance.loaded(chain, problem.payload), problem.q)
        unloaded = np.flatnonzero(~carried).tolist()
        problem = replace(problem, held=tuple(sorted({*problem.held, *unloaded})))
        if len(problem.held) == chain.n:
            twists = replace(problem, parameters="twists", held=())
            return _solve(chain, twists, *args, frames=frames)
    fit = _solve(chain, problem, *args, frames=frames)
    while problem.compliant:
        weak = _weak_compliances(problem, fit, chain.n)
        if weak.size == 0:
            break
        start = fit.model.compliance.copy()
        start[weak] = 0.0
        held = tuple(sorted({*problem.held, *weak.tolist()}))
        if len(held) == chain.n:
            rigid = replace(problem, parameters="twists", compliance_start=None, held=())
            return _solve(chain, rigid, *args, frames=frames)
        problem = replace(problem, compliance_start=start, held=held)
        fit = _solve(chain, problem, *args, initial=replace(fit.model, compliance=start))
    return replace(fit, held=problem.held)


def _rotation_weight(problem: KinematicProblem, model: KinematicModel) -> float | None:
    """sigma_position / sigma_rotation of the residuals (m/rad), if both are resolved."""
    positions, rotations = [], []
    for marker, (p, R) in zip(problem.markers, problem.predict(model), strict=True):
        if marker.position is not None:
            positions.append((p - marker.position).ravel())
        if marker.rotation is not None:
            rotations.append(lie.log_so3(R @ np.swapaxes(marker.rotation, 1, 2)).ravel())
    if not positions or not rotations:
        return None
    sp = np.sqrt(np.nanmean(np.square(np.concatenate(positions))))
    sr = np.sqrt(np.nanmean(np.square(np.concatenate(rotations))))
    if not (sp > 1e-12 and sr > 1e-12):
        return None
    return float(sp / sr)


def _align_base(model: KinematicModel, nominal: Chain, iterations: int = 30) -> KinematicModel:
    """The same kinematics, expressed in the base frame closest to the nominal's.

    With an unknown device frame, the robot's base frame is not observable:
    moving it by G (twists ``Ad_G A_i``, markers ``G M``, device ``X
    G^{-1}``) changes no prediction. The base is chosen to bring the joint
    twists closest to the nominal ones (Gauss-Newton on G = exp(xi) for
    ``sum_i |Ad_G A_i - A_i^nominal|^2``, with ``d(Ad_G A)/d xi = -ad_A``).
    """
    G = np.eye(4)
    A = model.chain.twists
    for _ in range(iterations):
        moved = np.einsum("ij,nj->ni", lie.Ad(G), A)
        J = -lie.ad(moved).reshape(-1, 6)  # (6 n, 6)
        xi = np.linalg.lstsq(J, (nominal.twists - moved).ravel(), rcond=None)[0]
        G = lie.exp_se3(xi) @ G
        if np.linalg.norm(xi) < 1e-15:
            break
    chain = model.chain.with_eta(np.tile(lie.log_se3(G), model.chain.n + 1))
    return replace(
        model, chain=chain, device=model.device @ lie.inverse(G), placements=G @ model.placements
    )


def _solve(
    chain, problem, loss, f_scale, rtol, max_iterations, progress, frames=None, initial=None
) -> KinematicFit:
    start = problem.start(chain) if initial is None else initial
    if problem.parameters != "frames" and initial is None:  # from the frames' best fit on
        frames = frames or _solve(
            chain, replace(problem, parameters="frames", ridge=0.0), loss, f_scale, rtol,
            max_iterations, progress,
        )  # fmt: skip
        start = replace(
            start, device=frames.model.device, placements=frames.model.placements,
            fixtures=frames.model.fixtures,
        )  # fmt: skip
    d, _ = problem.sizes
    k = start.coordinates.size
    prior_weight = np.zeros(k)  # ridge * s_i^2 (KinematicProblem)
    if problem.ridge and k:
        scale = np.linalg.norm(problem.linearise(start).R[:, d : d + k], axis=0)
        prior_weight = problem.ridge * scale**2
    ridge = bool(np.any(prior_weight > 0))
    sqrt_prior = np.sqrt(prior_weight)

    def residual(model: KinematicModel) -> Array:
        """The data residuals, then (with a ridge) the prior's ``sqrt(ridge) s_i c_i``."""
        r = problem.residual(model)
        return np.concatenate([r, sqrt_prior * model.coordinates]) if ridge else r

    def cost(r: Array) -> float:
        if not ridge:
            return robust_cost(r, loss, f_scale)
        return robust_cost(r[:-k], loss, f_scale) + 0.5 * float(np.sum(np.square(r[-k:])))

    def subspace(linear: Linearisation) -> Subspace:
        """The identifiable directions at the linearised model (its prior, device preferred),
        within its gauge (:meth:`KinematicProblem.gauge`)."""
        J = linear.jacobian_factor
        found = identifiable_subspace(J, linear.candidates, rtol=rtol, preferred=linear.preferred)
        if linear.gauge is None:
            return found
        _, s, Vt = np.linalg.svd(linear.gauge @ found.basis)
        keep = Vt[int(np.sum(s > 1e-9 * max(s[0], 1e-300))) :].T
        basis = found.basis @ keep
        return replace(found, basis=basis, unseen=lambda: orthogonal_complement(basis))

    linearisations: list[Linearisation] = []

    def linearise(model: KinematicModel, r: Array, _) -> tuple[Array, Normal]:
        """IRLS weights and the normal equations from the folded factors (no dense J)."""
        w = irls_weights(r[:-k] if ridge else r, loss, f_scale)
        linear = problem.linearise(model, None if loss == "linear" else w)
        linearisations.append(linear)

        def normal() -> tuple[Array, Array, Array]:
            S = subspace(linear).basis
            A, g = linear.normal_equations(S)
            if ridge:  # the prior on the joint coordinates of a step S z
                CS = problem.coordinate_jacobian(model, linear) @ S
                A = A + CS.T @ (prior_weight[:, None] * CS)
                g = g + CS.T @ (prior_weight * model.coordinates)
            return S, A, g

        return (np.concatenate([w, np.ones(k)]) if ridge else w), normal

    solution = minimise(
        start, residual(start), None, lambda m: (residual(m), None), linearise,
        problem.retract, cost=cost, max_iterations=max_iterations, progress=progress,
        label="kinematic calibration",
    )  # fmt: skip
    nominal_subspace = subspace(linearisations[0])
    model = solution.model
    if not problem.device_known and linearisations[0].gauge is None:  # gauge: base held
        model = _align_base(model, chain)
    model = replace(model, chain=model.chain.with_frames_near(chain))
    calibrated = model.chain
    tool = [k for k, m in enumerate(problem.markers) if m.frame in (None, chain.tool_name)]
    if tool:
        calibrated = replace(calibrated, tool_frame=model.placements[tool[0]])
    cov = solution.covariance.copy()
    fixed = np.linalg.norm(solution.S, axis=1) < 1e-9  # parameters no step moves: std 0
    cov[fixed] = 0.0
    cov[:, fixed] = 0.0
    n = chain.n
    eta_cov = np.zeros((6 * (n + 1), 6 * (n + 1)))
    eta_cov[: 6 * n, : 6 * n] = cov[: 6 * n, : 6 * n]
    if tool:
        col = 6 * n + d + 6 * tool[0]
        eta_cov[6 * n :, 6 * n :] = cov[col : col + 6, col : col + 6]
    return KinematicFit(
        chain=calibrated,
        model=model,
        eta=eta_between(chain, calibrated),
        eta_std=np.sqrt(np.clip(np.diag(eta_cov), 0.0, None)),
        covariance=cov,
        subspace=nominal_subspace,
        solution=solution,
        rotation_weight=problem.rotation_weight,
        parameters=problem.parameters,
        ridge=problem.ridge,
        prior_weight=prior_weight,
        source=problem.source,
    )
