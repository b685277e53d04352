"""Joint compliance under gravity: how far each joint deflects, and its derivatives.

Model (as in the elastic-joint calibration of [Tenhumberg]'s Agile Justin
study): joint i is a torsional (linear, for a prismatic joint) spring of
compliance ``c_i = 1 / k_i`` >= 0 between its motor, whose position the log
holds, and its link. At rest the spring carries the gravity torque of the
links it holds up, ``k (q - q_link) = tau_g(q_link)`` (the torque that holds
them, which the spring transmits), so the link sags to

    q_link = q - diag(c) tau_g(q),        tau_g(q) = ID(q, 0, 0)

with ``tau_g`` the model's gravity torques (inverse dynamics at zero
velocity and acceleration, gravity ``chain.gravity``; a payload the log
declares, ``[model.payload]``, is carried by its link). The torques are
taken at the motor positions: the exact equilibrium differs by ``c dtau_g/dq
c tau_g``, second order in the compliance (below 1e-6 rad for deflections
of 1e-3 rad).

Parameters are the compliances (linear in the deflection, c = 0 rigid):
``d q_link / d c_i = -tau_g,i e_i``, and the joint twists move the torques,
``d q_link / d eta = -diag(c) d tau_g / d eta``, with the twist derivatives of
:func:`workbench.dynamics.derivatives.twist_derivatives` ([Kwon]
Algorithm 1) at ``dq = ddq = 0``. :func:`joint_directions` puts both into
the per-sample matrix the kinematic kernels take
(:func:`workbench.calibration.kinematic_kernels.marker_rows`, ``qdir``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from workbench import inertia
from workbench.chain import REVOLUTE, Chain
from workbench.dynamics.derivatives import twist_derivatives
from workbench.dynamics.inverse_dynamics import inverse_dynamics
from workbench.lie import Array


def with_payload(chain: Chain, link: int, phi: Array) -> Chain:
    """``chain`` with a body phi (in link ``link``'s joint frame, project order) fixed to it."""
    inertias = chain.inertias.copy()
    inertias[link] += inertia.matrix_from_phi(inertia.moved_phi(phi, chain.joint_frames[link]))
    return replace(chain, inertias=inertias)


def loaded(chain: Chain, payload: tuple[int, Array] | None) -> Chain:
    """``chain`` carrying ``payload`` (link, phi in the link's joint frame), or itself."""
    return chain if payload is None else with_payload(chain, *payload)


@dataclass(frozen=True)
class Deflection:
    """Gravity torques at the motor positions and the link positions they deflect to.

    Rows whose motor positions are not finite stay NaN.
    """

    q: Array  # (N, n) link positions q - c tau_g
    tau: Array  # (N, n) gravity torques (N m revolute, N prismatic)
    dtau_deta: Array | None  # (N, n, 6 n) their twist derivatives, when asked for


def deflection(chain: Chain, q: Array, c: Array, derivatives: bool = False) -> Deflection:
    """The link positions of ``chain`` (payload included, :func:`loaded`) with compliances
    ``c`` (n,) at motor positions ``q`` (N, n), and (``derivatives``) d tau_g / d eta."""
    n = chain.n
    finite = np.all(np.isfinite(q), axis=1)
    tau = np.full(q.shape, np.nan)
    zero = np.zeros((int(finite.sum()), n))
    dtau_deta = None
    if derivatives:
        dtau_deta = np.full((*q.shape, 6 * n), np.nan)
        if finite.any():
            d = twist_derivatives(chain, q[finite], zero, zero)
            tau[finite], dtau_deta[finite] = d.tau, d.dtau_deta[:, :, : 6 * n]
    elif finite.any():
        tau[finite] = inverse_dynamics(chain, q[finite], zero, zero).reshape(-1, n)
    return Deflection(q - c * tau, tau, dtau_deta)


LOADED = 0.02  # a joint carries gravity when its largest torque is this fraction of the largest
VARIED = 0.05  # ... and its torque varies over the log by this fraction of its largest


def loaded_joints(chain: Chain, q: Array) -> np.ndarray:
    """Which joints carry gravity in the log (n,): their largest gravity torque over the
    samples is at least :data:`LOADED` of the largest joint's, and it varies between the
    samples by at least :data:`VARIED` of itself. The others (a vertical first axis, a wrist
    whose link is balanced on its axis) see torques that only the model's own errors make: a
    compliance fitted to them would explain something else; and a joint under the same load
    in every sample (a vertical lift carrying the arm's weight) sags by the same amount
    everywhere, which its offset cannot be told from (a lift's compliance took a 6.5 mm offset
    that the calibrated URDF then lacked). A model without masses loads none."""
    tau = np.abs(deflection(chain, q, np.zeros(chain.n)).tau)
    peak = np.nanmax(tau, axis=0, initial=0.0)
    varies = peak - np.nanmin(tau, axis=0, initial=np.inf) >= VARIED * peak
    return (peak > 0.0) & (peak >= LOADED * peak.max()) & varies


def joint_directions(
    bent: Deflection, c: Array, p: int, compliance_col: int, free: np.ndarray
) -> Array:
    """``d q_link / d parameters`` (N, n, p): ``-diag(c) d tau_g / d eta`` in the first
    6 n columns (the joints' eta), ``-tau_g,i`` in column ``compliance_col + i`` for the
    joints whose compliance is ``free``; NaN rows as zeros (those samples are skipped)."""
    N, n = bent.tau.shape
    out = np.zeros((N, n, p))
    if bent.dtau_deta is not None:
        out[:, :, : 6 * n] = -c[None, :, None] * bent.dtau_deta
    i = np.flatnonzero(free)
    out[:, i, compliance_col + i] = -bent.tau[:, i]
    return np.nan_to_num(out, nan=0.0)


def stiffness(c: float, std: float, kind: str) -> dict[str, float | str | None]:
    """One joint's compliance, its standard deviation and the stiffness ``1 / c`` with its
    first-order standard deviation ``std / c^2`` (None when rigid: c = 0), in SI units."""
    rigid = not c > 0.0
    angular = kind == REVOLUTE
    return {
        "compliance": float(c),
        "compliance_std": float(std),
        "compliance_unit": "rad/(N m)" if angular else "m/N",
        "stiffness": None if rigid else float(1.0 / c),
        "stiffness_std": None if rigid else float(std / c**2),
        "stiffness_unit": "N m/rad" if angular else "N/m",
    }
