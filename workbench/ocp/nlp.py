"""What every optimisation problem of the project shares: constraints, IPOPT, statuses.

A problem module (:mod:`workbench.ocp.reach`, the experiment design of
:mod:`workbench.excitation`) builds its CasADi expressions and collects them
here: :class:`Constraints` stacks equality and range constraints with their
bounds, :func:`ipopt_options` sets the solver the same way everywhere,
:func:`status` maps IPOPT's return status to "solved", "infeasible" or
"failed", :func:`violation` measures the largest constraint violation
of a solution, and :func:`interrupt_warnings_dropped` keeps CasADi's
warning about a Ctrl-C or SIGTERM it caught off stderr (the command line
says "interrupted" or "terminated" once IPOPT has stopped).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import casadi as ca
import numpy as np
from numpy.typing import ArrayLike

from workbench.lie import Array

SOLVED = ("Solve_Succeeded", "Solved_To_Acceptable_Level")
INFEASIBLE = ("Infeasible_Problem_Detected", "Restoration_Failed", "Error_In_Step_Computation")
# what IPOPT reports when a callback raised (Ctrl-C and SIGTERM inside a callback end so)
INTERRUPTED = ("NonIpopt_Exception_Thrown", "User_Requested_Stop")
STALLED = 1e-5  # relative objective change per iteration that counts as converged ...
ACCEPTABLE_ITERATIONS = 15  # ... this many iterations in a row (noisy_multipliers)


class Constraints:
    """Constraints g with bounds lbg <= g <= ubg, collected in order."""

    def __init__(self) -> None:
        self.g: list = []
        self.lower: list[Array] = []
        self.upper: list[Array] = []

    def equal(self, expr, value: ArrayLike = 0.0) -> None:
        """``expr == value`` (broadcast), expr any CasADi matrix (vectorised column-major)."""
        self.within(expr, value, value)

    def within(self, expr, lower: ArrayLike, upper: ArrayLike) -> None:
        """``lower <= expr <= upper`` (each broadcast to the size of expr)."""
        expr = ca.vec(expr)
        size = expr.numel()
        self.g.append(expr)
        self.lower.append(np.broadcast_to(np.asarray(lower, dtype=float), (size,)).ravel())
        self.upper.append(np.broadcast_to(np.asarray(upper, dtype=float), (size,)).ravel())

    def stacked(self) -> tuple:
        """(g, lbg, ubg) for ``casadi.nlpsol``."""
        return ca.vertcat(*self.g), np.concatenate(self.lower), np.concatenate(self.upper)


def ipopt_options(
    tolerance: float,
    max_iterations: int,
    progress: bool,
    warm_start: bool = False,
    barrier: str = "adaptive",
    noisy_multipliers: bool = False,
    initial_objective: float | None = None,
) -> dict:
    """IPOPT with the exact Hessian, the given tolerance and a tight constraint tolerance.

    ``barrier``: IPOPT's barrier update, "adaptive" (the quality-function
    oracle of [NWW]; on the shipped reaching problems 9-28 iterations where
    the monotone Fiacco-McCormick decrease needs 14-35, at the same optima
    within 1e-7 relative: ``benchmarks/bench_barrier.py``) or "monotone".
    ``warm_start``: start near the previous solution's barrier level
    (monotone, small mu and bound push) for an initial guess that is a
    solution already. ``noisy_multipliers``: a problem whose dual infeasibility stalls
    at rounding times large multipliers (the zero-force rows of idle joints with reduced
    inertia 1e-7 kg m^2 need multipliers of 1e7); it stops as solved to an acceptable
    level once, for ``ACCEPTABLE_ITERATIONS`` iterations, the constraints hold to 1e-6
    and the objective moves by less than ``STALLED`` relative (digit_like's leg: its
    objective crept by 1e-6 relative per iteration for 200 iterations, the dual
    infeasibility oscillating about 1e2, with 1e-7 it never stopped; with 1e-5 it stops
    after 134 iterations at an objective 1e-4 relative above where the creep was after 238).
    IPOPT measures that change relative to max(1, |f|) of its scaled objective, so an
    ``initial_objective`` (the value at the initial guess) below one is scaled up to one:
    unscaled, robot_delta's 2.7e-5 N^2 m^2 s moved by less than 1e-5 in every iteration,
    and it stopped after 15 at any point (50 iterations to 3.5e-4, with torques
    alternating in sign from knot to knot; scaled, 21 iterations to 2.1e-5). Objectives
    of one and more are left as they are (their changes are relative already).
    """
    options = {
        "ipopt.hessian_approximation": "exact",
        "ipopt.tol": tolerance,
        "ipopt.constr_viol_tol": 1e-10,
        "ipopt.max_iter": max_iterations,
        "ipopt.print_level": 5 if progress else 0,
        "ipopt.sb": "yes",
        "print_time": False,
        "show_eval_warnings": progress,  # a trial point's NaN, which IPOPT steps back from
    }
    if noisy_multipliers:
        options.update({
            "ipopt.acceptable_tol": 1e20, "ipopt.acceptable_dual_inf_tol": 1e20,
            "ipopt.acceptable_constr_viol_tol": 1e-6,
            "ipopt.acceptable_obj_change_tol": STALLED,
            "ipopt.acceptable_iter": ACCEPTABLE_ITERATIONS,
        })  # fmt: skip
        if initial_objective is not None and 0.0 < initial_objective < 1.0:
            options["ipopt.obj_scaling_factor"] = 1.0 / initial_objective
    if warm_start:
        options.update({"ipopt.mu_init": 1e-6, "ipopt.bound_push": 1e-9, "ipopt.bound_frac": 1e-9})
    else:
        options["ipopt.mu_strategy"] = barrier
    return options


def stagewise_solver(
    name: str, nlp: dict, structure: dict, tolerance: float, max_iterations: int, progress: bool
):
    """FATROP, or SQP with HPIPM's QPs, on a stage-ordered NLP (:mod:`workbench.ocp.stages`).

    ``structure`` holds N, nx, nu, ng (stage sizes) and FATROP's ``equality``
    flags; both use the exact Hessian, SQP convexified by regularisation.
    """
    sizes = {key: structure[key] for key in ("N", "nx", "nu", "ng")}
    if name == "fatrop":
        options = {
            **sizes,
            "structure_detection": "manual",
            "equality": structure["equality"],
            "fatrop": {"tol": tolerance, "max_iter": max_iterations,
                       "print_level": 10 if progress else 0},
            "print_time": False,
            "show_eval_warnings": progress,
        }  # fmt: skip
        return ca.nlpsol("reach", "fatrop", nlp, options)
    options = {
        "qpsol": "hpipm",
        "qpsol_options": {**sizes, "error_on_fail": False, "hpipm": {"iter_max": 100}},
        "convexify_strategy": "regularize",
        "max_iter": max_iterations,
        "tol_du": tolerance,
        "tol_pr": 1e-10,
        "print_header": progress,
        "print_iteration": progress,
        "print_status": progress,
        "print_time": False,
        "show_eval_warnings": progress,
    }
    return ca.nlpsol("reach", "sqpmethod", nlp, options)


def status(return_status: str) -> str:
    """ "solved", "infeasible" or "failed" from IPOPT's return status."""
    if return_status in SOLVED:
        return "solved"
    return "infeasible" if return_status in INFEASIBLE else "failed"


def violation(g: ArrayLike, lower: ArrayLike, upper: ArrayLike) -> float:
    """Largest violation of ``lower <= g <= upper`` (0 when feasible)."""
    g = np.asarray(g, dtype=float).ravel()
    return float(max(np.max(lower - g, initial=0.0), np.max(g - upper, initial=0.0)))


class _WithoutInterruptWarnings:
    """A text stream that passes whole lines on to ``stream``, except CasADi's interrupt warning."""

    def __init__(self, stream) -> None:
        self.stream, self.pending = stream, ""

    def write(self, text: str) -> int:
        self.pending += text
        *lines, self.pending = self.pending.split("\n")
        for line in lines:
            if "KeyboardInterruptException" not in line:
                self.stream.write(line + "\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


@contextlib.contextmanager
def interrupt_warnings_dropped() -> Iterator[None]:
    """Around a solve: CasADi writes (in pieces, to Python's stderr) a warning line when IPOPT
    catches a Ctrl-C or SIGTERM; drop that line, pass every other one."""
    stream = sys.stderr
    sys.stderr = filtered = _WithoutInterruptWarnings(stream)
    try:
        yield
    finally:
        sys.stderr = stream
        if filtered.pending and "KeyboardInterruptException" not in filtered.pending:
            stream.write(filtered.pending)
