"""Optimal excitation trajectories: the nonlinear program and its solution by IPOPT (CasADi).

Decision variables: theta (n m,), the free Fourier parameters of every
joint (:class:`~workbench.excitation.trajectory.FourierSpace`; rest at start
and end, and an optional start posture, hold by construction).

    minimise    J(F(theta))                      (information.criterion: -log det F or log cond)
    subject to  |q_i(t_k) - c_i| <= kappa h_i    (c_i, h_i: middle and half of the joint's range)
                |dq_i(t_k)|      <= kappa v_i,   |ddq_i(t_k)| <= kappa a_i,
                |tau_i(t_k)|     <= kappa T_i    at the K collocation points t_k,

with ``F = sum_k X_k^T X_k`` over the collocation points and ``kappa`` the
Bernstein factor of :func:`~workbench.excitation.trajectory.margin_factor`,
which makes the position, velocity and acceleration limits hold at every t.
Torques ``tau = ID(q, dq, ddq) + C(dq, ddq) x_nominal`` include the nominal
drive torques (friction, rotor inertia) when the model has a drive file.

Derivatives given to IPOPT, all exact: the q, dq, ddq constraints are linear
in theta (constant Jacobian, from the basis rows); the torque Jacobian is
``d tau / d s`` (:func:`~workbench.dynamics.derivatives.rnea_derivatives`
and the drive closed forms) times the basis rows; the criterion gradient is
``sum_k g_k . ds_k / d theta`` with the contractions ``g_k`` of
:mod:`workbench.excitation.information`. The Hessian of the Lagrangian is
approximated by L-BFGS. IPOPT starts from a random feasible trajectory
(:func:`random_parameters`; ``starts`` of them, the best solution is kept).

After the solve, every limit is checked on a grid ``fine`` times denser
than the collocation points; if a torque limit is exceeded between them,
the collocation points are doubled and the problem solved again from the
solution (at most ``refinements`` times). Infeasible limits end in a
:class:`~workbench.errors.WorkbenchError` naming the binding limit.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import casadi as ca
import numpy as np

from workbench.chain import Chain
from workbench.dynamics.derivatives import rnea_derivatives
from workbench.dynamics.inverse_dynamics import inverse_dynamics
from workbench.errors import WorkbenchError
from workbench.excitation.information import (
    Information,
    condition_number,
    criterion_gradient,
    criterion_value,
    drive_column_derivatives,
    log_det,
)
from workbench.excitation.trajectory import FourierSpace, FourierTrajectory, margin_factor
from workbench.identification.drives import Drives
from workbench.io import interrupts_received, reraise_interrupt
from workbench.lie import Array
from workbench.ocp.nlp import interrupt_warnings_dropped

QUANTITIES = ("position", "velocity", "acceleration", "torque")


@dataclass(frozen=True)
class Limits:
    """Joint limits (n,) each: position range, speed, acceleration and torque magnitudes."""

    lower: Array
    upper: Array
    velocity: Array
    acceleration: Array
    torque: Array

    def __post_init__(self) -> None:
        for name in ("lower", "upper", "velocity", "acceleration", "torque"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=float))

    @property
    def centre(self) -> Array:
        return 0.5 * (self.upper + self.lower)

    @property
    def half(self) -> Array:
        return 0.5 * (self.upper - self.lower)

    def validate(self, names: tuple[str, ...], where: str = "limits") -> None:
        """Raise WorkbenchError for empty ranges, non-positive or non-finite magnitudes."""
        for j, name in enumerate(names):
            if not (np.isfinite(self.lower[j]) and np.isfinite(self.upper[j])):
                raise WorkbenchError(f"{where}: joint '{name}' has no finite position range")
            if not self.upper[j] > self.lower[j]:
                raise WorkbenchError(
                    f"{where}: joint '{name}' position range [{self.lower[j]:.4g}, "
                    f"{self.upper[j]:.4g}] rad is empty (infeasible limits)"
                )
            for what in ("velocity", "acceleration", "torque"):
                value = getattr(self, what)[j]
                if not (value > 0 and np.isfinite(value)):
                    raise WorkbenchError(
                        f"{where}: joint '{name}' {what} limit {value:.4g} must be positive and "
                        "finite (infeasible limits)"
                    )


@dataclass(frozen=True)
class DesignOptions:
    """Settings of :func:`design_trajectory` (defaults of the problem file)."""

    criterion: str = "logdet"
    collocation: int = 100  # points per period
    max_iterations: int = 300
    tolerance: float = 1e-6
    starts: int = 1
    seed: int = 0
    fine: int = 20  # fine-grid points per collocation interval for the check
    refinements: int = 2
    verbose: bool = False


@dataclass(frozen=True, eq=False)
class TorqueFunction:
    """Joint torques the drives must deliver: rigid body plus nominal drive terms."""

    chain: Chain
    drives: Drives | None = None
    values: Array | None = None  # nominal drive parameters (drives.names order)

    def __call__(self, q: Array, dq: Array, ddq: Array) -> Array:
        tau = inverse_dynamics(self.chain, q, dq, ddq)
        if self.drives is not None and self.values is not None:
            tau = tau + self.drives.columns(dq, ddq) @ self.values
        return tau

    def derivatives(self, q: Array, dq: Array, ddq: Array) -> tuple[Array, Array]:
        """tau (K, n) and d tau / d s (3, K, n, n) for s = q, dq, ddq."""
        dq_, dv_, da_ = rnea_derivatives(self.chain, q, dq, ddq)
        tau = self(q, dq, ddq)
        D = np.stack([dq_, dv_, da_])
        if self.drives is not None and self.values is not None:
            dv, da = drive_column_derivatives(self.drives, dq, ddq)
            D[1] += np.einsum("kapj,p->kaj", dv, self.values)
            D[2] += np.einsum("kapj,p->kaj", da, self.values)
        return tau, D


@dataclass(frozen=True)
class Design:
    """An optimal (or evaluated) excitation trajectory and what it achieves."""

    space: FourierSpace
    theta: Array
    criterion: str
    value: float  # J at the collocation points (to minimise)
    log_det: float  # of F at the collocation points
    condition_number: float
    collocation: int
    limit_ratios: dict[str, Array]  # per quantity (n,): max |x| / limit on the fine grid
    status: str = "evaluated"
    iterations: int = 0
    seconds: float = 0.0
    initial: dict[str, float] = field(default_factory=dict)
    history: list[float] = field(default_factory=list)

    @property
    def trajectory(self) -> FourierTrajectory:
        return self.space.trajectory(self.theta)

    @property
    def feasible(self) -> bool:
        return all(float(np.max(r)) <= 1.0 + 1e-9 for r in self.limit_ratios.values())


# ------------------------------------------------------------- evaluation
def limit_ratios(
    trajectory: FourierTrajectory, limits: Limits, torques: TorqueFunction, points: int
) -> dict[str, Array]:
    """max over ``points`` samples of one period of |q - c|/h, |dq|/v, |ddq|/a, |tau|/T (n,)."""
    t = trajectory.period * np.arange(points) / points
    q, dq, ddq = trajectory.evaluate(t)
    tau = torques(q, dq, ddq)
    return {
        "position": np.max(np.abs(q - limits.centre), axis=0) / limits.half,
        "velocity": np.max(np.abs(dq), axis=0) / limits.velocity,
        "acceleration": np.max(np.abs(ddq), axis=0) / limits.acceleration,
        "torque": np.max(np.abs(tau), axis=0) / limits.torque,
    }


def evaluate_design(
    space: FourierSpace,
    theta: Array,
    information: Information,
    limits: Limits,
    torques: TorqueFunction,
    options: DesignOptions = DesignOptions(),
) -> Design:
    """Criterion, log det, condition number and fine-grid limit ratios of a trajectory."""
    K = options.collocation
    q, dq, ddq = space.trajectory(theta).evaluate(space.collocation_times(K))
    value, F = criterion_value(information.rows(q, dq, ddq), options.criterion)
    ratios = limit_ratios(space.trajectory(theta), limits, torques, K * options.fine)
    return Design(
        space, np.asarray(theta, dtype=float), options.criterion, value, log_det(F),
        condition_number(F), K, ratios,
    )  # fmt: skip


# ----------------------------------------------------------- initial guess
def random_parameters(
    space: FourierSpace,
    limits: Limits,
    torques: TorqueFunction,
    rng: np.random.Generator,
    points: int = 100,
) -> Array:
    """theta of a random trajectory as large as the limits allow (same limits as the design).

    Random coefficients ``a_l, b_l ~ U(-1, 1) / l`` projected onto the rest
    (and start) constraints are added to the rest posture (the start, or the
    middle of the range); each joint's amplitude is the largest that keeps
    position, velocity and acceleration within ``kappa`` of their limits at
    the collocation points, and all amplitudes are scaled down together
    (bisection) until the torques are within ``kappa`` of theirs too.
    """
    n, L = space.n, space.harmonics
    kappa = margin_factor(L, points)
    base = np.zeros((n, 2 * L + 1))
    base[:, 0] = limits.centre if space.start is None else space.start
    P, _ = space.null_space
    homogeneous = FourierSpace(
        n, space.period, L, space.rest, None if space.start is None else 0 * space.start
    )
    Ph, _ = homogeneous.null_space
    d = (
        rng.uniform(-1.0, 1.0, size=(n, 2 * L + 1))
        / np.r_[1.0, np.arange(1, L + 1), np.arange(1, L + 1)]
    )
    d[:, 0] = 0.0 if space.start is None else d[:, 0]
    d = d @ Ph @ Ph.T
    t = space.collocation_times(points)
    phi = space.basis(t)
    values = [ph @ d.T for ph in phi]  # (K, n) per quantity
    lo = limits.centre - kappa * limits.half
    hi = limits.centre + kappa * limits.half
    start = base[:, 0]
    if np.any(start < lo) or np.any(start > hi):
        j = int(np.argmax((start < lo) | (start > hi)))
        raise WorkbenchError(
            f"trajectory start {start[j]:.4g} rad of joint {j + 1} is outside its limits "
            f"[{limits.lower[j]:.4g}, {limits.upper[j]:.4g}] (infeasible limits)"
        )
    scale = np.full(n, np.inf)
    qd = values[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        up = np.where(qd > 1e-12, (hi - start) / qd, np.inf)
        down = np.where(qd < -1e-12, (lo - start) / qd, np.inf)
        scale = np.minimum(scale, np.min(np.minimum(up, down), axis=0))
        scale = np.minimum(scale, kappa * limits.velocity / np.max(np.abs(values[1]), axis=0))
        scale = np.minimum(scale, kappa * limits.acceleration / np.max(np.abs(values[2]), axis=0))
    scale = np.where(np.isfinite(scale), scale, 0.0)

    def torque_ratio(s: float) -> float:
        c = base + s * scale[:, None] * d
        q, dq, ddq = (ph @ c.T for ph in phi)
        return float(np.max(np.abs(torques(q, dq, ddq)) / (kappa * limits.torque)))

    s = 1.0
    if torque_ratio(1.0) > 1.0:
        low, high = 0.0, 1.0
        for _ in range(40):
            mid = 0.5 * (low + high)
            low, high = (mid, high) if torque_ratio(mid) <= 1.0 else (low, mid)
        s = low
    coefficients = base + s * scale[:, None] * d
    del P
    return space.parameters(coefficients)


# ------------------------------------------------------------------ solve
def design_trajectory(
    information: Information,
    space: FourierSpace,
    limits: Limits,
    torques: TorqueFunction | None = None,
    options: DesignOptions = DesignOptions(),
    initial: Array | None = None,
) -> Design:
    """The trajectory of ``space`` within ``limits`` that optimises the criterion (module doc)."""
    chain = information.chain
    limits.validate(chain.joint_names)
    torques = torques or TorqueFunction(chain)
    if options.criterion not in ("logdet", "condition"):
        raise WorkbenchError(f"unknown criterion '{options.criterion}'; choose logdet or condition")
    if space.start is not None:  # the robot must hold the start posture at rest
        zero = np.zeros((1, chain.n))
        hold = np.abs(torques(space.start[None], zero, zero)[0]) / limits.torque
        if np.any(hold > 1.0):
            j = int(np.argmax(hold))
            raise WorkbenchError(
                f"the start posture needs {hold[j] * limits.torque[j]:.4g} N m at joint "
                f"'{chain.joint_names[j]}' at rest, above its torque limit "
                f"{limits.torque[j]:.4g} N m (infeasible limits)"
            )
    rng = np.random.default_rng(options.seed)
    clock = time.perf_counter()
    K = options.collocation
    starts = (
        [np.asarray(initial, dtype=float)]
        if initial is not None
        else [random_parameters(space, limits, torques, rng, K) for _ in range(options.starts)]
    )
    first = evaluate_design(space, starts[0], information, limits, torques, options)
    best: Design | None = None
    iterations = 0
    history: list[float] = []
    for theta0 in starts:
        theta, status, its, hist = _solve(information, space, limits, torques, options, K, theta0)
        iterations += its
        history += hist
        design = evaluate_design(space, theta, information, limits, torques, options)
        if best is None or (design.feasible, -design.value) > (best.feasible, -best.value):
            best, best_status = design, status
    assert best is not None
    collocation = K
    for _ in range(options.refinements):
        if best.feasible:
            break
        collocation *= 2
        refined = DesignOptions(**{**options.__dict__, "collocation": collocation})
        theta, best_status, its, hist = _solve(
            information, space, limits, torques, refined, collocation, best.theta
        )
        iterations += its
        history += hist
        best = evaluate_design(space, theta, information, limits, torques, refined)
    if not best.feasible:
        quantity, joint, ratio = _worst(best.limit_ratios)
        raise WorkbenchError(
            f"no excitation trajectory within the limits: joint '{chain.joint_names[joint]}' "
            f"{quantity} reaches {ratio:.3g} times its limit ({best_status}); relax the limits "
            "or lengthen the period (infeasible limits)"
        )
    return Design(
        space=space, theta=best.theta, criterion=options.criterion, value=best.value,
        log_det=best.log_det, condition_number=best.condition_number,
        collocation=best.collocation, limit_ratios=best.limit_ratios, status=best_status,
        iterations=iterations, seconds=time.perf_counter() - clock,
        initial={"value": first.value, "log_det": first.log_det,
                 "condition_number": first.condition_number},
        history=history,
    )  # fmt: skip


def _worst(ratios: dict[str, Array]) -> tuple[str, int, float]:
    quantity = max(ratios, key=lambda k: float(np.max(ratios[k])))
    joint = int(np.argmax(ratios[quantity]))
    return quantity, joint, float(ratios[quantity][joint])


def _sparse(A: Array) -> ca.DM:
    """A dense numpy matrix as a CasADi DM holding only its nonzeros (true Jacobian sparsity)."""
    rows, cols = np.nonzero(A)
    sparsity = ca.Sparsity.triplet(A.shape[0], A.shape[1], rows.tolist(), cols.tolist())
    out = ca.DM(sparsity, 0.0)
    out[sparsity] = ca.DM(A)[sparsity]
    return out


class DesignProblem:
    """Criterion and torques of theta and their exact derivatives, each cached per theta."""

    def __init__(self, information, space, torques, criterion_name, points):
        self.information, self.torques, self.criterion = information, torques, criterion_name
        t = space.collocation_times(points)
        B, self.offset = space.reduced_basis(t)
        self.B = np.stack(B)  # (3, K, m)
        self.n, self.m = space.n, space.per_joint
        self._keys: dict[str, bytes] = {}
        self._values: dict[str, object] = {}
        self.history: list[float] = []

    def states(self, theta: Array) -> tuple[Array, Array, Array]:
        z = theta.reshape(self.n, self.m)
        q, dq, ddq = (self.offset[s] + self.B[s] @ z.T for s in range(3))
        return q, dq, ddq

    def _cached(self, what: str, theta: Array, compute):
        key = theta.tobytes()
        if self._keys.get(what) != key:
            self._values[what] = compute(self.states(theta))
            self._keys[what] = key
        return self._values[what]

    def objective(self, theta: Array) -> float:
        def compute(states):
            value = criterion_value(self.information.rows(*states), self.criterion)[0]
            self.history.append(value)
            return value

        return self._cached("objective", theta, compute)

    def objective_gradient(self, theta: Array) -> Array:
        def compute(states):
            _, _, g = criterion_gradient(self.information, *states, self.criterion)
            return np.einsum("skj,skm->jm", g, self.B).ravel()

        return self._cached("gradient", theta, compute)

    def torque(self, theta: Array) -> Array:
        return self._cached("torque", theta, lambda states: self.torques(*states).ravel())

    def torque_jacobian(self, theta: Array) -> Array:
        def compute(states):
            tau, D = self.torques.derivatives(*states)
            return np.einsum("skaj,skm->kajm", D, self.B).reshape(tau.size, -1)

        return self._cached("jacobian", theta, compute)


class _Callback(ca.Callback):
    """A CasADi function of a dense vector backed by numpy, with an exact dense Jacobian."""

    def __init__(self, name: str, size_in: int, size_out: int, value, jacobian, opts=None):
        ca.Callback.__init__(self)
        self.size_in, self.size_out = size_in, size_out
        self.value, self.jacobian_value = value, jacobian
        self.construct(name, opts or {})

    def get_n_in(self):
        return 1

    def get_n_out(self):
        return 1

    def get_sparsity_in(self, i):
        return ca.Sparsity.dense(self.size_in, 1)

    def get_sparsity_out(self, i):
        return ca.Sparsity.dense(self.size_out, 1)

    def eval(self, arg):
        return [ca.DM(np.reshape(self.value(np.asarray(arg[0], dtype=float).ravel()), (-1, 1)))]

    def has_jacobian(self):
        return True

    def get_jacobian(self, name, inames, onames, opts):
        self._jac = _Jacobian(name, self, opts)
        return self._jac


class _Jacobian(ca.Callback):
    def __init__(self, name: str, parent: _Callback, opts):
        ca.Callback.__init__(self)
        self.parent = parent
        self.construct(name, opts)

    def get_n_in(self):
        return 2

    def get_n_out(self):
        return 1

    def get_sparsity_in(self, i):
        size = self.parent.size_in if i == 0 else self.parent.size_out
        return ca.Sparsity.dense(size, 1)

    def get_sparsity_out(self, i):
        return ca.Sparsity.dense(self.parent.size_out, self.parent.size_in)

    def eval(self, arg):
        J = self.parent.jacobian_value(np.asarray(arg[0], dtype=float).ravel())
        return [ca.DM(np.reshape(J, (self.parent.size_out, self.parent.size_in)))]


def _solve(information, space, limits, torques, options, points, theta0):
    """One IPOPT solve from theta0: (theta, status, iterations, criterion history)."""
    n, m = space.n, space.per_joint
    kappa = margin_factor(space.harmonics, points)
    problem = DesignProblem(information, space, torques, options.criterion, points)
    size = n * m
    K = points
    objective = _Callback("criterion", size, 1, problem.objective, problem.objective_gradient)
    torque = _Callback("torques", size, K * n, problem.torque, problem.torque_jacobian)
    x = ca.MX.sym("theta", size)
    # linear rows: value[k, i] = offset[k, i] + B[k] . z_i  ->  A (K n, n m)
    rows, lower, upper = [], [], []
    centre, half = limits.centre, limits.half
    bounds = [
        (centre - kappa * half, centre + kappa * half),
        (-kappa * limits.velocity, kappa * limits.velocity),
        (-kappa * limits.acceleration, kappa * limits.acceleration),
    ]
    eye = np.eye(n)
    for B, offset, (lo, hi) in zip(problem.B, problem.offset, bounds, strict=True):
        rows.append(np.einsum("km,ij->kijm", B, eye).reshape(K * n, size))
        lower.append((lo[None, :] - offset).ravel())
        upper.append((hi[None, :] - offset).ravel())
    A = np.vstack(rows)
    g = ca.vertcat(ca.mtimes(_sparse(A), x), torque(x))
    lbg = np.concatenate([*lower, np.tile(-kappa * limits.torque, K)])
    ubg = np.concatenate([*upper, np.tile(kappa * limits.torque, K)])
    nlp = {"x": x, "f": objective(x), "g": g}
    opts = {
        "ipopt.hessian_approximation": "limited-memory",
        "ipopt.max_iter": options.max_iterations,
        "ipopt.tol": options.tolerance,
        "ipopt.acceptable_tol": 1.0,
        "ipopt.acceptable_iter": 5,
        "ipopt.acceptable_obj_change_tol": options.tolerance,
        "ipopt.print_level": 5 if options.verbose else 0,
        "print_time": False,
        "ipopt.sb": "yes",
        "ipopt.print_timing_statistics": "yes" if options.verbose else "no",
    }
    solver = ca.nlpsol("excitation", "ipopt", nlp, opts)
    seen = interrupts_received()
    with interrupt_warnings_dropped():
        result = solver(x0=theta0, lbg=lbg, ubg=ubg)
    reraise_interrupt(seen)  # IPOPT caught a Ctrl-C or SIGTERM in a callback
    stats = solver.stats()
    theta = np.asarray(result["x"], dtype=float).ravel()
    return (
        theta,
        str(stats.get("return_status", "")),
        int(stats.get("iter_count", 0)),
        problem.history,
    )
