"""Hand batched numpy functions with analytic Jacobians to CasADi.

A :class:`BatchedCallback` wraps ``evaluate(X, P, jacobian)`` where ``X`` is
(K, n) (one row per knot) and ``P`` (m,) a parameter shared by all knots,
returning ``Y`` (K, o) and, when asked, ``dY/dX`` (K, o, n) and ``dY/dP``
(K, o, m). CasADi sees a function of the stacked column ``vec(X^T)`` (knot
by knot) and ``P``, with output ``vec(Y^T)``; its Jacobian is declared with
its true sparsity (block diagonal in the knots, dense in P), so IPOPT gets
the exact sparse constraint Jacobian from one batched call for all knots.

Second derivatives, which IPOPT's exact Hessian of the Lagrangian needs,
enter through reverse mode: the callback offers its adjoint
``(X, P, Y, lam) -> (J_X^T lam, J_P^T lam)`` knot by knot, and the adjoint
offers its own Jacobian. Its X-X part is block diagonal (one n x n block
per knot, sum_a lam_a d2Y_a/dX2) and comes from central differences of
the analytic Jacobians: knots are independent, so perturbing input column
c at every knot at once gives column c of all K blocks in two batched
calls (2 (n + m) calls in all; columns in which Y is affine, such as
accelerations in inverse dynamics, are skipped and filled by symmetry;
a shared input in which Y is affine, such as inertial parameters, costs
nothing: its mixed block comes with the X columns). Along inputs in which Y
is at most quadratic (velocities and accelerations in inverse dynamics and
in the closures' velocity and acceleration levels) the Jacobian is at most
quadratic too, so its central difference is exact for any step: a unit step
there leaves only rounding; elsewhere the step is ``STEP``.
The lam part is the analytic Jacobian. A callback may instead be given
``second_derivatives(X, P, lam)``, the exact blocks as
:meth:`BatchedCallback.adjoint_derivatives` returns them
(:mod:`workbench.ocp.model_sx`: CasADi AD of the same functions in SX);
then no differences are taken.

With ``finite_differences=True`` the same callback offers no Jacobian and
CasADi falls back to its own finite differences (used by the benchmark).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import casadi as ca
import numpy as np

Evaluate = Callable[..., tuple[np.ndarray, ...]]
STEP = 1e-6  # central-difference step of the second derivatives (inputs of O(1))


class _Buffered(ca.Callback):
    """Numeric evaluation on CasADi's raw buffers (no DM conversions, which cost more than
    the model on a hundred knots): subclasses map the inputs (dense arrays) to the
    structural nonzeros of each output in CasADi's column-major order."""

    def has_eval_buffer(self) -> bool:
        return True

    def eval_buffer(self, arg, res) -> int:
        # copies: CasADi reuses its buffers, and the callbacks cache by their inputs
        inputs = [np.frombuffer(a, dtype=float).copy() for a in arg]
        for buffer, nonzeros in zip(res, self.nonzeros(inputs), strict=True):
            if buffer is not None:
                np.frombuffer(buffer, dtype=float)[:] = nonzeros
        return 0

    def nonzeros(self, arg: list[np.ndarray]) -> list[np.ndarray]:
        raise NotImplementedError


class BatchedCallback(_Buffered):
    """A CasADi function of (vec(X), P) backed by a batched numpy evaluation."""

    def __init__(
        self,
        name: str,
        evaluate: Evaluate,
        knots: int,
        n_in: int,
        n_out: int,
        n_shared: int = 0,
        finite_differences: bool = False,
        affine_inputs: Sequence[int] = (),
        affine_shared: bool = False,
        quadratic_inputs: Sequence[int] = (),
        second_derivatives: Evaluate | None = None,
    ):
        ca.Callback.__init__(self)
        self.evaluate = evaluate
        self.knots, self.n_in, self.n_out, self.n_shared = knots, n_in, n_out, n_shared
        self.finite_differences = finite_differences
        self.curved_inputs = [c for c in range(n_in) if c not in set(affine_inputs)]
        # central differences of the Jacobian are exact along inputs in which Y is at most
        # quadratic (whatever the step): a unit step there leaves only rounding
        self.steps = np.where(np.isin(np.arange(n_in), quadratic_inputs), 1.0, STEP)
        self.affine_shared = affine_shared
        self.second_derivatives = second_derivatives
        self._cache_key: bytes | None = None
        self._cache: tuple[np.ndarray, ...] = ()
        self.evaluations = 0
        self.interrupted = False
        self.error: Exception | None = None
        opts = {"enable_fd": True, "fd_method": "central"} if finite_differences else {}
        self.construct(name, opts)

    # --------------------------------------------------------------- shape
    def get_n_in(self) -> int:
        return 2 if self.n_shared else 1

    def get_n_out(self) -> int:
        return 1

    def get_sparsity_in(self, i: int) -> ca.Sparsity:
        return ca.Sparsity.dense(self.knots * self.n_in if i == 0 else self.n_shared, 1)

    def get_sparsity_out(self, i: int) -> ca.Sparsity:
        return ca.Sparsity.dense(self.knots * self.n_out, 1)

    def has_jac_sparsity(self, oind: int, iind: int) -> bool:
        return True

    def get_jac_sparsity(self, oind: int, iind: int, symmetric: bool) -> ca.Sparsity:
        return self.jacobian_sparsity(shared=iind == 1)[0]

    # ---------------------------------------------------------- evaluation
    def _arguments(self, arg) -> tuple[np.ndarray, np.ndarray]:
        X = np.asarray(arg[0], dtype=float).reshape(self.knots, self.n_in)
        P = np.asarray(arg[1], dtype=float).ravel() if self.n_shared else np.zeros(0)
        return X, P

    def _evaluate(self, X: np.ndarray, P: np.ndarray) -> tuple[np.ndarray, ...]:
        key = X.tobytes() + P.tobytes()
        if key != self._cache_key:
            self.evaluations += 1
            self._cache = self.run_model(X, P, not self.finite_differences)
            self._cache_key = key
        return self._cache

    def raise_if_failed(self) -> None:
        """Raise the Ctrl-C or the error an earlier evaluation met (see :meth:`run_model`)."""
        if self.interrupted:
            raise KeyboardInterrupt
        if self.error is not None:
            raise self.error

    def run_model(self, X: np.ndarray, P: np.ndarray, jacobian: bool) -> tuple[np.ndarray, ...]:
        """``evaluate`` that remembers a Ctrl-C or an error (CasADi turns both into an
        evaluation failure and would go on).

        After the first one every further call raises too, so that IPOPT stops
        at once; the caller checks ``interrupted`` and ``error`` after the solve.
        """
        self.raise_if_failed()
        try:
            return self.evaluate(X, P, jacobian)
        except KeyboardInterrupt:
            self.interrupted = True
            raise
        except Exception as exc:
            self.error = exc
            raise

    def nonzeros(self, arg):
        return [self._evaluate(*self._arguments(arg))[0].ravel()]

    # ------------------------------------------------------------ Jacobian
    def has_jacobian(self) -> bool:
        return not self.finite_differences

    def get_jacobian(self, name, inames, onames, opts):
        self._jacobian = _BatchedJacobian(name, self, opts)
        return self._jacobian

    def jacobians(self, X: np.ndarray, P: np.ndarray) -> list[np.ndarray]:
        """[dY/dX (K, o, n), dY/dP (K, o, m)] (the second only with a shared input)."""
        return list(self._evaluate(X, P)[1:])

    def has_reverse(self, nadj: int) -> bool:
        return nadj == 1 and not self.finite_differences

    def get_reverse(self, nadj, name, inames, onames, opts):
        self._adjoint = _BatchedAdjoint(name, self, opts)
        return self._adjoint

    def adjoint(self, X: np.ndarray, P: np.ndarray, lam: np.ndarray) -> list[np.ndarray]:
        """[J_X^T lam (K, n), sum_k J_P,k^T lam_k (m,)] for multipliers lam (K, o)."""
        return _contract(self._evaluate(X, P)[1:], lam)

    def adjoint_derivatives(
        self, X: np.ndarray, P: np.ndarray, lam: np.ndarray
    ) -> tuple[np.ndarray, ...]:
        """Derivatives of :meth:`adjoint` by X and P: ``second_derivatives`` when given,
        else central differences of the Jacobians.

        Returns d(J_X^T lam)/dX (K, n, n), and with a shared input also
        d(J_X^T lam)/dP (K, n, m) (whose transpose is d(J_P^T lam)/dX, knot by
        knot) and d(J_P^T lam)/dP (m, m); the X-X and P-P blocks are symmetrised.
        """
        if self.second_derivatives is not None:
            self.raise_if_failed()
            return self.second_derivatives(X, P, lam)
        n, m, K = self.n_in, self.n_shared, self.knots

        def difference(dX, dP):
            plus = _contract(self.run_model(X + dX, P + dP, True)[1:], lam, per_knot=True)
            minus = _contract(self.run_model(X - dX, P - dP, True)[1:], lam, per_knot=True)
            return [(a - b) / (2 * STEP) for a, b in zip(plus, minus, strict=True)]

        xx, xp, pp = np.zeros((K, n, n)), np.zeros((K, n, m)), np.zeros((m, m))
        # Y affine in P: d2Y/dP2 = 0 and the mixed block comes with the X columns
        columns = np.arange(n) if m and self.affine_shared else np.array(self.curved_inputs)
        # all X columns at once: one batched call on the 2 C K perturbed knots
        steps = self.steps[columns]
        shifts = (steps[:, None] * np.eye(n)[columns])[:, None, :]  # (C, 1, n)
        stacked = np.concatenate([X + shifts, X - shifts]).reshape(-1, n)
        jacobians = self.run_model(stacked, P, True)[1:]
        lam_stacked = np.tile(lam, (2 * len(columns), 1))
        by_x = [
            (d[: len(columns)] - d[len(columns) :]) / (2 * steps[:, None, None])
            for d in (
                c.reshape(2 * len(columns), K, -1)
                for c in _contract(jacobians, lam_stacked, per_knot=True)
            )
        ]
        xx[:, :, columns] = np.moveaxis(by_x[0], 0, -1)
        if m:
            xp[:, columns, :] = np.moveaxis(by_x[1], 0, 1)
        if m and not self.affine_shared:
            for c in range(m):
                xp[:, :, c], by_p = difference(np.zeros(n), STEP * np.eye(m)[c])
                pp[:, c] = by_p.sum(axis=0)
        # a perturbed knot the model cannot evaluate (a closure that cannot be followed 1e-6
        # away: independent coordinates at a near-singular passive block) leaves its column
        # out of that knot's block: an approximate Hessian, not an invalid number for IPOPT
        xx[~np.isfinite(xx)] = 0.0
        skipped = np.setdiff1d(np.arange(n), columns)
        xx[:, :, skipped] = np.swapaxes(xx, -1, -2)[:, :, skipped]  # symmetry; affine pairs: 0
        xx = 0.5 * (xx + np.swapaxes(xx, -1, -2))
        return (xx, xp, 0.5 * (pp + pp.T)) if m else (xx,)

    def jacobian_sparsity(self, shared: bool) -> tuple[ca.Sparsity, np.ndarray]:
        """Sparsity of d vec(Y) / d vec(X) (block diagonal) or / d P (dense), and the CCS order."""
        K, n, o = self.knots, self.n_in, self.n_out
        if shared:
            rows = np.repeat(np.arange(K * o), self.n_shared)
            cols = np.tile(np.arange(self.n_shared), K * o)
            shape = (K * o, self.n_shared)
        else:
            k, a, b = np.meshgrid(np.arange(K), np.arange(o), np.arange(n), indexing="ij")
            rows, cols = (k * o + a).ravel(), (k * n + b).ravel()
            shape = (K * o, K * n)
        # invert_mapping=True: mapping[triplet] = index of its nonzero in CCS order
        sparsity, mapping = ca.Sparsity.triplet(*shape, rows.tolist(), cols.tolist(), True)
        return sparsity, np.asarray(mapping)


class _BatchedJacobian(_Buffered):
    """The Jacobian function CasADi asks a BatchedCallback for: (X, P, Y) -> (dY/dX, dY/dP)."""

    def __init__(self, name: str, parent: BatchedCallback, opts):
        ca.Callback.__init__(self)
        self.parent = parent
        self.patterns = [parent.jacobian_sparsity(False)]
        if parent.n_shared:
            self.patterns.append(parent.jacobian_sparsity(True))
        self.construct(name, opts)

    def get_n_in(self) -> int:
        return self.parent.get_n_in() + 1

    def get_n_out(self) -> int:
        return len(self.patterns)

    def get_sparsity_in(self, i: int) -> ca.Sparsity:
        if i < self.parent.get_n_in():
            return self.parent.get_sparsity_in(i)
        return self.parent.get_sparsity_out(0)

    def get_sparsity_out(self, i: int) -> ca.Sparsity:
        return self.patterns[i][0]

    def nonzeros(self, arg):
        jacobians = self.parent.jacobians(*self.parent._arguments(arg))
        return [_nonzeros(p, J) for p, J in zip(self.patterns, jacobians, strict=True)]


def _contract(jacobians: list[np.ndarray], lam: np.ndarray, per_knot: bool = False):
    """J^T lam knot by knot: [(K, n) from dY/dX, (K, m) or (m,) from dY/dP]."""
    out = [np.einsum("koi,ko->ki", jacobians[0], lam)]
    if len(jacobians) > 1:
        by_p = np.einsum("kom,ko->km", jacobians[1], lam)
        out.append(by_p if per_knot else by_p.sum(axis=0))
    return out


def _block_diagonal(knots: int, rows: int, cols: int) -> tuple[ca.Sparsity, np.ndarray]:
    """Sparsity of a (knots rows, knots cols) block-diagonal matrix and the CCS order of
    its blocks' entries (K, rows, cols) in C order."""
    k, a, b = np.meshgrid(np.arange(knots), np.arange(rows), np.arange(cols), indexing="ij")
    r, c = (k * rows + a).ravel(), (k * cols + b).ravel()
    sparsity, mapping = ca.Sparsity.triplet(
        knots * rows, knots * cols, r.tolist(), c.tolist(), True
    )
    return sparsity, np.asarray(mapping)


def _dense(rows: int, cols: int) -> tuple[ca.Sparsity, np.ndarray]:
    """A dense pattern; entries given row-major map to CasADi's column-major order."""
    return ca.Sparsity.dense(rows, cols), np.arange(rows * cols).reshape(rows, cols).T.ravel()


def _stacked(knots: int, rows: int, cols: int, transpose: bool) -> tuple[ca.Sparsity, np.ndarray]:
    """(K rows, cols) dense blocks stacked vertically, or their transpose side by side."""
    k, a, b = np.meshgrid(np.arange(knots), np.arange(rows), np.arange(cols), indexing="ij")
    r, c = (k * rows + a).ravel(), b.ravel()
    shape = (knots * rows, cols)
    if transpose:
        r, c, shape = c, r, shape[::-1]
    sparsity, mapping = ca.Sparsity.triplet(*shape, r.tolist(), c.tolist(), True)
    return sparsity, np.asarray(mapping)


def _nonzeros(pattern: tuple[ca.Sparsity, np.ndarray], values: np.ndarray) -> np.ndarray:
    """The nonzeros of ``values`` (its pattern's triplets in C order) in CasADi's order."""
    sparsity, mapping = pattern
    nz = np.empty(sparsity.nnz())
    nz[mapping] = values.ravel()
    return nz


class _BatchedAdjoint(_Buffered):
    """Reverse mode of a BatchedCallback: (X, [P], Y, lam) -> (J_X^T lam, [J_P^T lam])."""

    def __init__(self, name: str, parent: BatchedCallback, opts):
        ca.Callback.__init__(self)
        self.parent = parent
        K, n, o, m = parent.knots, parent.n_in, parent.n_out, parent.n_shared
        self.outputs = ["x", "p"] if m else ["x"]
        self.inputs = [*self.outputs, "y", "lam"]
        size = {"x": K * n, "p": m, "y": K * o, "lam": K * o}
        self.shapes = {(a, b): (size[a], size[b]) for a in self.outputs for b in self.inputs}
        # nonzero blocks of the adjoint's Jacobian; by the nominal output Y it is zero
        self.patterns = {
            ("x", "x"): _block_diagonal(K, n, n),
            ("x", "lam"): _block_diagonal(K, n, o),
        }
        if m:
            self.patterns["x", "p"] = _stacked(K, n, m, transpose=False)
            self.patterns["p", "x"] = _stacked(K, n, m, transpose=True)
            self.patterns["p", "p"] = _dense(m, m)
            self.patterns["p", "lam"] = _stacked(K, o, m, transpose=True)
        self.construct(name, opts)

    def block_sparsity(self, key: tuple[str, str]) -> ca.Sparsity:
        """Sparsity of d(output key[0]) / d(input key[1])."""
        return self.patterns[key][0] if key in self.patterns else ca.Sparsity(*self.shapes[key])

    def get_n_in(self) -> int:
        return self.parent.get_n_in() + 2

    def get_n_out(self) -> int:
        return self.parent.get_n_in()

    def get_sparsity_in(self, i: int) -> ca.Sparsity:
        n_primal = self.parent.get_n_in()
        return self.parent.get_sparsity_in(i) if i < n_primal else self.parent.get_sparsity_out(0)

    def get_sparsity_out(self, i: int) -> ca.Sparsity:
        return self.parent.get_sparsity_in(i)

    def has_jac_sparsity(self, oind: int, iind: int) -> bool:
        return True

    def get_jac_sparsity(self, oind: int, iind: int, symmetric: bool) -> ca.Sparsity:
        return self.block_sparsity((self.outputs[oind], self.inputs[iind]))

    def _arguments(self, arg):
        X, P = self.parent._arguments(arg)
        lam = np.asarray(arg[-1], dtype=float).reshape(self.parent.knots, self.parent.n_out)
        return X, P, lam

    def nonzeros(self, arg):
        return [a.ravel() for a in self.parent.adjoint(*self._arguments(arg))]

    def has_jacobian(self) -> bool:
        return True

    def get_jacobian(self, name, inames, onames, opts):
        self._jacobian = _BatchedAdjointJacobian(name, self, opts)
        return self._jacobian


class _BatchedAdjointJacobian(_Buffered):
    """Jacobian of :class:`_BatchedAdjoint`: blocks (adjoint output) x (X, [P], Y, lam).

    By X and P: :meth:`BatchedCallback.adjoint_derivatives`; by the nominal
    output Y: zero; by lam: the transposed analytic Jacobians.
    """

    def __init__(self, name: str, adjoint: _BatchedAdjoint, opts):
        ca.Callback.__init__(self)
        self.adjoint = adjoint
        self.parent = adjoint.parent
        self.keys = [(a, b) for a in adjoint.outputs for b in adjoint.inputs]
        self.construct(name, opts)

    def get_n_in(self) -> int:
        return self.adjoint.get_n_in() + self.adjoint.get_n_out()

    def get_n_out(self) -> int:
        return len(self.keys)

    def get_sparsity_in(self, i: int) -> ca.Sparsity:
        if i < self.adjoint.get_n_in():
            return self.adjoint.get_sparsity_in(i)
        return self.adjoint.get_sparsity_out(i - self.adjoint.get_n_in())

    def get_sparsity_out(self, i: int) -> ca.Sparsity:
        return self.adjoint.block_sparsity(self.keys[i])

    def nonzeros(self, arg):
        X, P, lam = self.adjoint._arguments(arg[: self.adjoint.get_n_in()])
        second = self.parent.adjoint_derivatives(X, P, lam)
        jacobians = self.parent.jacobians(X, P)
        values = {("x", "x"): second[0], ("x", "lam"): np.swapaxes(jacobians[0], -1, -2)}
        if self.parent.n_shared:
            values["x", "p"] = values["p", "x"] = second[1]  # the pattern transposes
            values["p", "p"] = second[2]
            values["p", "lam"] = jacobians[1]  # (K, o, m) stacked, transposed
        patterns = self.adjoint.patterns
        return [
            _nonzeros(patterns[key], values[key]) if key in patterns else np.zeros(0)
            for key in self.keys
        ]
