"""Synthetic calibration logs from a perturbed ground truth (for trying calibration end to end).

The trajectory is a sum of sines per joint (a common exciting trajectory),
``q_i(t) = c_i + sum_k a_ik sin(2 pi f_k t + phase_ik)``, centred in the joint
range and scaled to stay within 80 % of it (ranges wider than 2 pi are
clipped to [-pi, pi]) and below 90 % of the joint's velocity limit; dq and
ddq are its exact derivatives.

The ground truth is the nominal chain moved by ``eta_true`` ([Kwon] eq. 6)
drawn in ``identifiable_eta_basis`` with standard deviation ``perturb`` (rad
and m) for the kinematic and twist kinds; for the dynamic kind the link
inertias are moved by a small rigid motion and scaled by ``1 + perturb``
noise instead (so they stay physically consistent). Optional viscous and
Coulomb friction (torque logs). Measurements get Gaussian noise of standard deviation
``noise`` (m for positions, N m for torques; orientations ``noise`` rad).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from workbench import inertia, lie
from workbench.calibration.kinds import kind as calibration_kind
from workbench.calibration.logs import Log
from workbench.calibration.trajectories import exciting_trajectory
from workbench.chain import Chain
from workbench.dynamics.inverse_dynamics import inverse_dynamics
from workbench.dynamics.kinematics import forward_kinematics
from workbench.eta import identifiable_eta_basis
from workbench.lie import Array


@dataclass(frozen=True)
class GroundTruth:
    """What produced a synthetic log."""

    chain: Chain
    eta: Array  # nominal.with_eta(eta) has the true twists and tool frame
    viscous: Array  # (n,)
    coulomb: Array  # (n,)


def perturbed_truth(
    chain: Chain, kind: str, perturb: float, friction: float = 0.0, seed: int = 1
) -> GroundTruth:
    """A ground-truth model near ``chain``: eta (kinematic, twist) or inertias (dynamic)."""
    rng = np.random.default_rng(seed)
    eta = np.zeros(6 * (chain.n + 1))
    truth = chain
    if kind == "dynamic":
        moved = lie.exp_se3(rng.normal(scale=perturb, size=(chain.n, 6)))
        scale = 1.0 + perturb * rng.uniform(-1.0, 1.0, size=(chain.n, 1))
        phi = scale * inertia.moved_phi(chain.phi, moved)
        truth = replace(chain, inertias=inertia.matrix_from_phi(phi))
    else:
        basis = identifiable_eta_basis(chain)
        eta = basis @ rng.normal(scale=perturb, size=basis.shape[1])
        truth = chain.with_eta(eta)
    viscous = friction * rng.uniform(0.5, 1.5, size=chain.n)
    coulomb = friction * rng.uniform(0.5, 1.5, size=chain.n)
    return GroundTruth(truth, eta, viscous, coulomb)


def simulate_log(
    chain: Chain,
    *,
    kind: str = "kinematic",
    samples: int = 2000,
    perturb: float = 1e-2,
    noise: float = 0.0,
    friction: float = 0.0,
    orientation: bool = False,
    dt: float = 0.01,
    seed: int = 0,
) -> tuple[Log, GroundTruth]:
    """A log of ``samples`` samples of the perturbed truth along an exciting trajectory.

    ``kind`` chooses what is measured: tool poses (kinematic) or joint
    torques (twist, dynamic); q, dq and ddq are always logged exactly.
    """
    spec = calibration_kind(kind)
    truth = perturbed_truth(chain, kind, perturb, friction, seed=seed + 1)
    t, q, dq, ddq = exciting_trajectory(chain, samples, dt, seed=seed)
    rng = np.random.default_rng(seed + 2)
    position = quaternion = tau = None
    if "position" in spec.requires:
        T = forward_kinematics(truth.chain, q)
        position = T[:, :3, 3] + rng.normal(scale=noise, size=(samples, 3))
        if orientation:
            R = lie.exp_so3(rng.normal(scale=noise, size=(samples, 3))) @ T[:, :3, :3]
            quaternion = lie.matrix_to_quaternion(R)
    else:
        tau = inverse_dynamics(truth.chain, q, dq, ddq)
        tau += truth.viscous * dq + truth.coulomb * np.sign(dq)
        tau += rng.normal(scale=noise, size=tau.shape)
    log = Log(
        t=t, q=q, dq=dq, ddq=ddq, tau=tau, position=position, orientation=quaternion,
        joint_names=chain.joint_names, source="<simulated>",
    )  # fmt: skip
    return log, truth


def with_payload(chain: Chain, link: int, phi: Array) -> Chain:
    """``chain`` with a body phi (in link ``link``'s joint frame, project order) fixed to it."""
    inertias = chain.inertias.copy()
    inertias[link] += inertia.matrix_from_phi(inertia.moved_phi(phi, chain.joint_frames[link]))
    return replace(chain, inertias=inertias)


def quantized(q: Array, resolution: float, rng: np.random.Generator) -> Array:
    """Encoder readings of q (N, n): steps of ``resolution`` (rad) from a random zero per joint.

    The encoder's zero sits anywhere within one step of the joint's zero
    (uniform), so that repeated logs of one trajectory have independent
    quantisation errors.
    """
    zero = rng.uniform(0.0, resolution, size=q.shape[1])
    return resolution * np.round((q + zero) / resolution) - zero


def torque_noise(tau: Array, fraction: float, floor: float, rng: np.random.Generator) -> Array:
    """Gaussian torque noise (N, n): std ``fraction`` of each joint's torque RMS plus ``floor``."""
    sigma = fraction * np.sqrt(np.mean(tau**2, axis=0)) + floor
    return rng.normal(size=tau.shape) * sigma


def payload_log(
    chain: Chain,
    link: int,
    phi: Array,
    t: Array,
    q: Array,
    dq: Array,
    ddq: Array,
    rng: np.random.Generator,
    *,
    resolution: float = 2 * np.pi / 2**19,
    fraction: float = 0.005,
    floor: float = 0.05,
) -> Log:
    """A log of ``chain`` carrying phi on ``link`` along (q, dq, ddq) (N, n) at times t.

    Logged as a robot logs: joint positions from encoders of ``resolution``
    rad (:func:`quantized`) and torques with Gaussian noise (:func:`torque_noise`,
    ``fraction`` of each joint's torque RMS plus ``floor`` N m); no dq or ddq
    (a reader differentiates q).
    """
    tau = inverse_dynamics(with_payload(chain, link, phi), q, dq, ddq)
    tau = tau + torque_noise(tau, fraction, floor, rng)
    q_logged = quantized(q, resolution, rng)
    return Log(t=t, q=q_logged, tau=tau, joint_names=chain.joint_names, source="<simulated>")
