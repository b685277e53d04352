"""POE kinematic calibration of joint twists and the tool frame (seed 000 §2, footnote 1).

Forward kinematics of the tool in the zero-reference normal form (all joint
frames at the base at q = 0, twists in the base frame):

    T_tool(q, eta) = prod_{j on the path} exp([A_j(eta)] q_j) exp([eta_tool]) M_tool,
    A_j(eta) = Ad_{exp(eta_j)} A_j                                      (eq. 6)

Derivative at eta = 0 (relinearised at every iteration). With ``E_j =
exp([A_j] q_j)`` and the partial products ``P_a = E_1 ... E_a`` (P_0 = I)
along the path, perturbing eta_j conjugates ``E_j <- exp(d eta_j) E_j
exp(-d eta_j)``, so the tool moves by the spatial (base-frame) twist

    d xi = (Ad_{P_{a-1}} - Ad_{P_a}) d eta_j      (joint j at path position a),
    d xi = Ad_{P_k} d eta_tool                     (tool frame, k joints on the path),

which is eq. 8 (``dA_j = -ad_{A_j} d eta_j``) integrated along the chain.
A point p of the tool moves by ``dp = [-[p], I] d xi``; the orientation
residual ``r = log(R R_meas^T)`` by ``J_l^{-1}(r) d omega``.

Position-only data see fewer directions than ``identifiable_eta_basis``
(e.g. no tool rotation): the identifiable subspace comes from the SVD of the
stacked Jacobian at the nominal model (:func:`identifiable_subspace`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from workbench import lie
from workbench.arrays import as_samples
from workbench.calibration.eta import eta_between
from workbench.calibration.logs import Log
from workbench.calibration.solver import Solution, Subspace, identifiable_subspace
from workbench.calibration.solver import levenberg_marquardt as lm
from workbench.chain import Chain
from workbench.differential_dynamics import identifiable_eta_basis
from workbench.errors import WorkbenchError
from workbench.lie import Array


def tool_path(chain: Chain) -> np.ndarray:
    """Indices of the joints from the base to the tool's link, in order."""
    if chain.tool_parent < 0:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(chain.ancestors[:, chain.tool_parent])


def _partial_products(chain: Chain, q: Array) -> tuple[Array, np.ndarray]:
    """P (N, k+1, 4, 4): ``P_a = E_1 ... E_a`` along the tool path; and the path."""
    path = tool_path(chain)
    E = lie.exp_se3(chain.twists[path][None] * q[:, path, None])  # (N, k, 4, 4)
    P = np.empty((q.shape[0], path.size + 1, 4, 4))
    P[:, 0] = np.eye(4)
    for a in range(path.size):
        P[:, a + 1] = P[:, a] @ E[:, a]
    return P, path


def forward_kinematics(chain: Chain, q: ArrayLike) -> Array:
    """Tool poses (N, 4, 4) in the base frame, or (4, 4) for one q."""
    qs, batched = as_samples(q, chain.n, "q", chain.joint_names)
    P, _ = _partial_products(chain, qs)
    T = P[:, -1] @ chain.tool_frame
    return T if batched else T[0]


def tool_jacobian(chain: Chain, q: ArrayLike) -> tuple[Array, Array]:
    """Tool poses T (N, 4, 4) and the spatial twist Jacobian d xi / d eta (N, 6, 6(n+1)).

    At eta = 0 of ``chain`` (module docstring); joints off the tool path give zeros.
    """
    qs, _ = as_samples(q, chain.n, "q", chain.joint_names)
    P, path = _partial_products(chain, qs)
    T = P[:, -1] @ chain.tool_frame
    AdP = lie.Ad(P)  # (N, k+1, 6, 6)
    J = np.zeros((qs.shape[0], 6, chain.n + 1, 6))
    J[:, :, path, :] = np.swapaxes(AdP[:, :-1] - AdP[:, 1:], 1, 2)
    J[:, :, chain.n, :] = AdP[:, -1]
    return T, J.reshape(qs.shape[0], 6, 6 * (chain.n + 1))


def point_jacobian(T: Array, J_twist: Array) -> Array:
    """d p / d eta (N, 3, p) of the tool origin p from the spatial twist Jacobian: [-[p], I] J."""
    G = np.concatenate([-lie.hat3(T[:, :3, 3]), np.broadcast_to(np.eye(3), T[:, :3, :3].shape)], 2)
    return np.einsum("nij,njk->nik", G, J_twist)


@dataclass(frozen=True)
class KinematicProblem:
    """Residuals ``model - measured`` of tool positions (and orientations) over a log."""

    q: Array
    position: Array
    orientation: Array | None = None  # (N, 3, 3) measured rotations
    rotation_weight: float = 1.0  # metres per radian

    @classmethod
    def from_log(cls, log: Log, rotation_weight: float = 1.0) -> KinematicProblem:
        if log.position is None:
            raise WorkbenchError(f"{log.source}: kinematic calibration needs px, py, pz")
        R = None if log.orientation is None else quaternion_to_matrix(log.orientation)
        return cls(log.q, log.position, R, rotation_weight)

    def residual(self, chain: Chain) -> Array:
        """Stacked residuals: per sample 3 position (m) then 3 rotation (weighted) entries."""
        return self._evaluate(chain, jacobian=False)[0]

    def evaluate(self, chain: Chain) -> tuple[Array, Array]:
        """Residuals and their analytic Jacobian d r / d eta at eta = 0 (N * k, 6(n+1))."""
        return self._evaluate(chain, jacobian=True)

    def _evaluate(self, chain: Chain, jacobian: bool) -> tuple[Array, Array | None]:
        if jacobian:
            T, Jx = tool_jacobian(chain, self.q)
        else:
            T, Jx = forward_kinematics(chain, self.q).reshape(-1, 4, 4), None
        r = [T[:, :3, 3] - self.position]
        J = [point_jacobian(T, Jx)] if jacobian else []
        if self.orientation is not None:
            rot = lie.log_so3(T[:, :3, :3] @ np.swapaxes(self.orientation, 1, 2))
            r.append(self.rotation_weight * rot)
            if jacobian:
                Jl_inv = lie.left_jacobian_inverse_so3(rot)
                J.append(self.rotation_weight * Jl_inv @ Jx[:, :3])
        r = np.concatenate(r, axis=1).ravel()
        if not jacobian:
            return r, None
        return r, np.concatenate(J, axis=1).reshape(r.shape[0], -1)


def quaternion_to_matrix(quat: Array) -> Array:
    """Rotation matrices (N, 3, 3) of unit quaternions (qx, qy, qz, qw)."""
    x, y, z, w = np.moveaxis(np.asarray(quat, dtype=float), -1, 0)
    return np.stack(
        [
            np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)], -1),
            np.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)], -1),
            np.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], -1),
        ],
        -2,
    )


def matrix_to_quaternion(R: Array) -> Array:
    """Unit quaternions (N, 4) as (qx, qy, qz, qw), qw >= 0, of rotation matrices (N, 3, 3)."""
    w = lie.log_so3(R)
    angle = np.linalg.norm(w, axis=-1, keepdims=True)
    axis = np.divide(w, angle, out=np.zeros_like(w), where=angle > 0)
    return np.concatenate([axis * np.sin(angle / 2), np.cos(angle / 2)], axis=-1)


@dataclass(frozen=True)
class KinematicFit:
    """A kinematic calibration: the calibrated chain, eta from the nominal, statistics."""

    chain: Chain
    eta: Array  # (6(n+1),) nominal.with_eta(eta) == chain
    eta_std: Array  # (6(n+1),) first-order standard deviations (0 outside the subspace)
    covariance: Array  # (6(n+1), 6(n+1))
    subspace: Subspace  # identifiable directions at the nominal
    solution: Solution


def calibrate_kinematic(
    chain: Chain,
    problem: KinematicProblem,
    *,
    loss: str = "linear",
    f_scale: float = 1e-3,
    rtol: float = 1e-8,
    max_iterations: int = 50,
    progress: bool = False,
) -> KinematicFit:
    """Estimate eta (joints and tool) by LM with the analytic Jacobian (module docstring).

    The step is restricted to the identifiable subspace found at the nominal
    (``identifiable_eta_basis`` refined by the SVD of the data Jacobian,
    relative tolerance ``rtol``) and recomputed with the same dimension at
    every relinearised model. ``loss``/``f_scale`` select a robust loss (IRLS).
    """
    _, J0 = problem.evaluate(chain)
    nominal_subspace = identifiable_subspace(J0, identifiable_eta_basis(chain), rtol=rtol)

    def subspace(model: Chain, J: Array) -> Array:
        return identifiable_subspace(J, identifiable_eta_basis(model), rtol=rtol).basis

    solution = lm(
        chain,
        problem.evaluate,
        lambda model, delta: model.with_eta(delta),
        subspace,
        loss=loss,
        f_scale=f_scale,
        max_iterations=max_iterations,
        progress=progress,
        label="kinematic calibration",
    )
    cov = solution.covariance
    return KinematicFit(
        chain=solution.model,
        eta=eta_between(chain, solution.model),
        eta_std=np.sqrt(np.clip(np.diag(cov), 0.0, None)),
        covariance=cov,
        subspace=nominal_subspace,
        solution=solution,
    )
