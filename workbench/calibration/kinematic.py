"""POE kinematic calibration of joint twists, marker frames and the measuring device's frame.

Model (zero-reference normal form, all frames in the base frame at q = 0,
seed 000 §2 footnote 1): marker m hangs from link ``k_m`` at ``M_m`` and is
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

Position and rotation residuals are made commensurate by ``rotation_weight``
(metres per radian); by default it is estimated from the data: a first fit
with 1 m/rad, then the weight is the ratio of the position and rotation
residual RMS and the model is refitted (variance components).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.linalg import block_diag

from workbench import lie
from workbench.calibration.samples import Log, Marker
from workbench.calibration.solver import Solution, Subspace, identifiable_subspace
from workbench.calibration.solver import levenberg_marquardt as lm
from workbench.chain import Chain
from workbench.dynamics.kinematics import frame_jacobian, point_jacobian
from workbench.errors import WorkbenchError
from workbench.eta import eta_between, identifiable_eta_basis
from workbench.lie import Array


@dataclass(frozen=True)
class KinematicModel:
    """A chain, the base frame seen from the device (4, 4), and marker placements (M, 4, 4)."""

    chain: Chain
    device: Array
    placements: Array


@dataclass(frozen=True)
class KinematicProblem:
    """Measured marker poses over a log and what is estimated (module docstring).

    ``markers`` hold positions (N, 3) and/or rotations (N, 3, 3) in the
    device frame (NaN rows: not seen in that sample); ``device_known``
    whether that frame is the robot's base frame; ``joints=False`` fits the
    device and marker frames only (the nominal kinematics' best case).
    """

    q: Array
    markers: tuple[Marker, ...]
    device_known: bool = True
    rotation_weight: float = 1.0
    joints: bool = True

    @classmethod
    def from_log(cls, log: Log, rotation_weight: float = 1.0) -> KinematicProblem:
        markers = log.measured_markers()
        if not any(m.position is not None for m in markers):
            raise WorkbenchError(
                f"{log.source}: kinematic calibration needs measured positions (px, py, pz "
                "or markers)"
            )
        return cls(log.q, markers, log.frame_known, rotation_weight)

    def __len__(self) -> int:
        return self.q.shape[0]

    def subset(self, rows: np.ndarray) -> KinematicProblem:
        return replace(self, q=self.q[rows], markers=tuple(m.subset(rows) for m in self.markers))

    @property
    def has_rotation(self) -> bool:
        return any(m.rotation is not None for m in self.markers)

    # ---------------------------------------------------------------- model
    def start(self, chain: Chain) -> KinematicModel:
        """The nominal model: identity device frame, marker frames from the chain."""
        placements = np.array([_placement(chain, m) for m in self.markers]).reshape(-1, 4, 4)
        return KinematicModel(chain, np.eye(4), placements)

    def _model(self, model: Chain | KinematicModel) -> KinematicModel:
        return self.start(model) if isinstance(model, Chain) else model

    @property
    def sizes(self) -> tuple[int, int]:
        """Lengths of the device and marker blocks, after the 6 n joint entries."""
        return 0 if self.device_known else 6, 6 * len(self.markers)

    def retract(self, model: KinematicModel, delta: Array) -> KinematicModel:
        """Apply a step: eta by ``with_eta`` (eq. 6), device and markers by left motions."""
        n = model.chain.n
        d, _ = self.sizes
        chain = model.chain.with_eta(np.concatenate([delta[: 6 * n], np.zeros(6)]))
        device = model.device
        if d:
            device = lie.exp_se3(delta[6 * n : 6 * n + 6]) @ device
        frames = lie.exp_se3(delta[6 * n + d :].reshape(-1, 6)) @ model.placements
        return KinematicModel(chain, device, frames)

    def prior(self, model: KinematicModel) -> tuple[Array, int]:
        """Candidate directions (device first when estimated) and how many lead."""
        n = model.chain.n
        d, m = self.sizes
        joints = identifiable_eta_basis(model.chain)[: 6 * n, :-6]
        if not self.joints:
            joints = np.zeros((6 * n, 0))
        P = block_diag(joints, np.eye(d), np.eye(m))
        k = joints.shape[1]
        order = np.r_[k : k + d, :k, k + d : P.shape[1]]  # device first (preferred)
        return P[:, order], d

    # ------------------------------------------------------------ residuals
    def residual(self, model: Chain | KinematicModel) -> Array:
        """Stacked residuals: per marker and seen sample, 3 position (m) then 3 rotation entries."""
        return self._evaluate(self._model(model), jacobian=False)[0]

    def evaluate(self, model: Chain | KinematicModel) -> tuple[Array, Array]:
        """Residuals and their Jacobian d r / d params at the current model."""
        return self._evaluate(self._model(model), jacobian=True)

    def predict(self, model: KinematicModel) -> list[tuple[Array, Array]]:
        """Per marker: predicted positions (N, 3) and rotations (N, 3, 3) in the device frame."""
        out = []
        for k, marker in enumerate(self.markers):
            link = _parent(model.chain, marker)
            T, _, _ = frame_jacobian(model.chain, self.q, link, model.placements[k])
            T = model.device @ T
            out.append((T[:, :3, 3], T[:, :3, :3]))
        return out

    def _evaluate(self, model: KinematicModel, jacobian: bool) -> tuple[Array, Array | None]:
        chain = model.chain
        n = chain.n
        d, m = self.sizes
        p = 6 * n + d + m
        AdX = lie.Ad(model.device)
        residuals, jacobians = [], []
        for k, marker in enumerate(self.markers):
            link = _parent(chain, marker)
            T, J_eta, J_frame = frame_jacobian(chain, self.q, link, model.placements[k])
            T = model.device @ T
            J = np.zeros((self.q.shape[0], 6, p))
            if jacobian:
                J[:, :, : 6 * n] = AdX @ J_eta
                if d:
                    J[:, :, 6 * n : 6 * n + 6] = np.eye(6)
                J[:, :, 6 * n + d + 6 * k : 6 * n + d + 6 * k + 6] = AdX @ J_frame
            blocks_r, blocks_J = [], []
            if marker.position is not None:
                blocks_r.append(T[:, :3, 3] - marker.position)
                blocks_J.append(point_jacobian(T, J))
            if marker.rotation is not None:
                rot = lie.log_so3(T[:, :3, :3] @ np.swapaxes(marker.rotation, 1, 2))
                blocks_r.append(self.rotation_weight * rot)
                blocks_J.append(
                    self.rotation_weight * lie.left_jacobian_inverse_so3(rot) @ J[:, :3]
                )
            r = np.concatenate(blocks_r, axis=1)
            seen = np.all(np.isfinite(r), axis=1)
            residuals.append(r[seen].ravel())
            if jacobian:
                jacobians.append(np.concatenate(blocks_J, axis=1)[seen].reshape(-1, p))
        r = np.concatenate(residuals)
        return r, (np.concatenate(jacobians) if jacobian else None)


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
    covariance: Array  # (p, p) of the parameter steps: joints, device, markers
    subspace: Subspace  # identifiable directions at the nominal
    solution: Solution
    rotation_weight: float


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
) -> KinematicFit:
    """Estimate eta, the device frame and marker frames by LM with the analytic Jacobian.

    The step is restricted to the identifiable subspace (module docstring),
    recomputed at every relinearised model (a nominal model with parallel or
    intersecting axes may see fewer directions than the perturbed one).
    ``loss``/``f_scale`` select a robust loss (IRLS).
    ``rotation_weight`` (m/rad): None estimates it when rotations are
    measured (module docstring); a number fixes it.
    """
    weight = 1.0 if rotation_weight is None else rotation_weight
    problem = replace(problem, rotation_weight=weight)
    fit = _solve(chain, problem, loss, f_scale, rtol, max_iterations, progress)
    if rotation_weight is None and problem.has_rotation and len(problem) > 1:
        estimated = _rotation_weight(problem, fit.model)
        if estimated is not None:
            problem = replace(problem, rotation_weight=estimated)
            fit = _solve(chain, problem, loss, f_scale, rtol, max_iterations, progress)
    return fit


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
    return KinematicModel(chain, model.device @ lie.inverse(G), G @ model.placements)


def _solve(chain, problem, loss, f_scale, rtol, max_iterations, progress) -> KinematicFit:
    start = problem.start(chain)
    _, J0 = problem.evaluate(start)
    prior, preferred = problem.prior(start)
    nominal_subspace = identifiable_subspace(J0, prior, rtol=rtol, preferred=preferred)

    def subspace(model: KinematicModel, J: Array) -> Array:
        prior, preferred = problem.prior(model)
        return identifiable_subspace(J, prior, rtol=rtol, preferred=preferred).basis

    solution = lm(
        start,
        problem.evaluate,
        problem.retract,
        subspace,
        loss=loss,
        f_scale=f_scale,
        max_iterations=max_iterations,
        progress=progress,
        label="kinematic calibration",
    )
    model = solution.model
    if not problem.device_known:
        model = _align_base(model, chain)
    model = replace(model, chain=model.chain.with_frames_near(chain))
    calibrated = model.chain
    tool = [k for k, m in enumerate(problem.markers) if m.frame in (None, chain.tool_name)]
    if tool:
        calibrated = replace(calibrated, tool_frame=model.placements[tool[0]])
    cov = solution.covariance
    n = chain.n
    d, _ = problem.sizes
    eta_cov = np.zeros((6 * (n + 1), 6 * (n + 1)))
    eta_cov[: 6 * n, : 6 * n] = cov[: 6 * n, : 6 * n]
    if tool:
        k = 6 * n + d + 6 * tool[0]
        eta_cov[6 * n :, 6 * n :] = cov[k : k + 6, k : k + 6]
    return KinematicFit(
        chain=calibrated,
        model=model,
        eta=eta_between(chain, calibrated),
        eta_std=np.sqrt(np.clip(np.diag(eta_cov), 0.0, None)),
        covariance=cov,
        subspace=nominal_subspace,
        solution=solution,
        rotation_weight=problem.rotation_weight,
    )
