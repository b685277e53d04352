"""One excitation experiment end to end: model terms, information, design, predictions.

:func:`excite` is what ``workbench excite`` runs (and the Python entry point):

* dynamic / twist: the information of the kind (:func:`dynamic_information`,
  :func:`twist_information`) with the problem's drive terms, the limits, and
  the nominal drive torques of the model's drive file (``ROBOT.drives.toml``
  beside its URDF, if any) in the torque limits; :func:`design_trajectory`;
  then the trajectory sampled at the output rate and the *predicted*
  standard deviations ``sqrt(diag(F_log^{-1}))`` of the parameters for the
  stated torque noise, with ``F_log`` summed over the written samples
  (Coulomb friction as ``sign(dq)``, as calibration fits it);
* kinematic: candidate postures (random within the limits, or a CSV), their
  information (:mod:`workbench.excitation.postures`) and the selection,
  with predicted standard deviations of the identifiable directions.

:func:`simulate_torques` and :func:`identification_errors` close the loop
for checks and benchmarks: a noisy torque log of a perturbed robot along a
trajectory, identified by least squares with
:func:`~workbench.calibration.fitting.dynamic.calibrate_dynamic` (``physical=False``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from workbench.calibration.fitting.dynamic import calibrate_dynamic
from workbench.calibration.simulation.simulate import perturbed_truth
from workbench.chain import Chain
from workbench.dynamics.inverse_dynamics import inverse_dynamics
from workbench.errors import WorkbenchError
from workbench.excitation.design import (
    Design,
    Limits,
    TorqueFunction,
    design_trajectory,
    random_parameters,
)
from workbench.excitation.information import (
    DynamicInformation,
    Information,
    TorqueColumns,
    TwistInformation,
    condition_number,
    identifiable_eta_directions,
    log_det,
)
from workbench.excitation.postures import (
    PostureInformation,
    PostureSelection,
    check_candidates,
    posture_information,
    random_postures,
    read_postures,
    select_postures,
)
from workbench.excitation.problem import KINDS, ExcitationProblem
from workbench.excitation.trajectory import FourierSpace
from workbench.identification.drives import Drives, read_drive_file, sidecar_path
from workbench.identification.torque_model import TorqueModel, base_parameters
from workbench.lie import Array
from workbench.recordings.log import Log

POSTURE_SPACING = 10.0  # s between postures in postures.csv (move, settle, measure)


@dataclass(frozen=True)
class DriveFile:
    """The model's nominal drive terms and values (from ``ROBOT.drives.toml``), if any."""

    drives: Drives | None = None
    values: dict[str, float] = field(default_factory=dict)

    @classmethod
    def beside(cls, urdf: str | Path | None, n: int) -> DriveFile:
        if urdf is None:
            return cls()
        path = sidecar_path(urdf)
        if not path.is_file():
            return cls()
        drives, values = read_drive_file(path, n)
        return cls(drives, values)

    def vector(self, drives: Drives) -> Array:
        """Nominal values in ``drives.names`` order (0 where the file has none)."""
        return np.array([self.values.get(name, 0.0) for name in drives.names])


def model_drives(chain: Chain, problem: ExcitationProblem, drive_file: DriveFile) -> Drives:
    """The torque model's drive terms (problem ``terms``), transmission from the drive file."""
    transmission = None if drive_file.drives is None else drive_file.drives.transmission
    terms = problem.model.terms
    if "coupled_motors" in terms and transmission is None:
        raise WorkbenchError(
            f"{problem.source}: [model] terms has coupled_motors but model '{chain.name}' has no "
            "drive file with a transmission matrix"
        )
    speed = np.full(chain.n, problem.model.friction_speed)
    return Drives(chain.n, terms, transmission, speed)


def exact(drives: Drives) -> Drives:
    """The same drive terms with Coulomb friction as ``sign(dq)`` (as calibration fits it)."""
    return replace(drives, min_speed=None)


def dynamic_information(
    chain: Chain, drives: Drives, sigma: Array, nominal: DriveFile | None = None, base=None
) -> DynamicInformation:
    """Information of the base parameters of ``TorqueModel(chain, drives)``."""
    model = TorqueModel(chain, drives)
    base = base or base_parameters(model)
    values = None if nominal is None else nominal.vector(drives)
    return DynamicInformation(model, base, np.asarray(sigma, dtype=float), values)


def twist_information(
    chain: Chain,
    drives: Drives,
    sigma: Array,
    inertial: bool = False,
    nominal: DriveFile | None = None,
    directions: tuple[Array, tuple[str, ...]] | None = None,
) -> TwistInformation:
    """Information of the identifiable joint-eta directions, drive terms (and inertial base)."""
    model = TorqueModel(chain, drives)
    values = model.values(None if nominal is None else nominal.vector(drives))
    if inertial:
        base = base_parameters(model)
        select, names, linear_nominal = base.independent, base.names, base.matrix @ values
    else:
        select = np.flatnonzero(model.order >= 10 * chain.n)
        names = tuple(model.names[i] for i in select)
        linear_nominal = values[select]
    linear = TorqueColumns(model, select)
    U, eta_names = directions or identifiable_eta_directions(chain, linear)
    return TwistInformation(
        chain, U, eta_names, linear, tuple(names), linear_nominal, np.asarray(sigma, dtype=float)
    )


@dataclass(frozen=True)
class Prediction:
    """Predicted statistics of the parameters for an experiment (written samples)."""

    names: tuple[str, ...]
    nominal: Array  # (p,)
    std: Array  # (p,)
    log_det: float
    condition_number: float
    samples: int

    @property
    def relative_std(self) -> Array:
        """100 std / |nominal| (%); NaN where the nominal value is 0."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.nominal != 0, 100.0 * self.std / np.abs(self.nominal), np.nan)


def predict(information: Information, q: Array, dq: Array, ddq: Array) -> Prediction:
    """std = sqrt(diag(F^{-1})) with F over the samples (q, dq, ddq) (K, n)."""
    F = information.matrix(q, dq, ddq)
    try:
        cov = np.linalg.inv(F)
        std = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    except np.linalg.LinAlgError:
        std = np.full(F.shape[0], np.inf)
    return Prediction(
        tuple(information.names), information.nominal, std, log_det(F), condition_number(F),
        q.shape[0],
    )  # fmt: skip


@dataclass(frozen=True)
class ExcitationResult:
    """What :func:`excite` produced (see the module docstring)."""

    kind: str
    chain: Chain
    problem: ExcitationProblem
    noise: Array  # (n,) torque noise (N m), or (2,) position/rotation noise (kinematic)
    t: Array  # (N,) written samples
    q: Array  # (N, n)
    dq: Array | None = None
    ddq: Array | None = None
    tau: Array | None = None  # (N, n) nominal torques the drives must deliver
    limits: Limits | None = None
    design: Design | None = None
    initial: Prediction | None = None  # the initial (random) trajectory / postures
    prediction: Prediction | None = None
    information: Information | PostureInformation | None = None
    selection: PostureSelection | None = None
    seconds: float = 0.0


def excite(
    chain: Chain, kind: str, problem: ExcitationProblem, urdf: str | Path | None = None
) -> ExcitationResult:
    """Design the experiment of ``kind`` for ``chain`` (module docstring)."""
    import time

    if kind not in KINDS:
        raise WorkbenchError(f"unknown kind '{kind}'; choose from {', '.join(KINDS)}")
    clock = time.perf_counter()
    if kind == "kinematic":
        result = _postures(chain, problem)
    else:
        result = _trajectory(chain, kind, problem, DriveFile.beside(urdf, chain.n))
    return replace(result, seconds=time.perf_counter() - clock)


def _trajectory(
    chain: Chain, kind: str, problem: ExcitationProblem, drive_file: DriveFile
) -> ExcitationResult:
    settings = problem.trajectory
    sigma = problem.noise(chain)
    limits = problem.limits.limits(chain, f"{problem.source}: [limits]")
    drives = model_drives(chain, problem, drive_file)
    if kind == "dynamic":
        information = dynamic_information(chain, drives, sigma, drive_file)
        final = dynamic_information(chain, exact(drives), sigma, drive_file, information.base)
    else:
        information = twist_information(chain, drives, sigma, problem.model.inertial, drive_file)
        directions = (information.directions, information.direction_names)
        final = twist_information(
            chain, exact(drives), sigma, problem.model.inertial, drive_file, directions
        )
    torques = TorqueFunction(chain)
    if drive_file.drives is not None:
        smooth = replace(
            drive_file.drives, min_speed=np.full(chain.n, problem.model.friction_speed)
        )
        torques = TorqueFunction(chain, smooth, drive_file.vector(smooth))
    space = FourierSpace(chain.n, settings.period, settings.harmonics, True, settings.start)
    options = replace(problem.design, collocation=settings.collocation)
    design = design_trajectory(information, space, limits, torques, options)
    trajectory = design.trajectory
    t, q, dq, ddq = trajectory.sampled(settings.sample_rate, settings.periods)
    prediction = predict(final, q, dq, ddq)
    initial_theta = random_parameters(
        space, limits, torques, np.random.default_rng(options.seed), settings.collocation
    )
    _, qi, dqi, ddqi = space.trajectory(initial_theta).sampled(
        settings.sample_rate, settings.periods
    )
    return ExcitationResult(
        kind=kind, chain=chain, problem=problem, noise=sigma, t=t, q=q, dq=dq, ddq=ddq,
        tau=torques(q, dq, ddq), limits=limits, design=design,
        initial=predict(final, qi, dqi, ddqi), prediction=prediction, information=final,
    )  # fmt: skip


def _postures(chain: Chain, problem: ExcitationProblem) -> ExcitationResult:
    settings = problem.postures
    limits = problem.limits.limits(chain, f"{problem.source}: [limits]")
    rng = np.random.default_rng(problem.design.seed)
    if isinstance(settings.candidates, Path):
        q = read_postures(settings.candidates, chain)
        where = f"{settings.candidates}: {q.shape[0]} candidate postures"
        check_candidates(where, q.shape[0], chain.n, settings.measure, settings.device_known)
        outside = (q < limits.lower - 1e-12) | (q > limits.upper + 1e-12)
        if np.any(outside):
            row, j = np.argwhere(outside)[0]
            raise WorkbenchError(
                f"{settings.candidates}: posture {row + 1} has joint '{chain.joint_names[j]}' "
                f"at {q[row, j]:.4g} rad, outside its limits [{limits.lower[j]:.4g}, "
                f"{limits.upper[j]:.4g}]"
            )
    else:
        q = random_postures(chain, settings.candidates, limits.lower, limits.upper, rng)
    information = posture_information(
        chain, q, measure=settings.measure, device_known=settings.device_known,
        sigma_position=settings.sigma_position, sigma_rotation=settings.sigma_rotation,
    )  # fmt: skip
    if settings.count > q.shape[0]:
        raise WorkbenchError(
            f"{problem.source}: [postures] count = {settings.count} is more than the "
            f"{q.shape[0]} candidates"
        )
    try:
        selection = select_postures(information, settings.count)
    except WorkbenchError as exc:
        raise WorkbenchError(f"{problem.source}: [postures] count: {exc}") from None
    chosen = selection.selected
    rank = np.linalg.matrix_rank(information.matrix(chosen))
    if rank < information.size:
        raise WorkbenchError(
            f"{problem.source}: [postures] count = {settings.count}: the best {settings.count} "
            f"postures of the candidates determine only {rank} of the {information.size} "
            "identifiable directions; select more postures"
        )
    baseline = rng.choice(q.shape[0], settings.count, replace=False)
    names = tuple(f"direction{k + 1}" for k in range(information.size))

    def statistics(rows: np.ndarray) -> Prediction:
        F = information.matrix(rows)
        std = np.sqrt(np.clip(np.diag(np.linalg.pinv(F)), 0.0, None))
        return Prediction(
            names, np.zeros(information.size), std, log_det(F), condition_number(F), rows.size
        )

    noise = np.array([settings.sigma_position, settings.sigma_rotation])
    return ExcitationResult(
        kind="kinematic", chain=chain, problem=problem, noise=noise,
        t=POSTURE_SPACING * np.arange(chosen.size, dtype=float), q=q[chosen], limits=limits,
        initial=statistics(baseline), prediction=statistics(chosen), information=information,
        selection=selection,
    )  # fmt: skip


# --------------------------------------------------------------- checking
def simulate_torques(
    truth: Chain,
    q: Array,
    dq: Array,
    ddq: Array,
    noise: Array,
    rng: np.random.Generator,
    viscous: Array | None = None,
    coulomb: Array | None = None,
    t: Array | None = None,
) -> Log:
    """A torque log of ``truth`` along (q, dq, ddq) with friction and Gaussian noise (N m)."""
    tau = inverse_dynamics(truth, q, dq, ddq)
    if viscous is not None:
        tau = tau + viscous * dq
    if coulomb is not None:
        tau = tau + coulomb * np.sign(dq)
    tau = tau + rng.normal(size=tau.shape) * noise
    t = np.arange(q.shape[0], dtype=float) if t is None else t
    return Log(t=t, q=q, dq=dq, ddq=ddq, tau=tau, joint_names=truth.joint_names, source="<sim>")


def identification_errors(
    chain: Chain,
    trajectories: dict[str, tuple[Array, Array, Array]],
    noise: Array,
    repeats: int = 20,
    perturb: float = 0.05,
    friction: float = 1.0,
    seed: int = 0,
) -> dict[str, dict[str, Array]]:
    """Monte Carlo of identification along each trajectory: errors and predicted covariance.

    A perturbed ground truth (:func:`~workbench.calibration.simulation.simulate.perturbed_truth`,
    inertias moved and scaled by ``perturb``, viscous and Coulomb friction of
    scale ``friction``) is logged ``repeats`` times along every trajectory
    with torque noise ``noise`` (n,) and identified with
    :func:`~workbench.calibration.fitting.dynamic.calibrate_dynamic` (friction
    terms, WLS) without the physically consistent completion
    (``physical=False``): the errors are those of the least-squares estimate,
    whose covariance ``F^{-1}`` the design predicts. The consistent completion's
    prior pulls the base parameters toward the nominal model (several standard
    deviations where the data determine them weakly), an estimator F does not
    describe. Returns per trajectory: ``errors`` (repeats, p) of the base
    parameters, ``covariance`` (p, p) = ``F^{-1}`` predicted from F of the
    samples, ``predicted`` its standard deviations (p,), ``truth`` (p,).
    """

    truth = perturbed_truth(chain, "dynamic", perturb, friction, seed=seed + 1)
    drives = Drives(chain.n)
    model = TorqueModel(chain, drives)
    base = base_parameters(model)
    true_model = TorqueModel(truth.chain, drives)
    x_true = true_model.values(np.ravel(np.column_stack([truth.viscous, truth.coulomb])))
    beta_true = base.matrix @ x_true
    info = DynamicInformation(model, base, np.asarray(noise, dtype=float))
    out: dict[str, dict[str, Array]] = {}
    rng = np.random.default_rng(seed + 2)
    for label, (q, dq, ddq) in trajectories.items():
        errors = []
        for _ in range(repeats):
            log = simulate_torques(
                truth.chain, q, dq, ddq, noise, rng, truth.viscous, truth.coulomb
            )
            fit = calibrate_dynamic(chain, log, drives=drives, physical=False)
            errors.append(fit.beta - beta_true)
        covariance = np.linalg.inv(info.matrix(q, dq, ddq))
        out[label] = {
            "errors": np.array(errors),
            "covariance": covariance,
            "predicted": np.sqrt(np.diag(covariance)),
            "truth": beta_true,
        }
    return out
