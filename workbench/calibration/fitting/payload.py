"""Identification of a payload (gripper, tool, held object) on one link of a calibrated robot.

Model. The robot's own parameters are fixed (its URDF inertias and, when
given, its drive terms: friction, rotor inertia, offsets). A body rigidly
attached to link k adds torques linear in its ten inertial parameters
``phi = [m, h_x, h_y, h_z, I_xx, I_yy, I_zz, I_xy, I_xz, I_yz]``
(docs/conventions.md) *in link k's joint frame* (the URDF frame of link k):

    tau_measured - tau_robot(q, dq, ddq) = Y_k(q, dq, ddq) phi + noise,

with ``Y_k`` the ten regressor columns of link k in its joint frame
(:func:`workbench.dynamics.regressor.regressor_columns`: the unit body is
moved to the base frame by ``L(M_k)``, [Kwon] eq. 29). A known body in the
log (``[model.payload]`` of a log description) is taken off the measured
torques too, so what is identified is what the robot carries beyond it.
Every joint's row counts, moving or held still: a held joint measures the
payload's wrench as well. With a log description the equations go through
its parallel decimation and drop the filters' borders
(:mod:`workbench.recordings.signals`); joint rows slower than the log's
``min_speed`` are left out only for joints with Coulomb friction in the
drive terms (friction at rest is undefined; without it a joint held still is
a clean measurement).

Estimate. Weighted least squares with one weight per joint, ``1 /
sigma_j`` from an ordinary least-squares fit (Gautier's two steps, as
:mod:`workbench.calibration.fitting.dynamic`), giving ``phi_ls`` and the information
``F = X_w^T X_w / s^2`` (``s^2`` the weighted residual variance, so ``F^{-1}``
is the covariance from the residual variance and the Jacobian at the
optimum). Physical consistency: phi is consistent when its pseudo-inertia
``J(phi) = [[tr(I)/2 1 - I, h], [h^T, m]]`` is positive definite (Wensing,
Kim and Slotine; :func:`workbench.inertia.pseudo_inertia`). The estimate is
the most likely consistent phi,

    min_phi (phi - phi_ls)^T F (phi - phi_ls)   s.t.  J(phi) >= delta 1,

solved without a semidefinite solver by the Cholesky parametrisation ``J =
L L^T + delta 1`` (L any real 4x4, delta = ``consistency.DELTA``) and
trust-region least squares on the 10 residuals ``chol(F)^T (phi(L) -
phi_ls)`` with the exact Jacobian ``d phi / d L`` (J is linear in phi).
With a full square factor every second-order critical point in L is the
global optimum of the convex problem in J (Burer and Monteiro), so the
local solver finds it; when ``phi_ls`` is already consistent it is returned
unchanged. The reported covariance is ``F^{-1}`` (that of ``phi_ls``; the
same as the constrained estimate's when no constraint is active).

Outputs in the forms controllers take (:func:`payload_fields`): mass, centre
of mass and inertia about the COM in the link frame with standard
deviations by the delta method (:func:`com_jacobian`), a URDF fixed link
(:func:`urdf_snippet`) and the ``[model.payload]`` table that log
descriptions read (:func:`payload_table`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from xml.etree import ElementTree as ET

import numpy as np
from scipy.optimize import least_squares

from workbench import inertia, lie
from workbench.calibration.fitting.dynamic import payload_torques
from workbench.chain import Chain
from workbench.dynamics.inverse_dynamics import inverse_dynamics
from workbench.dynamics.regressor import regressor_columns
from workbench.errors import WorkbenchError
from workbench.identification.consistency import DELTA
from workbench.identification.drives import Drives
from workbench.identification.least_squares import joint_sigma
from workbench.lie import Array
from workbench.recordings import signals
from workbench.recordings.log import Log

# rank of the regressor: columns below ZERO_COLUMN of the largest norm are zero (rounding),
# the others scaled to unit norm; singular values below RANK_RTOL of the largest are zero
ZERO_COLUMN = 1e-10
RANK_RTOL = 1e-8
PHI_NAMES = ("m", "hx", "hy", "hz", "Ixx", "Iyy", "Izz", "Ixy", "Ixz", "Iyz")
# the "COM form" psi of phi, same layout: mass, centre of mass, inertia about the COM
COM_NAMES = ("mass", "com_x", "com_y", "com_z", "Ixx", "Iyy", "Izz", "Ixy", "Ixz", "Iyz")
COM_UNITS = ("kg", "m", "m", "m", *(["kg m^2"] * 6))


def frame_on_link(chain: Chain, frame: str) -> tuple[int, Array]:
    """(index of the moving link that carries ``frame``, pose (4, 4) of ``frame`` in that
    link's joint frame) for a link or a frame fixed to one (a flange, a tool frame)."""
    if frame in chain.link_names:
        return chain.link_names.index(frame), np.eye(4)
    parent = chain.parent_of(frame)  # an unknown name lists the frames
    if parent < 0:
        raise WorkbenchError(
            f"frame {frame!r} is fixed to the base of model '{chain.name}': a payload there "
            f"never moves; name a moving link ({', '.join(chain.link_names)}) or a frame on one"
        )
    return parent, lie.inverse(chain.joint_frames[parent]) @ chain.placement_of(frame)


def payload_regressor(chain: Chain, link: int, q: Array, dq: Array, ddq: Array) -> Array:
    """Y_k (N, n, 10): joint torques of a body on ``link`` per unit phi in its joint frame."""
    return regressor_columns(chain, q, dq, ddq, 10 * link + np.arange(10), frame="joint")


@dataclass(frozen=True)
class PayloadEquations:
    """Rows of ``y = Y phi``: times (M,), Y (M, n, 10), y (M, n) = measured - robot torques
    and the rows to fit (M, n)."""

    t: Array
    Y: Array
    y: Array
    fit: np.ndarray

    def __len__(self) -> int:
        return self.t.shape[0]


def robot_drives(
    drives: Drives | None, values: dict[str, float] | None, log: Log
) -> tuple[Drives, Array] | None:
    """The robot's fixed drive terms with the log's Coulomb smoothing, and their values."""
    if drives is None:
        return None
    values = values or {}
    unknown = sorted(set(values) - set(drives.names))
    if unknown:
        raise WorkbenchError(f"drive values {', '.join(unknown)} are not terms of {drives.terms}")
    vector = np.array([values.get(name, 0.0) for name in drives.names])
    return replace(drives, min_speed=log.min_speed), vector


def payload_equations(
    chain: Chain,
    log: Log,
    link: int,
    drives: Drives | None = None,
    drive_values: dict[str, float] | None = None,
) -> PayloadEquations:
    """The equations of the module docstring from ``log`` (decimated as its description asks)."""
    if log.tau is None:
        raise WorkbenchError(
            f"{log.source}: payload identification needs joint torques; none logged"
        )
    fixed = robot_drives(drives, drive_values, log)

    def rows(start: int, stop: int) -> Array:
        s = slice(start, stop)
        q, dq, ddq = log.q[s], log.dq[s], log.ddq[s]
        robot = inverse_dynamics(chain, q, dq, ddq) + payload_torques(chain, log, s)
        if fixed is not None:
            robot = robot + fixed[0].columns(dq, ddq) @ fixed[1]
        Y = payload_regressor(chain, link, q, dq, ddq)
        return np.concatenate([Y, (log.tau[s] - robot)[:, :, None]], axis=2)

    Z = signals.decimate_blocks(rows, len(log), log.decimation)
    keep = slice(log.border, Z.shape[0] - log.border)
    Z = Z[keep]
    dq = log.dq[:: log.decimation][keep]
    fit = np.ones(dq.shape, dtype=bool) & log.torque_channels()  # [torques] exclude
    if fixed is not None and log.min_speed is not None:
        named = dict(zip(fixed[0].names, fixed[1], strict=True))
        coulomb = np.array([named.get(f"fs{j + 1}", 0.0) for j in range(chain.n)])
        fit &= (coulomb == 0.0) | (np.abs(dq) >= log.min_speed)
    t = log.t[:: log.decimation][keep]
    return PayloadEquations(t, Z[:, :, :10], Z[:, :, 10], fit)


@dataclass(frozen=True)
class PayloadFit:
    """An identified payload: phi in the frame ``link`` and what the fit says of it."""

    link: str  # the frame phi is expressed in: the carrying link's, or a frame fixed to it
    phi: Array  # (10,) the consistent estimate
    covariance: Array  # (10, 10) of phi (from the residual variance)
    least_squares: Array  # (10,) the weighted least-squares estimate before the constraint
    constrained: bool  # True when the consistency constraint moved the estimate
    sigma: Array  # (n,) residual torque RMS per joint of the payload model (N m)
    sigma_robot: Array  # (n,) residual torque RMS per joint of the robot model alone (N m)
    rows: int  # torque equations fitted
    condition_number: float  # of the weighted, column-scaled regressor

    @property
    def std(self) -> Array:
        """Standard deviations (10,) of phi."""
        return np.sqrt(np.clip(np.diag(self.covariance), 0.0, None))

    @property
    def com_form(self) -> Array:
        """psi (10,) = [mass, com (3), inertia about the COM (6)] (module docstring)."""
        return com_form(self.phi)

    @property
    def com_std(self) -> Array:
        """Standard deviations (10,) of psi by the delta method at the estimate."""
        return com_std(self.phi, self.covariance)


def fit_payload(equations: PayloadEquations, link: str) -> PayloadFit:
    """Weighted least squares and the consistent estimate (module docstring)."""
    use = equations.fit
    X = equations.Y[use]  # (m, 10)
    y = equations.y[use]
    joint = np.nonzero(use)[1]
    n = equations.y.shape[1]
    if y.size < 10:
        raise WorkbenchError(
            f"{y.size} torque equations cannot determine the 10 payload parameters"
        )
    norm = np.linalg.norm(X, axis=0)
    scale = np.where(norm > ZERO_COLUMN * norm.max(), norm, np.inf)
    Xs = X / scale
    singular = np.linalg.svd(Xs, compute_uv=False)
    rank = int(np.sum(singular > RANK_RTOL * singular[0]))
    if rank < 10:
        raise WorkbenchError(
            f"the log determines only {rank} of the 10 payload parameters: move the payload's "
            "link through more orientations and accelerations (e.g. more joints), or hold the "
            "other joints in another posture"
        )
    theta = np.linalg.lstsq(Xs, y, rcond=None)[0]
    counts = np.bincount(joint, minlength=n)
    residual2 = np.bincount(joint, (Xs @ theta - y) ** 2, minlength=n)
    weights = 1.0 / joint_sigma(residual2, counts, 10)[joint]
    Xw = Xs * weights[:, None]
    yw = y * weights
    theta, _, _, singular = np.linalg.lstsq(Xw, yw, rcond=None)
    residual = Xw @ theta - yw
    s2 = float(residual @ residual) / max(y.size - 10, 1)
    information = (Xw.T @ Xw) / s2 * np.outer(scale, scale)
    information = (information + information.T) / 2
    phi_ls = theta / scale
    phi = consistent_payload(phi_ls, information)
    fitted = equations.Y @ phi
    rms = np.sqrt(np.mean(np.where(equations.fit, equations.y - fitted, 0.0) ** 2, axis=0))
    rms_robot = np.sqrt(np.mean(np.where(equations.fit, equations.y, 0.0) ** 2, axis=0))
    return PayloadFit(
        link=link, phi=phi, covariance=np.linalg.inv(information), least_squares=phi_ls,
        constrained=not np.array_equal(phi, phi_ls), sigma=rms, sigma_robot=rms_robot,
        rows=int(y.size), condition_number=float(singular[0] / singular[-1]),
    )  # fmt: skip


def identify_payload(
    chain: Chain,
    log: Log,
    link: str,
    drives: Drives | None = None,
    drive_values: dict[str, float] | None = None,
) -> PayloadFit:
    """The payload on ``link`` from the torques of ``log`` (module docstring).

    ``link`` is a moving link or a frame fixed to one (then phi is expressed
    in that frame, :func:`expressed_in`). ``drives`` and ``drive_values`` are
    the robot's fixed drive terms (e.g. of its ``ROBOT.drives.toml``,
    :func:`workbench.identification.drives.read_drive_file`).
    """
    k, placement = frame_on_link(chain, link)
    equations = payload_equations(chain, log, k, drives, drive_values)
    fit = fit_payload(equations, chain.link_names[k])
    return fit if link == fit.link else expressed_in(fit, link, placement)


def expressed_in(fit: PayloadFit, frame: str, placement: Array) -> PayloadFit:
    """``fit`` in ``frame``, whose pose in the fit's frame is ``placement`` (4, 4).

    ``phi_frame = L(placement^-1) phi`` ([Kwon] eq. 29, linear in phi with
    :func:`workbench.inertia.motion_matrix`), and so its covariance.
    """
    L = inertia.motion_matrix(lie.inverse(placement))
    return replace(
        fit, link=frame, phi=L @ fit.phi, covariance=L @ fit.covariance @ L.T,
        least_squares=L @ fit.least_squares,
    )  # fmt: skip


# ---------------------------------------------------------------- consistency
def _phi_of_pseudo_inertia_map() -> Array:
    """P (10, 16): phi = P vec(J) (the inverse of :func:`workbench.inertia.pseudo_inertia`)."""
    return inertia.phi_from_pseudo_inertia(np.eye(16).reshape(16, 4, 4)).T


_P = _phi_of_pseudo_inertia_map()


def is_consistent(phi: Array, margin: float = 0.0) -> bool:
    """Pseudo-inertia of phi positive definite (above ``margin``)."""
    return bool(np.linalg.eigvalsh(inertia.pseudo_inertia(np.asarray(phi)))[0] > margin)


def consistent_payload(phi_ls: Array, information: Array) -> Array:
    """The consistent phi closest to ``phi_ls`` in the metric ``information`` (module docstring)."""
    if is_consistent(phi_ls, DELTA):
        return phi_ls.copy()
    R = np.linalg.cholesky(information).T  # F = R^T R
    J = inertia.pseudo_inertia(phi_ls)
    values, vectors = np.linalg.eigh(J)
    floor = 1e-3 * max(values[-1], 1e3 * DELTA)
    start = vectors @ np.diag(np.sqrt(np.maximum(values - DELTA, floor))) @ vectors.T
    unit = np.eye(16).reshape(16, 4, 4)  # d L / d L_ab

    def phi_of(L: Array) -> Array:
        return _P @ (L @ L.T + DELTA * np.eye(4)).ravel()

    def residual(x: Array) -> Array:
        return R @ (phi_of(x.reshape(4, 4)) - phi_ls)

    def jacobian(x: Array) -> Array:
        L = x.reshape(4, 4)
        dJ = unit @ L.T + L @ np.swapaxes(unit, 1, 2)  # (16, 4, 4)
        return R @ (_P @ dJ.reshape(16, 16).T)

    result = least_squares(
        residual, start.ravel(), jac=jacobian, method="trf", x_scale="jac", xtol=1e-15,
        ftol=1e-15, gtol=1e-15, max_nfev=2000,
    )  # fmt: skip
    return phi_of(result.x.reshape(4, 4))


# ------------------------------------------------------------- output forms
def com_form(phi: Array) -> Array:
    """psi (..., 10) = [m, c, I_c entries] of phi (project order of the entries)."""
    m, c, Ic = inertia.com_from_phi(phi)
    return np.concatenate([m[..., None], c, _entries(Ic)], axis=-1)


def _entries(S: Array) -> Array:
    """The six entries (..., 6) of symmetric 3x3 matrices S in phi order (Ixx .. Iyz)."""
    S = np.asarray(S, dtype=float)
    zero = np.zeros(S.shape[:-2])
    return inertia.phi_from_com(zero, np.zeros((*S.shape[:-2], 3)), S)[..., 4:]


def com_jacobian(phi: Array) -> Array:
    """d psi / d phi (10, 10) of :func:`com_form` (m > 0).

    ``c = h / m`` and ``I_c = I_o - (|h|^2 1 - h h^T) / m``, so ``dc/dm =
    -h/m^2``, ``dc/dh = 1/m``, ``dI_c/dm = (|h|^2 1 - h h^T)/m^2``,
    ``dI_c/dh_k = -(2 h_k 1 - e_k h^T - h e_k^T)/m`` and ``dI_c/dI_o = 1``.
    """
    phi = np.asarray(phi, dtype=float)
    m, h = phi[0], phi[1:4]
    D = np.zeros((10, 10))
    D[0, 0] = 1.0
    D[1:4, 0] = -h / m**2
    D[1:4, 1:4] = np.eye(3) / m
    D[4:, 0] = _entries(h @ h * np.eye(3) - np.outer(h, h)) / m**2
    e = np.eye(3)
    dS = (
        2 * h[:, None, None] * e
        - e[:, :, None] * h[None, None, :]
        - h[None, :, None] * e[:, None, :]
    )
    D[4:, 1:4] = -_entries(dS).T / m  # dS[a] = d(|h|^2 1 - h h^T) / d h_a
    D[4:, 4:] = np.eye(6)
    return D


def com_std(phi: Array, covariance: Array) -> Array:
    """Standard deviations (10,) of psi = :func:`com_form` of phi with ``covariance`` (10, 10),
    to first order (delta method: ``D C D^T`` with D = :func:`com_jacobian` at phi)."""
    D = com_jacobian(phi)
    return np.sqrt(np.clip(np.diag(D @ covariance @ D.T), 0.0, None))


def payload_fields(fit: PayloadFit) -> dict[str, object]:
    """The JSON form: mass, COM and inertia about the COM (link frame) with stds, and phi."""
    psi, std = fit.com_form, fit.com_std
    ixx, iyy, izz, ixy, ixz, iyz = psi[4:]
    return {
        "frame": fit.link,
        "note": f"in the frame of {fit.link} (its URDF link frame); SI units; inertia about "
        "the centre of mass, axes of that frame; std by the delta method",
        "mass_kg": float(psi[0]),
        "mass_std_kg": float(std[0]),
        "com_m": psi[1:4].tolist(),
        "com_std_m": std[1:4].tolist(),
        "inertia_com_kg_m2": [[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]],
        "inertia_com_std_kg_m2": dict(zip(COM_NAMES[4:], std[4:].tolist(), strict=True)),
        "phi": dict(zip(PHI_NAMES, fit.phi.tolist(), strict=True)),
        "phi_std": dict(zip(PHI_NAMES, fit.std.tolist(), strict=True)),
        "phi_covariance": fit.covariance.tolist(),
        "phi_least_squares": dict(zip(PHI_NAMES, fit.least_squares.tolist(), strict=True)),
        "consistency_constraint_active": fit.constrained,
    }


def urdf_snippet(phi: Array, parent: str, name: str = "payload") -> str:
    """A ``<joint type="fixed">`` and ``<link>`` carrying phi (in ``parent``'s frame), to append
    inside a URDF's ``<robot>``: the inertial origin at the COM, axes of the parent frame."""
    m, c, Ic = inertia.com_from_phi(np.asarray(phi, dtype=float))
    num = lambda x: repr(float(x))  # noqa: E731 - shortest round-trip text
    joint = ET.Element("joint", name=f"{name}_joint", type="fixed")
    ET.SubElement(joint, "parent", link=parent)
    ET.SubElement(joint, "child", link=name)
    ET.SubElement(joint, "origin", xyz="0 0 0", rpy="0 0 0")
    link = ET.Element("link", name=name)
    inertial = ET.SubElement(link, "inertial")
    ET.SubElement(inertial, "origin", xyz=" ".join(map(num, c)), rpy="0 0 0")
    ET.SubElement(inertial, "mass", value=num(m))
    ET.SubElement(
        inertial, "inertia", ixx=num(Ic[0, 0]), ixy=num(Ic[0, 1]), ixz=num(Ic[0, 2]),
        iyy=num(Ic[1, 1]), iyz=num(Ic[1, 2]), izz=num(Ic[2, 2]),
    )  # fmt: skip
    for element in (joint, link):
        ET.indent(element, "  ")
    return (
        ET.tostring(joint, encoding="unicode") + "\n" + ET.tostring(link, encoding="unicode") + "\n"
    )


def payload_table(phi: Array, link: str) -> str:
    """The ``[model.payload]`` table of a log description (a known payload) for phi."""
    psi = com_form(np.asarray(phi, dtype=float))
    numbers = lambda x: ", ".join(repr(float(v)) for v in x)  # noqa: E731
    return (
        "[model.payload]\n"
        f'link = "{link}"\n'
        f"mass = {float(psi[0])!r}  # kg\n"
        f"com = [{numbers(psi[1:4])}]  # m, link frame\n"
        f"inertia = [{numbers(psi[4:])}]  # ixx, iyy, izz, ixy, ixz, iyz about the COM, kg m^2\n"
    )
