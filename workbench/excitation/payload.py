"""A short exciting motion for payload identification: chosen joints move, the others hold still.

The experiment measures every joint's torque while only the ``moving``
joints follow a periodic Fourier trajectory (:mod:`workbench.excitation.trajectory`,
at rest and at the hold posture at its start and end) and the other joints
hold the ``posture``. The information of the payload's ten parameters phi
(link frame, :mod:`workbench.calibration.fitting.payload`) is

    F = sum_k X_k^T X_k,   X_k = Sigma^{-1/2} Y_link(q_k, dq_k, 0 on held joints),

with the rows of *all* joints (a held joint's torque measures the payload's
wrench too). :class:`PayloadInformation` gives the design of
:func:`~workbench.excitation.design.design_trajectory` these rows and their
exact state derivatives over the moving joints only
(:class:`~workbench.excitation.information.TorqueColumns` of the full robot,
contracted, then restricted to the moving joints), with the chain of the
moving joints (the others locked at the posture,
:func:`workbench.models.pinocchio_conversion.reduced_model`) for their limits and
torques. The design maximises ``log det F`` (D-optimality) within position,
velocity, acceleration and torque limits of the moving joints (rigid-body
torques of the nominal model, no drive terms); the held joints' torques (they
carry the moving arm) are checked against their limits on the design's fine
grid afterwards.

Not every choice can succeed: turning one joint shows only ``m``, ``h`` and
``I a`` of the payload (7 numbers for the axis a), and with the iiwa's arm
straight up the wrist's motion never separates the mass from ``h``. The
structural rank of F at random states (:func:`information_rank`, counted as
the identification counts it) must be 10, else the design is refused naming
the rank. :func:`hold_posture` picks a default posture: the D-optimal one
among random candidates that the robot holds within its torque limits with no
link below its first joint.

The same length and limits give a random trajectory
(:func:`~workbench.excitation.design.random_parameters`, the design's
initial guess), reported beside the design with its predicted precision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from workbench.calibration.fitting.payload import (
    PHI_NAMES,
    RANK_RTOL,
    ZERO_COLUMN,
    com_std,
    frame_on_link,
    payload_regressor,
)
from workbench.chain import Chain
from workbench.config import check_memory
from workbench.dynamics.inverse_dynamics import inverse_dynamics
from workbench.dynamics.kinematics import forward_kinematics, link_motion
from workbench.errors import WorkbenchError
from workbench.excitation.design import (
    Design,
    DesignOptions,
    Limits,
    TorqueFunction,
    design_trajectory,
    random_parameters,
)
from workbench.excitation.information import Information, TorqueColumns, log_det, random_states
from workbench.excitation.problem import SAMPLE_BYTES
from workbench.excitation.trajectory import FourierSpace
from workbench.identification.drives import Drives
from workbench.identification.torque_model import FROM_STANDARD, TorqueModel
from workbench.lie import Array
from workbench.models.pinocchio_conversion import from_pinocchio, reduced_model, to_pinocchio


@dataclass(frozen=True, eq=False)
class HeldJoints:
    """``robot`` with only the ``moving`` joints (indices) moving, the others at ``posture``."""

    robot: Chain
    moving: np.ndarray  # (k,) joint indices
    posture: Array  # (n,)
    chain: Chain = field(init=False)  # the moving joints, the others locked at the posture

    def __post_init__(self) -> None:
        names = [self.robot.joint_names[j] for j in self.moving]
        locked = {
            name: float(self.posture[j])
            for j, name in enumerate(self.robot.joint_names)
            if j not in set(self.moving.tolist())
        }
        model, _ = reduced_model(to_pinocchio(self.robot), names, locked, source=self.robot.name)
        object.__setattr__(self, "chain", from_pinocchio(model, physical=False))

    def full(self, q: Array, dq: Array, ddq: Array) -> tuple[Array, Array, Array]:
        """States (K, n) of the robot from the moving joints' states (K, k)."""
        K = q.shape[0]
        out = [
            np.tile(self.posture, (K, 1)),
            np.zeros((K, self.robot.n)),
            np.zeros((K, self.robot.n)),
        ]
        for full, part in zip(out, (q, dq, ddq), strict=True):
            full[:, self.moving] = part
        return out[0], out[1], out[2]


@dataclass(frozen=True, eq=False)
class PayloadInformation(Information):
    """Rows of the payload's phi (project order) over the moving joints' states (module doc)."""

    held: HeldJoints
    link: int
    sigma: Array  # (n,) torque noise of every joint (N m)

    def __post_init__(self) -> None:
        model = TorqueModel(self.held.robot, Drives(self.held.robot.n, ()))
        select = 10 * self.link + FROM_STANDARD  # standard columns in phi order
        object.__setattr__(self, "_columns", TorqueColumns(model, select))

    @property
    def chain(self) -> Chain:
        return self.held.chain

    @property
    def names(self) -> tuple[str, ...]:
        return PHI_NAMES

    @property
    def nominal(self) -> Array:
        return np.zeros(10)

    def rows(self, q: Array, dq: Array, ddq: Array) -> Array:
        full = self.held.full(q, dq, ddq)
        return payload_regressor(self.held.robot, self.link, *full) / self.sigma[None, :, None]

    def contract(self, q: Array, dq: Array, ddq: Array, G: Array) -> Array:
        full = self.held.full(q, dq, ddq)
        out = self._columns.contract(*full, G / self.sigma[None, :, None])
        return out[:, :, self.held.moving]


@dataclass(frozen=True)
class Precision:
    """Predicted precision of an experiment: covariance of phi (10, 10) for the stated noise."""

    covariance: Array
    log_det: float  # of the information F over the samples
    samples: int

    @property
    def std(self) -> Array:
        return np.sqrt(np.clip(np.diag(self.covariance), 0.0, None))

    def com_std(self, phi: Array) -> Array:
        """Std (10,) of mass, COM and inertia about the COM for a payload ``phi`` (delta method)."""
        return com_std(phi, self.covariance)


@dataclass(frozen=True)
class PayloadExcitation:
    """The designed motion (all joints, sampled), its design, and a random motion beside it."""

    held: HeldJoints
    link: str
    sigma: Array  # (n,)
    limits: Limits  # of the moving joints
    design: Design
    t: Array  # (K,)
    q: Array  # (K, n)
    dq: Array
    ddq: Array
    tau: Array  # (K, n) nominal torques
    held_torque_ratio: Array  # (n,) max |tau| / limit of every joint on the fine grid
    prediction: Precision
    random: Precision
    random_states: tuple[Array, Array, Array]  # q, dq, ddq (K, n) of the random motion


def precision(information: PayloadInformation, q: Array, dq: Array, ddq: Array) -> Precision:
    """Covariance ``F^{-1}`` of phi over the samples (K, k) of the moving joints."""
    X = information.rows(q, dq, ddq).reshape(-1, 10)
    F = X.T @ X
    try:
        covariance = np.linalg.inv(F)
    except np.linalg.LinAlgError:
        covariance = np.full((10, 10), np.inf)
    return Precision(covariance, log_det(F), q.shape[0])


def design_payload_excitation(
    robot: Chain,
    link: str,
    moving: Sequence[str],
    posture: Array,
    limits: Limits,
    sigma: Array,
    *,
    duration: float = 10.0,
    harmonics: int = 5,
    sample_rate: float = 100.0,
    options: DesignOptions | None = None,
) -> PayloadExcitation:
    """The D-optimal motion of the ``moving`` joints for the payload on ``link`` (module doc).

    ``link`` is a moving link or a frame fixed to one; phi and its predicted
    covariance are in the link's joint frame (the optimum does not depend on
    the frame: moving phi to another frame scales det F by a constant).
    ``posture`` (n,) is the hold posture (and the start and end of the
    moving joints), ``limits`` and ``sigma`` (n,) are the robot's; one
    period of ``duration`` s is sampled at ``sample_rate`` Hz.
    """
    options = options or DesignOptions()
    samples = duration * sample_rate
    check_memory(
        f"duration * sample_rate = {duration:g} s * {sample_rate:g} Hz",
        samples * SAMPLE_BYTES * robot.n,
        f"{samples:.3g} written samples, {SAMPLE_BYTES * robot.n / 2**10:.0f} KiB each",
    )
    k = frame_on_link(robot, link)[0]
    moving_index = joint_indices(robot, moving)
    posture = np.asarray(posture, dtype=float)
    if posture.shape != (robot.n,) or not np.all(np.isfinite(posture)):
        raise WorkbenchError(f"the hold posture must be {robot.n} finite joint values")
    limits.validate(robot.joint_names)
    outside = (posture < limits.lower) | (posture > limits.upper)
    if np.any(outside):
        j = int(np.argmax(outside))
        raise WorkbenchError(
            f"hold posture of joint '{robot.joint_names[j]}' {posture[j]:.4g} rad is outside "
            f"[{limits.lower[j]:.4g}, {limits.upper[j]:.4g}]"
        )
    if not np.any(robot.ancestors[moving_index, k]):
        raise WorkbenchError(
            f"none of the moving joints {', '.join(moving)} moves link {link!r}: its "
            "orientation never changes and its inertia cannot be told apart"
        )
    rank = information_rank(robot, k, moving_index, posture[None])[0]
    if rank < 10:
        raise WorkbenchError(
            f"moving joints {', '.join(moving)} from the hold posture determine only {rank} of "
            f"the 10 parameters of the payload on {link!r}, whatever the motion: move more "
            "joints, or hold the others where gravity acts on the link's origin through them "
            "(another posture)"
        )
    held = HeldJoints(robot, moving_index, posture)
    information = PayloadInformation(held, k, np.asarray(sigma, dtype=float))
    m = moving_index
    sub = Limits(
        limits.lower[m], limits.upper[m], limits.velocity[m], limits.acceleration[m],
        limits.torque[m],
    )  # fmt: skip
    space = FourierSpace(m.size, duration, harmonics, True, posture[m])
    torques = TorqueFunction(held.chain)
    design = design_trajectory(information, space, sub, torques, options)
    fine = design.collocation * options.fine
    t_fine = space.collocation_times(fine)
    tau_fine = inverse_dynamics(robot, *held.full(*design.trajectory.evaluate(t_fine)))
    ratio = np.max(np.abs(tau_fine), axis=0) / limits.torque
    if np.any(ratio > 1.0):
        j = int(np.argmax(ratio))
        raise WorkbenchError(
            f"joint '{robot.joint_names[j]}' needs {ratio[j]:.3g} times its torque limit to hold "
            "the posture during the motion: choose another posture or lower the accelerations"
        )
    t, q, dq, ddq = design.trajectory.sampled(sample_rate)
    theta0 = random_parameters(
        space, sub, torques, np.random.default_rng(options.seed), options.collocation
    )
    _, qr, dqr, ddqr = space.trajectory(theta0).sampled(sample_rate)
    full = held.full(q, dq, ddq)
    return PayloadExcitation(
        held=held, link=link, sigma=information.sigma, limits=sub, design=design, t=t,
        q=full[0], dq=full[1], ddq=full[2], tau=inverse_dynamics(robot, *full),
        held_torque_ratio=ratio,
        prediction=precision(information, q, dq, ddq),
        random=precision(information, qr, dqr, ddqr), random_states=held.full(qr, dqr, ddqr),
    )  # fmt: skip


def _random_moving_states(
    robot: Chain, moving: np.ndarray, samples: int, seed: int
) -> tuple[Array, Array, Array]:
    """Random states of the moving joints (the others zero): q uniform in the limits (within
    +-pi), dq and ddq standard normal (:func:`~workbench.excitation.information.random_states`)."""
    q, dq, ddq = random_states(robot, samples, seed)
    still = np.setdiff1d(np.arange(robot.n), moving)
    for x in (q, dq, ddq):
        x[:, still] = 0.0
    return q, dq, ddq


def _rows(
    robot: Chain, link: int, moving: np.ndarray, postures: Array, sigma: Array | None = None
) -> Array:
    """Rows (C, S n, 10) of random motions of the moving joints from each posture (C, n)."""
    q, dq, ddq = _random_moving_states(robot, moving, 100, seed=0)
    C, S = postures.shape[0], q.shape[0]
    still = np.setdiff1d(np.arange(robot.n), moving)
    Q = np.repeat(q[None], C, axis=0)
    Q[:, :, still] = postures[:, None, still]
    Y = payload_regressor(robot, link, Q.reshape(C * S, -1), np.tile(dq, (C, 1)),
                          np.tile(ddq, (C, 1)))  # fmt: skip
    if sigma is not None:
        Y = Y / sigma[None, :, None]
    return Y.reshape(C, S * robot.n, 10)


def information_rank(robot: Chain, link: int, moving: np.ndarray, postures: Array) -> np.ndarray:
    """Structural rank (C,) of the payload's parameters for motions of the ``moving`` joints
    with the others held at each of ``postures`` (C, n) at random states, as
    :func:`workbench.calibration.fitting.payload.fit_payload` counts it (``ZERO_COLUMN``,
    ``RANK_RTOL``)."""
    return _rank(_rows(robot, link, moving, postures))


def _rank(Y: Array) -> np.ndarray:
    """Numerical rank (C,) of rows Y (C, m, 10) (module constants of the identification)."""
    norm = np.linalg.norm(Y, axis=1, keepdims=True)  # (C, 1, 10)
    scale = np.where(norm > ZERO_COLUMN * norm.max(axis=2, keepdims=True), norm, np.inf)
    values = np.linalg.svd(Y / scale, compute_uv=False)
    return np.sum(values > RANK_RTOL * values[:, :1], axis=1)


def hold_posture(
    robot: Chain,
    link: str,
    moving: Sequence[str],
    limits: Limits,
    sigma: Array,
    candidates: int = 200,
    seed: int = 0,
) -> Array:
    """A hold posture (n,) for the payload's experiment, D-optimal among candidates.

    Candidates: zero (or the middle of a range without zero) and ``candidates``
    random postures of the held joints on the path from the base to the link
    uniform within ``limits``; the moving joints and the joints off that path
    (a humanoid's legs, head, other arm) stay at zero (or the middle). Kept:
    the candidate whose random motions of the moving joints give the largest log det
    of the payload's information (noise ``sigma``), among those the robot holds at rest within its
    torque limits and where no link frame and not the tool frame is lower (against
    gravity) than the lowest link frame or the tool frame at q = 0: nothing hangs below
    the robot's first joint, as a table-mounted arm needs (no other collision is checked;
    a tool frame on a mobile base, below its wheels' axes, lowers the floor to itself).
    """
    k = frame_on_link(robot, link)[0]
    index = joint_indices(robot, moving)
    middle = np.where((limits.lower <= 0.0) & (limits.upper >= 0.0), 0.0, limits.centre)
    rng = np.random.default_rng(seed)
    postures = np.tile(middle, (candidates + 1, 1))
    still = np.setdiff1d(np.flatnonzero(robot.ancestors[:, k]), index)  # held, on the path
    postures[1:, still] = rng.uniform(limits.lower[still], limits.upper[still],
                                      size=(candidates, still.size))  # fmt: skip
    zero = np.zeros_like(postures)
    holding = np.abs(inverse_dynamics(robot, postures, zero, zero)) <= limits.torque
    up = -robot.gravity / np.linalg.norm(robot.gravity)
    rest = forward_kinematics(robot, np.zeros((1, robot.n)))[0, :3, 3] @ up  # the tool at q = 0
    floor = min(float(np.min(robot.joint_frames[:, :3, 3] @ up)), float(rest))
    frames = link_motion(robot, postures, zero, zero)[0] @ robot.joint_frames
    heights = np.concatenate(
        [frames[:, :, :3, 3] @ up, forward_kinematics(robot, postures)[:, None, :3, 3] @ up],
        axis=1,
    )
    holding &= (heights >= floor - 1e-9).all(axis=1)[:, None]
    Y = _rows(robot, k, index, postures, np.asarray(sigma, dtype=float))
    sign, value = np.linalg.slogdet(np.swapaxes(Y, 1, 2) @ Y)
    value = np.where((_rank(Y) == 10) & (sign > 0) & holding.all(axis=1), value, -np.inf)
    if not np.isfinite(value.max()):
        raise WorkbenchError(
            f"no hold posture lets moving joints {', '.join(moving)} determine the 10 "
            f"parameters of the payload on {link!r}: move more joints"
        )
    return postures[int(np.argmax(value))]


def joint_indices(robot: Chain, names: Sequence[str]) -> np.ndarray:
    """Sorted indices of joints given by name or by number (1-based, "5" or "j5")."""
    index = {name: j for j, name in enumerate(robot.joint_names)}
    index |= {f"{prefix}{j + 1}": j for j in range(robot.n) for prefix in ("", "j")}
    unknown = [name for name in names if name not in index]
    if unknown or not names:
        raise WorkbenchError(
            f"moving joints {', '.join(map(repr, unknown)) or '(none)'}: name joints of model "
            f"'{robot.name}' ({', '.join(robot.joint_names)}) or number them from 1"
        )
    chosen = [index[name] for name in names]
    if len(set(chosen)) != len(chosen):
        raise WorkbenchError(f"moving joints {', '.join(names)} name a joint twice")
    return np.array(sorted(chosen), dtype=np.int64)
