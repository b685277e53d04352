"""Closure residuals, their derivatives, the passive-joint solve and the motion maps.

With ``c(q, eta)`` the stacked closure residual (m rows) of a
:class:`~workbench.closed_chains.model.ClosedChain`, ``K = dc/dq`` (m x n)
split into actuated and passive columns ``K_a``, ``K_p``:

* passive solve: Newton's method on ``c(q_a, q_p) = 0`` for ``q_p`` with
  least-squares steps (redundant rows allowed), by predictor-corrector
  continuation from a closed guess; where ``K_p`` loses rank the
  configuration is singular;
* velocity map: ``dq = S dq_a`` with ``S_a = I``, ``S_p = -K_p^+ K_a``
  (``S = dq / dq_a``);
* acceleration: ``ddq = S ddq_a + sigma``, ``sigma_p = -K_p^+ c''[dq, dq]``
  from ``d^2 c / dt^2 = K ddq + c''[dq, dq] = 0``.

Directional derivatives ``c'[a]``, ``c''[a, b]`` and ``c'''[a, a, w]`` are
exact, from the loop products of :mod:`workbench.closed_chains.loops`
(every residual is linear in the loop's relative pose). A direction is a
pair (u, e): joint values (N, D, n) and eta (N, D, n + 1, 6) or None.

Arrays carry the sample axis first: q (N, n), K (N, m, n), S (N, n, a).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike

import workbench.closed_chains.loop_kernels as loop_kernels
from workbench.arrays import as_samples
from workbench.closed_chains.closures import misalignment
from workbench.closed_chains.closures import residual as closure_residual
from workbench.closed_chains.loops import LoopState
from workbench.closed_chains.model import ClosedChain
from workbench.errors import WorkbenchError
from workbench.lie import Array

Direction = tuple[Array, Array | None]

# Newton's method stops below this residual (m or rad).
TOLERANCE = 1e-13
# sigma_min / sigma_max of K_p below this is a singular configuration.
SINGULAR = 1e-7
# Largest step of the actuated joints in one continuation step (rad or m).
CONTINUATION_STEP = 0.2
# Longest path of the actuated joints followed (rad or m; 16 turns): a longer one is a
# diverged state (e.g. an open-loop simulation), not a motion.
MAX_PATH = 100.0
# Largest Newton correction after a prediction, as a fraction of the predicted
# move (a correction of the size of the move would jump to another assembly branch).
CORRECTION = 0.25


class Closures:
    """The closures of ``model`` at N configurations q (N, n): residual and derivatives.

    ``with_eta``: the loops keep their eta factors, for derivatives in eta.
    """

    def __init__(self, model: ClosedChain, q: Array, with_eta: bool = False):
        self.model = model
        self.q = q
        self.with_eta = with_eta
        self.loops = [LoopState(model.tree, loop, q) for loop in model.loop_layouts[with_eta]]

    def _stack(self, per_closure: list[Array]) -> Array:
        kinds = (c.kind for c in self.model.closures)
        return np.concatenate(
            [closure_residual(kind, X) for kind, X in zip(kinds, per_closure, strict=True)],
            axis=-1,
        )

    def _coefficients(self, a: Direction) -> Array:
        """Directions as global coefficients (N, D, n) or (N, D, n + 6 (n + 1)) with eta."""
        u, e = a
        if e is None:
            return u
        return np.concatenate([u, e.reshape(*e.shape[:2], -1)], axis=2)

    def _each(self, kernel, *directions: Direction) -> Array:
        coefficients = [self._coefficients(d) for d in directions]
        return np.concatenate(
            [kernel(c.kind, loop.T, loop.factor, loop.index, loop.X, *coefficients, c.rows)
             for c, loop in zip(self.model.closures, self.loops, strict=True)], axis=-1,
        )  # fmt: skip

    def residual(self) -> Array:
        """c (N, m)."""
        return self._stack([loop.X for loop in self.loops])

    def first(self, a: Direction) -> Array:
        """``c'[a]`` (N, D, m)."""
        return self._each(loop_kernels.first, a)

    def second(self, a: Direction, b: Direction) -> Array:
        """``c''[a, b]`` (N, D, m) for paired directions."""
        return self._each(loop_kernels.second, a, b)

    def third(self, a: Direction, w: Direction) -> Array:
        """``c'''[a, a, w]`` (N, D, m) for paired directions, a without eta."""
        return self._each(loop_kernels.third, a, w)

    def first_jacobian(self, b: Direction, with_eta: bool = False) -> Array:
        """``d c'[b] / dx`` (N, D, m, n) or, ``with_eta``, (N, D, m, n + 6 (n + 1)).

        Column i is ``c''[e_i, b]``: the derivative of ``K b`` along the unit
        joint value (or eta component) i.
        """
        N, D = b[0].shape[:2]
        n = self.model.n
        width = n + 6 * (n + 1) if with_eta else n
        B = self._coefficients(b)
        parts = []
        for closure, loop in zip(self.model.closures, self.loops, strict=True):
            keep = loop.index < width
            G = loop_kernels.first_jacobian(
                closure.kind, np.ascontiguousarray(loop.T[:, keep]), loop.factor[keep],
                loop.index[keep], loop.X, B, closure.rows,
            )  # fmt: skip
            out = np.zeros((N, D, closure.rows, width))
            np.add.at(np.moveaxis(out, 3, 0), loop.index[keep], np.moveaxis(G, 3, 0))
            parts.append(out)
        return np.concatenate(parts, axis=2)

    def jacobian(self, with_eta: bool = False) -> Array:
        """``K = dc/dq`` (N, m, n), or ``dc/d[q, eta]`` (N, m, n + 6 (n + 1)) ``with_eta``."""
        N, n = self.q.shape
        width = n + 6 * (n + 1) if with_eta else n
        units = np.broadcast_to(np.eye(width), (N, width, width))
        eta = units[:, :, n:].reshape(N, width, n + 1, 6) if with_eta else None
        return np.swapaxes(self.first((units[:, :, :n], eta)), 1, 2)

    def misalignment(self) -> Array:
        """Misalignment angle (N, closures) of every closure (closures module)."""
        kinds = (c.kind for c in self.model.closures)
        return np.stack(
            [misalignment(kind, loop.X) for kind, loop in zip(kinds, self.loops, strict=True)],
            axis=-1,
        )


def stack(*directions: Direction) -> Direction:
    """Directions side by side along D (eta None only when every eta is None)."""
    u = np.concatenate([d[0] for d in directions], axis=1)
    if all(d[1] is None for d in directions):
        return u, None
    N, n = u.shape[0], u.shape[2]
    e = [np.zeros((N, d[0].shape[1], n + 1, 6)) if d[1] is None else d[1] for d in directions]
    return u, np.concatenate(e, axis=1)


def joint_directions(N: int, n: int) -> Direction:
    """The n unit joint directions for N samples."""
    return np.broadcast_to(np.eye(n), (N, n, n)), None


def eta_directions(N: int, n: int) -> Direction:
    """The 6 (n + 1) unit eta directions for N samples."""
    k = 6 * (n + 1)
    return np.zeros((N, k, n)), np.broadcast_to(np.eye(k).reshape(k, n + 1, 6), (N, k, n + 1, 6))


def vectors(x: Array) -> Direction:
    """One joint direction per sample from x (N, n)."""
    return x[:, None, :], None


# ------------------------------------------------------------ public maps
def _configurations(model: ClosedChain, q: ArrayLike, what: str = "q") -> tuple[Array, bool]:
    return as_samples(q, model.n, what, model.tree.joint_names)


def residual(model: ClosedChain, q: ArrayLike) -> Array:
    """Closure residual c(q) (N, m) or (m,) (module docstring)."""
    q, batched = _configurations(model, q)
    r = Closures(model, q).residual()
    return r if batched else r[0]


def constraint_jacobian(model: ClosedChain, q: ArrayLike) -> Array:
    """``K = dc/dq`` (N, m, n) or (m, n)."""
    q, batched = _configurations(model, q)
    K = Closures(model, q).jacobian()
    return K if batched else K[0]


class PassiveSolver:
    """``K_p^+`` at N configurations; singular ones refused (or flagged: ``strict``).

    A square K_p (as many independent closure rows as passive joints) is
    inverted by LU and its conditioning estimated as ``|K_p|_F |K_p^-1|_F``;
    redundant rows go through the SVD (least squares). A configuration whose
    estimated inverse condition number is below SINGULAR is singular.
    """

    def __init__(self, model: ClosedChain, K: Array, strict: bool = True):
        self.model = model
        self.K = K
        K_p = K[:, :, model.passive]
        if K_p.shape[1] == K_p.shape[2]:
            self.pinv, ratio = _inverse(K_p)
        else:
            U, s, Vt = np.linalg.svd(K_p, full_matrices=False)
            ratio = s[:, -1] / np.maximum(s[:, 0], np.finfo(float).tiny)
            inverse = np.where(ratio[:, None] < SINGULAR, 0.0, 1.0 / np.maximum(s, 1e-300))
            self.pinv = np.swapaxes(Vt, 1, 2) @ (np.swapaxes(U, 1, 2) * inverse[:, :, None])
        self.singular = ~(ratio >= SINGULAR)
        if strict and self.singular.any():
            bad = int(np.flatnonzero(self.singular)[0])
            raise WorkbenchError(
                f"{model.name}: configuration {bad} (of {len(K)}) is singular for the passive "
                f"joints (K_p condition number {1 / max(ratio[bad], 1e-300):.3g}): the closure "
                "does not fix them there"
            )
        self.pinv[self.singular] = 0.0

    def solve(self, rhs: Array) -> Array:
        """``K_p^+ rhs`` for rhs (N, m, k) -> (N, p, k)."""
        return self.pinv @ rhs

    def lift(self, rhs: Array) -> Array:
        """Tree joint values (N, n, k) with zero actuated rows and passive ``-K_p^+ rhs``."""
        out = np.zeros((rhs.shape[0], self.model.n, rhs.shape[2]))
        out[:, self.model.passive] = -self.solve(rhs)
        return out

    def velocity_map(self) -> Array:
        """S (N, n, a)."""
        S = self.lift(self.K[:, :, self.model.active])
        S[:, self.model.active] = np.eye(len(self.model.active))
        return S


def _inverse(K_p: Array) -> tuple[Array, Array]:
    """Inverses (N, p, p) of square K_p and their estimated inverse condition numbers (N,)."""
    inverse = np.zeros_like(K_p)
    ratio = np.zeros(len(K_p))
    invertible = np.abs(np.linalg.det(K_p)) > 0.0
    if invertible.any():
        inverse[invertible] = np.linalg.inv(K_p[invertible])
        norms = np.linalg.norm(K_p[invertible], axis=(1, 2))
        ratio[invertible] = 1.0 / (norms * np.linalg.norm(inverse[invertible], axis=(1, 2)))
    return inverse, ratio * K_p.shape[1]  # the Frobenius estimate is p times too pessimistic


def velocity_map(model: ClosedChain, q: ArrayLike) -> Array:
    """``S = dq / dq_a`` (N, n, a) or (n, a) at closed configurations q."""
    q, batched = _configurations(model, q)
    S = PassiveSolver(model, Closures(model, q).jacobian()).velocity_map()
    return S if batched else S[0]


def coordinates(model: ClosedChain, x: ArrayLike, what: str, idle: ArrayLike = 0.0) -> Array:
    """Values (N, a + i) of the independent coordinates (``model.active``) from ``x``.

    ``x`` (N, a + i) is returned as samples; motor values alone (N, a) get
    the idle joints' values ``idle`` (default 0: idle motions at rest).
    """
    a, full = len(model.actuated), len(model.active)
    x = np.asarray(x, dtype=float)
    if full > a and x.shape[-1:] == (a,):
        x = np.atleast_2d(x)
        x = np.concatenate([x, np.broadcast_to(idle, (len(x), full - a))], axis=1)
    names = model.actuated + model.idle
    return as_samples(x, full, what, names)[0]


def velocities(model: ClosedChain, q: ArrayLike, dqa: ArrayLike) -> Array:
    """Joint velocities ``S dq_a`` (N, n) from the independent ones (N, a + i) or motors'
    (N, a; idle joints at rest)."""
    q, batched = _configurations(model, q)
    dqa = coordinates(model, dqa, "dqa")
    S = PassiveSolver(model, Closures(model, q).jacobian()).velocity_map()
    dq = (S @ dqa[..., None])[..., 0]
    return dq if batched else dq[0]


def acceleration_bias(closures: Closures, dq: Array, solver: PassiveSolver) -> Array:
    """sigma (N, n): the joint accelerations at zero actuated acceleration."""
    c2 = closures.second(vectors(dq), vectors(dq))  # c''[dq, dq]
    return solver.lift(np.swapaxes(c2, 1, 2))[..., 0]


def accelerations(model: ClosedChain, q: ArrayLike, dq: ArrayLike, ddqa: ArrayLike) -> Array:
    """Joint accelerations ``S ddq_a + sigma`` (N, n) at a closed state (q, dq), ``ddqa``
    as ``dqa`` in :func:`velocities`."""
    q, batched = _configurations(model, q)
    dq, _ = _configurations(model, dq, "dq")
    ddqa = coordinates(model, ddqa, "ddqa")
    closures = Closures(model, q)
    solver = PassiveSolver(model, closures.jacobian())
    ddq = (solver.velocity_map() @ ddqa[..., None])[..., 0]
    ddq += acceleration_bias(closures, dq, solver)
    return ddq if batched else ddq[0]


def solve_passive(model: ClosedChain, qa: ArrayLike, guess: ArrayLike | None = None) -> Array:
    """Closed configurations (N, n) with independent coordinates ``qa`` (N, a + i): the
    actuated joints then the idle ones, or the actuated joints alone (N, a; the idle
    joints then keep the values of ``guess``).

    Predictor-corrector continuation from ``guess`` (a closed configuration,
    default the model's home) along the straight path of the actuated
    joints, per sample: each step predicts the passive joints along ``S``
    and corrects them by Newton's method; a step that does not converge,
    meets a singular configuration or needs a correction larger than
    CORRECTION times the predicted move or changes the assembly mode (the
    sign of ``det(B^T K_p)``, B the range of K_p at the guess: it flips only
    through a singularity) is halved, so the assembly mode of the guess is
    kept. Raises WorkbenchError naming the sample when the closure cannot
    be met (motors outside the workspace) or the path crosses a singularity.
    """
    q, _ = closed_configurations(model, qa, guess)
    return q if np.ndim(qa) == 2 else q[0]


def closed_configurations(
    model: ClosedChain, qa: ArrayLike, guess: ArrayLike | None = None,
    closures: Closures | None = None, strict: bool = True,
) -> tuple[Array, Closures]:  # fmt: skip
    """:func:`solve_passive` for samples (N, a + i) or (N, a): the closed configurations
    (N, n) and their :class:`Closures` (for the derivatives at them, without building
    the loops again). ``closures``: those of ``guess`` (N, n), when the caller has them
    (e.g. from the previous call along a simulation). ``strict=False``: a sample whose
    closure cannot be followed gets NaN and the others go on (an optimiser's trial
    point with one knot beyond the workspace), instead of the error naming it."""
    start = model.home if guess is None else guess
    qa = coordinates(model, qa, "qa", np.asarray(start, dtype=float)[..., model.idle_indices])
    N = len(qa)
    q, _ = _configurations(model, np.broadcast_to(start, (N, model.n)), "guess")
    ok, q, closures = _newton(model, q.copy(), np.ones(N, dtype=bool), 30, closures)
    failed = ~ok
    if strict and failed.any():
        i = int(np.flatnonzero(failed)[0])
        raise WorkbenchError(
            f"{model.name}: the starting configuration of sample {i} is not near a closed "
            "configuration (Newton's method on the passive joints does not converge there)"
        )
    K = closures.jacobian()  # at q, kept up to date with q below
    K_p = K[:, :, model.passive]
    basis = np.linalg.svd(K_p, full_matrices=False)[0]  # range of K_p at the guess
    mode = _mode(basis, K_p)
    begin = q[:, model.active].copy()
    distance = np.abs(qa - begin).max(axis=1)
    far = ~(distance <= MAX_PATH)  # also NaN and inf
    if strict and far.any():
        i = int(np.flatnonzero(far)[0])
        raise WorkbenchError(
            f"{model.name}: actuated joints {np.round(qa[i], 6).tolist()} (sample {i}) are "
            f"{distance[i]:.3g} from the starting configuration; the closure is followed along "
            f"paths of at most {MAX_PATH:g} (rad or m)"
        )
    failed |= far
    done = np.where(failed, 1.0, 0.0)
    first_step = np.minimum(1.0, CONTINUATION_STEP / np.maximum(distance, 1e-300))
    step = first_step.copy()
    idx, ok = np.flatnonzero(done < 1.0), np.ones(0, dtype=bool)
    while np.any(done < 1.0):
        idx = np.flatnonzero(done < 1.0)
        goal = np.minimum(done[idx] + step[idx], 1.0)
        target = begin[idx] + (qa - begin)[idx] * goal[:, None]
        ok, q_new, closures = _corrected_step(model, q[idx], K[idx], target, basis[idx], mode[idx])
        q[idx[ok]] = q_new[ok]
        K[idx[ok]] = closures.jacobian()[ok]
        done[idx[ok]] = goal[ok]
        step[idx[ok]] = np.minimum(2.0 * step[idx[ok]], first_step[idx[ok]])
        step[idx[~ok]] /= 2.0
        stuck = idx[~ok][step[idx[~ok]] < 1e-6 * first_step[idx[~ok]]]
        if strict and stuck.size:
            i = int(stuck[0])
            raise WorkbenchError(
                f"{model.name}: the closure cannot be followed to actuated joints "
                f"{np.round(qa[i], 6).tolist()} (sample {i}): stopped at "
                f"{np.round(q[i, model.active], 6).tolist()}, a singular configuration or the "
                "workspace boundary"
            )
        failed[stuck] = True
        done[stuck] = 1.0
    if len(idx) < N or not ok.all():  # the last step's closures are not those of every q
        closures = Closures(model, q)
    if strict:
        _check_branch(closures)
    else:
        failed |= closures.misalignment().max(axis=1, initial=0.0) > np.pi / 2
        q[failed] = np.nan
    return q, closures


def _mode(basis: Array, K_p: Array) -> Array:
    """Assembly mode (N,): the sign of det(basis^T K_p), which flips only through a singularity."""
    return np.sign(np.linalg.det(np.swapaxes(basis, 1, 2) @ K_p))


def _corrected_step(
    model: ClosedChain, q: Array, K: Array, target: Array, basis: Array, mode: Array
) -> tuple[np.ndarray, Array, Closures]:
    """One continuation step per sample from q (closure Jacobian K there): (success mask,
    new configurations, their closures)."""
    solver = PassiveSolver(model, K, strict=False)
    move = target - q[:, model.active]
    predicted = q + (solver.velocity_map() @ move[..., None])[..., 0]
    predicted[:, model.active] = target
    ok, x, closures = _newton(model, predicted.copy(), ~solver.singular)
    ok &= _mode(basis, closures.jacobian()[:, :, model.passive]) == mode
    moved = np.abs(predicted - q).max(axis=1)
    ok &= np.abs(x - predicted).max(axis=1) <= CORRECTION * moved + 1e-12
    return ok, x, closures


def _newton(
    model: ClosedChain, x: Array, ok: np.ndarray, iterations: int = 8,
    closures: Closures | None = None,
) -> tuple[np.ndarray, Array, Closures]:  # fmt: skip
    """Newton's method on the passive joints of the samples still ``ok``: (converged, x,
    the closures at x); ``closures``: those at the starting x, when known."""
    for _ in range(iterations):
        if closures is None:
            closures = Closures(model, x.copy())
        r = closures.residual()
        converged = np.abs(r).max(axis=1) < TOLERANCE
        if np.all(converged | ~ok):
            break
        newton = PassiveSolver(model, closures.jacobian(), strict=False)
        ok &= ~newton.singular
        x[:, model.passive] -= newton.solve(r[..., None])[..., 0] * (~converged)[:, None]
        closures = None
    else:
        closures = Closures(model, x.copy())
        r = closures.residual()
    residual_norm = np.abs(r).max(axis=1)
    return ok & np.isfinite(residual_norm) & (residual_norm < 1e3 * TOLERANCE), x, closures


def _check_branch(closures: Closures) -> None:
    """Refuse the spurious roots of rotation and revolute closures (closures module)."""
    model = closures.model
    angle = closures.misalignment()
    if np.any(angle > np.pi / 2):
        i, k = np.unravel_index(int(np.argmax(angle)), angle.shape)
        raise WorkbenchError(
            f"{model.name}: closure '{model.closures[k].name}' closed with its frames "
            f"{np.rad2deg(angle[i, k]):.1f} deg apart at sample {i}: a spurious half-turn root"
        )


def independent_rows(model: ClosedChain, q: Array | None = None) -> np.ndarray:
    """Rows of c that are independent at ``q`` (default home): pivoted QR of K^T."""
    from scipy.linalg import qr

    K = constraint_jacobian(model, model.home if q is None else q)
    _, R, pivots = qr(K.T, pivoting=True, mode="economic")
    diagonal = np.abs(np.diag(R))
    rank = int(np.sum(diagonal > 1e-9 * max(diagonal.max(initial=0.0), 1.0)))
    return np.sort(pivots[:rank])


def closure_rank(K: Array) -> int:
    """Rank of a closure Jacobian K (m, n): singular values above 1e-9 of the largest (or 1)."""
    s = np.linalg.svd(K, compute_uv=False)
    return int(np.sum(s > 1e-9 * max(s.max(initial=0.0), 1.0)))


def mobility(model: ClosedChain, q: Array | None = None) -> int:
    """Tree velocities minus the closures' rank at ``q`` (default home)."""
    return model.n - closure_rank(constraint_jacobian(model, model.home if q is None else q))


def check_assembly(model: ClosedChain) -> ClosedChain:
    """``model`` with its idle joints, once its home is closed and its motors independent.

    Refused: a home that is not closed (1e-9), motors that are not
    independent there (a motor whose unit velocity no passive velocities
    complete, e.g. two motors the closures couple), a passive joint that
    some closure cannot reach. Idle motions (mobility above the number of
    motors, the motions the closures leave with the motors still: null(K_p))
    get coordinates: the idle joints, chosen by pivoted QR of the null space's
    rows (the joints that move most along it, :func:`_idle_columns`), so that the motors
    and idle joints fix every other joint (coordinate partitioning, [Wehage1982]).
    """
    r = residual(model, model.home)
    if np.abs(r).max() > 1e-9:
        row = int(np.argmax(np.abs(r)))
        rows = np.cumsum([c.rows for c in model.closures])
        closure = model.closures[int(np.searchsorted(rows, row, side="right"))]
        raise WorkbenchError(
            f"{model.where}: the home configuration is not closed: closure '{closure.name}' "
            f"has residual {abs(r[row]):.3g} (set [home] to a closed configuration)"
        )
    K = constraint_jacobian(model, model.home)
    motors = model.active[: len(model.actuated)]
    others = np.setdiff1d(np.arange(model.n), motors)
    K_p = K[:, others]
    completion = np.linalg.lstsq(K_p, -K[:, motors], rcond=None)[0]
    gap = np.abs(K_p @ completion + K[:, motors]).max(axis=0)
    dependent = [model.actuated[k] for k in np.flatnonzero(gap > 1e-9 * max(1.0, np.abs(K).max()))]
    if dependent:
        raise WorkbenchError(
            f"{model.where}: the motors are not independent at the closed configuration: "
            f"{', '.join(dependent)} cannot move with the other motors still (the closures tie "
            "them to the other motors)"
        )
    rank = closure_rank(K_p)
    idle = len(others) - rank
    if idle == 0:
        return replace(model, idle=())
    null = np.linalg.svd(K_p)[2][rank:]  # (idle, passive): the idle motions
    names = tuple(model.tree.joint_names[others[k]] for k in sorted(_idle_columns(null)))
    return replace(model, idle=names)


TIE = 1e-6  # relative: columns of the idle motions this close in norm are equal choices


def _idle_columns(null: Array) -> list[int]:
    """Columns of ``null`` (idle, passive) that span its rows: greedy column pivoting as
    in pivoted QR [Wehage1982], the largest remaining column first, and among columns equal
    to ``TIE`` the first (a rod spinning between two ball joints moves both ends alike:
    the choice rounding made between them followed the last bits of the URDF's parse)."""
    remaining = null.copy()
    chosen: list[int] = []
    for _ in range(len(null)):
        norms = np.linalg.norm(remaining, axis=0)
        norms[chosen] = 0.0
        k = int(np.flatnonzero(norms >= (1.0 - TIE) * norms.max())[0])
        chosen.append(k)
        u = remaining[:, k] / norms[k]
        remaining -= np.outer(u, u @ remaining)
    return chosen
