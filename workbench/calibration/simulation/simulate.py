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

Torque logs may carry the further drive terms of
:mod:`workbench.identification.drives` in their truth (:class:`DriveTruth`, drawn by
:func:`drive_truth`; each 0 unless asked for):

* Stribeck friction ``fst_j exp(-(|dq_j| / vs_j)^delta) sign(dq_j)``;
* load-dependent friction ``fl_j |tau_rb_j| sign(dq_j)`` with ``tau_rb`` the
  rigid-body torque of the *true* model;
* temperature: the log has drive temperatures ``T_j(t)`` [deg C], a warm-up
  ramp of 20 K over the log with a 1 K ripple, and the friction changes by
  ``(fvT_j dq_j + fsT_j sign(dq_j)) (T_j - T0_j)``, ``T0_j`` the log's mean;
* a sensor delay ``d`` [s]: the torque logged at t is the true torque at
  ``t - d``, the trajectory evaluated exactly there.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from workbench import inertia, lie
from workbench.calibration.fitting.compliance import with_payload
from workbench.calibration.problems.kinds import kind as calibration_kind
from workbench.calibration.simulation.trajectories import exciting_trajectory
from workbench.chain import Chain
from workbench.dynamics.inverse_dynamics import inverse_dynamics
from workbench.dynamics.kinematics import forward_kinematics
from workbench.eta import identifiable_eta_basis
from workbench.identification.drives import STRIBECK_EXPONENT
from workbench.lie import Array
from workbench.recordings.log_files import Log


@dataclass(frozen=True)
class GroundTruth:
    """What produced a synthetic log."""

    chain: Chain
    eta: Array  # nominal.with_eta(eta) has the true twists and tool frame
    viscous: Array  # (n,)
    coulomb: Array  # (n,)
    drives: DriveTruth | None = None  # the further drive terms (torque logs)


@dataclass(frozen=True)
class DriveTruth:
    """The further drive terms of a synthetic torque log (module docstring), per joint (n,)
    in joint-side SI units; ``delay`` in s."""

    stribeck: Array  # fst, N m
    stribeck_speed: Array  # vs, rad/s
    load_friction: Array  # fl, N m per N m
    viscous_temperature: Array  # fvT, N m s/rad/K
    coulomb_temperature: Array  # fsT, N m/K
    delay: float = 0.0


def drive_truth(
    n: int,
    *,
    stribeck: float = 0.0,
    stribeck_speed: float = 0.3,
    load_friction: float = 0.0,
    temperature: float = 0.0,
    delay: float = 0.0,
    seed: int = 3,
) -> DriveTruth:
    """Random further drive terms: each joint's coefficient its scale times U(0.5, 1.5), the
    Stribeck speeds ``stribeck_speed`` times U(0.7, 1.4) rad/s."""
    rng = np.random.default_rng(seed)
    factor = rng.uniform(0.5, 1.5, size=(4, n))
    return DriveTruth(
        stribeck * factor[0],
        stribeck_speed * rng.uniform(0.7, 1.4, size=n),
        load_friction * factor[1],
        temperature * factor[2],
        temperature * factor[3],
        delay,
    )


def drive_temperature(t: Array, n: int, duration: float) -> Array:
    """Drive temperatures (N, n) [deg C] at times t: 25 + 20 t / duration + a 1 K ripple of
    period duration / 3 with a phase per joint (module docstring)."""
    phase = np.arange(n) * 2.0 * np.pi / max(n, 1)
    ramp = 25.0 + 20.0 * t[:, None] / duration
    return ramp + np.sin(6.0 * np.pi * t[:, None] / duration + phase)


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
    drives: DriveTruth | None = None,
) -> tuple[Log, GroundTruth]:
    """A log of ``samples`` samples of the perturbed truth along an exciting trajectory.

    ``kind`` chooses what is measured: tool poses (kinematic) or joint
    torques (twist, dynamic); q, dq and ddq are always logged exactly.
    ``drives``: further drive terms in the truth of a torque log (module
    docstring); a torque log always has drive temperatures.
    """
    spec = calibration_kind(kind)
    truth = replace(perturbed_truth(chain, kind, perturb, friction, seed=seed + 1), drives=drives)
    t, q, dq, ddq = exciting_trajectory(chain, samples, dt, seed=seed)
    rng = np.random.default_rng(seed + 2)
    position = quaternion = tau = temperature = None
    if "position" in spec.requires:
        T = forward_kinematics(truth.chain, q)
        position = T[:, :3, 3] + rng.normal(scale=noise, size=(samples, 3))
        if orientation:
            R = lie.exp_so3(rng.normal(scale=noise, size=(samples, 3))) @ T[:, :3, :3]
            quaternion = lie.matrix_to_quaternion(R)
    else:
        duration = max(t[-1], dt)
        temperature = drive_temperature(t, chain.n, duration)
        tau = _true_torques(truth, chain, samples, dt, seed, t, temperature, duration)
        tau += rng.normal(scale=noise, size=tau.shape)
    log = Log(
        t=t, q=q, dq=dq, ddq=ddq, tau=tau, position=position, orientation=quaternion,
        joint_names=chain.joint_names, source="<simulated>", temperature=temperature,
    )  # fmt: skip
    return log, truth


def _true_torques(
    truth: GroundTruth,
    chain: Chain,
    samples: int,
    dt: float,
    seed: int,
    t: Array,
    temperature: Array,
    duration: float,
) -> Array:
    """The torques logged at the times t: the truth's at ``t - delay`` (module docstring)."""
    d = truth.drives
    delay = 0.0 if d is None else d.delay
    _, q, dq, ddq = exciting_trajectory(chain, samples, dt, seed=seed, times=t - delay)
    rigid = inverse_dynamics(truth.chain, q, dq, ddq)
    sign = np.sign(dq)
    tau = rigid + truth.viscous * dq + truth.coulomb * sign
    if d is not None:
        deviation = drive_temperature(t - delay, chain.n, duration) - temperature.mean(axis=0)
        shape = np.exp(-((np.abs(dq) / d.stribeck_speed) ** STRIBECK_EXPONENT))
        tau += (d.stribeck * shape + d.load_friction * np.abs(rigid)) * sign
        tau += (d.viscous_temperature * dq + d.coulomb_temperature * sign) * deviation
    return tau


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
