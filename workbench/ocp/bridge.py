"""Hand batched numpy functions with analytic Jacobians to CasADi.

A :class:`BatchedCallback` wraps ``evaluate(X, P, jacobian)`` where ``X`` is
(K, n) (one row per knot) and ``P`` (m,) a parameter shared by all knots,
returning ``Y`` (K, o) and, when asked, ``dY/dX`` (K, o, n) and ``dY/dP``
(K, o, m). CasADi sees a function of the stacked column ``vec(X^T)`` (knot
by knot) and ``P``, with output ``vec(Y^T)``; its Jacobian is declared with
its true sparsity (block diagonal in the knots, dense in P), so IPOPT gets
the exact sparse constraint Jacobian from one batched call for all knots.

Second derivatives, which IPOPT's exact Hessian of the Lagrangian needs,
come from central differences of the analytic Jacobians: knots are
independent, so perturbing input column c at every knot at once gives
column c of all K blocks in two batched calls (2 (n + m) calls in all).
CasADi contracts them with the multipliers itself.

With ``finite_differences=True`` the same callback offers no Jacobian and
CasADi falls back to its own finite differences (used by the benchmark).
"""

from __future__ import annotations

from collections.abc import Callable

import casadi as ca
import numpy as np

Evaluate = Callable[..., tuple[np.ndarray, ...]]


class BatchedCallback(ca.Callback):
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
    ):
        ca.Callback.__init__(self)
        self.evaluate = evaluate
        self.knots, self.n_in, self.n_out, self.n_shared = knots, n_in, n_out, n_shared
        self.finite_differences = finite_differences
        self._cache_key: bytes | None = None
        self._cache: tuple[np.ndarray, ...] = ()
        self.evaluations = 0
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

    # ---------------------------------------------------------- evaluation
    def _arguments(self, arg) -> tuple[np.ndarray, np.ndarray]:
        X = np.asarray(arg[0], dtype=float).reshape(self.knots, self.n_in)
        P = np.asarray(arg[1], dtype=float).ravel() if self.n_shared else np.zeros(0)
        return X, P

    def _evaluate(self, X: np.ndarray, P: np.ndarray) -> tuple[np.ndarray, ...]:
        key = X.tobytes() + P.tobytes()
        if key != self._cache_key:
            self.evaluations += 1
            self._cache = self.evaluate(X, P, not self.finite_differences)
            self._cache_key = key
        return self._cache

    def eval(self, arg):
        Y = self._evaluate(*self._arguments(arg))[0]
        return [ca.DM(Y.reshape(-1, 1))]

    # ------------------------------------------------------------ Jacobian
    def has_jacobian(self) -> bool:
        return not self.finite_differences

    def get_jacobian(self, name, inames, onames, opts):
        self._jacobian = _BatchedJacobian(name, self, opts)
        return self._jacobian

    def jacobians(self, X: np.ndarray, P: np.ndarray) -> list[np.ndarray]:
        """[dY/dX (K, o, n), dY/dP (K, o, m)] (the second only with a shared input)."""
        return list(self._evaluate(X, P)[1:])

    def second_derivatives(self, X: np.ndarray, P: np.ndarray) -> list[np.ndarray]:
        """Central differences of the analytic Jacobians: d2Y/dX dX (K, o, n, n),
        d2Y/dX dP (K, o, n, m) and d2Y/dP dP (K, o, m, m) (the last two with P only)."""
        step = 1e-6
        n, m = self.n_in, self.n_shared

        def difference(dX, dP):
            plus = self.evaluate(X + dX, P + dP, True)[1:]
            minus = self.evaluate(X - dX, P - dP, True)[1:]
            return [(a - b) / (2 * step) for a, b in zip(plus, minus, strict=True)]

        d_x = [difference(step * np.eye(n)[c], np.zeros(m)) for c in range(n)]
        d_p = [difference(np.zeros(n), step * np.eye(m)[c]) for c in range(m)]
        xx = np.stack([d[0] for d in d_x], axis=-1)  # (K, o, n, n): d/dX_c of dY/dX_b
        xx = 0.5 * (xx + np.swapaxes(xx, -1, -2))
        if not m:
            return [xx]
        xp = np.stack([d[0] for d in d_p], axis=-1)  # (K, o, n, m)
        pp = np.stack([d[1] for d in d_p], axis=-1)  # (K, o, m, m)
        return [xx, xp, 0.5 * (pp + np.swapaxes(pp, -1, -2))]

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


class _BatchedJacobian(ca.Callback):
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

    def eval(self, arg):
        jacobians = self.parent.jacobians(*self.parent._arguments(arg))
        out = []
        for (sparsity, mapping), J in zip(self.patterns, jacobians, strict=True):
            values = np.empty(sparsity.nnz())
            values[mapping] = J.ravel()
            out.append(ca.DM(sparsity, values))
        return out

    def has_jacobian(self) -> bool:
        return True

    def get_jacobian(self, name, inames, onames, opts):
        self._hessian = _BatchedSecondDerivative(name, self, opts)
        return self._hessian


class _BatchedSecondDerivative(ca.Callback):
    """Jacobian of :class:`_BatchedJacobian`: d vec(dY/dX), d vec(dY/dP) by (X, P, Y).

    Rows index the full (column-major) vec of each Jacobian matrix, as CasADi
    differentiates sparse outputs; derivatives by the nominal outputs are zero.
    """

    def __init__(self, name: str, jacobian: _BatchedJacobian, opts):
        ca.Callback.__init__(self)
        self.jacobian = jacobian
        self.parent = parent = jacobian.parent
        K, n, o, m = parent.knots, parent.n_in, parent.n_out, parent.n_shared
        k, a, b, c = np.meshgrid(*map(np.arange, (K, o, n, n)), indexing="ij")
        rows_x = (k * o + a) + (k * n + b) * (K * o)  # vec index of dY/dX entries
        self.blocks = {("x", "x"): (rows_x.ravel(), (k * n + c).ravel(), (K * o * K * n, K * n))}
        if m:
            k, a, b, c = np.meshgrid(*map(np.arange, (K, o, n, m)), indexing="ij")
            rows = ((k * o + a) + (k * n + b) * (K * o)).ravel()
            self.blocks["x", "p"] = (rows, c.ravel(), (K * o * K * n, m))
            k, a, b, c = np.meshgrid(*map(np.arange, (K, o, m, n)), indexing="ij")
            rows = ((k * o + a) + b * (K * o)).ravel()
            self.blocks["p", "x"] = (rows, (k * n + c).ravel(), (K * o * m, K * n))
            k, a, b, c = np.meshgrid(*map(np.arange, (K, o, m, m)), indexing="ij")
            self.blocks["p", "p"] = (((k * o + a) + b * (K * o)).ravel(), c.ravel(), (K * o * m, m))
        self.patterns = {}
        for key, (rows, cols, shape) in self.blocks.items():
            sparsity, mapping = ca.Sparsity.triplet(*shape, rows.tolist(), cols.tolist(), True)
            self.patterns[key] = (sparsity, np.asarray(mapping))
        self.outputs = ["x", "p"] if m else ["x"]  # Jacobian blocks: dY/dX, dY/dP
        self.inputs = [*self.outputs, "y"]  # (X, P, Y nominal)
        self.construct(name, opts)

    def get_n_in(self) -> int:
        return self.jacobian.get_n_in() + self.jacobian.get_n_out()

    def get_n_out(self) -> int:
        return len(self.outputs) * len(self.inputs)

    def get_sparsity_in(self, i: int) -> ca.Sparsity:
        if i < self.jacobian.get_n_in():
            return self.jacobian.get_sparsity_in(i)
        return self.jacobian.get_sparsity_out(i - self.jacobian.get_n_in())

    def _shape(self, out: str, inp: str) -> tuple[int, int]:
        p = self.parent
        rows = p.knots * p.n_out * (p.knots * p.n_in if out == "x" else p.n_shared)
        cols = {"x": p.knots * p.n_in, "p": p.n_shared, "y": p.knots * p.n_out}[inp]
        return rows, cols

    def get_sparsity_out(self, i: int) -> ca.Sparsity:
        out, inp = self.outputs[i // len(self.inputs)], self.inputs[i % len(self.inputs)]
        if (out, inp) in self.patterns:
            return self.patterns[out, inp][0]
        return ca.Sparsity(*self._shape(out, inp))

    def eval(self, arg):
        second = self.parent.second_derivatives(*self.parent._arguments(arg))
        values = {("x", "x"): second[0]}
        if len(second) > 1:
            values["x", "p"] = second[1]
            values["p", "x"] = np.swapaxes(second[1], -1, -2)
            values["p", "p"] = second[2]
        result = []
        for out in self.outputs:
            for inp in self.inputs:
                if (out, inp) in self.patterns:
                    sparsity, mapping = self.patterns[out, inp]
                    nz = np.empty(sparsity.nnz())
                    nz[mapping] = values[out, inp].ravel()
                    result.append(ca.DM(sparsity, nz))
                else:
                    result.append(ca.DM(ca.Sparsity(*self._shape(out, inp))))
        return result
