"""Exact second derivatives of the reaching model functions, by CasADi AD of SX.

The compiled kernels give the motor torques, the closures and the task
vector with their analytic Jacobians (:mod:`workbench.ocp.model_functions`);
no kernel gives their second derivatives. Here the same functions of one
knot ``x = (q, dq, ddq)`` (3 n) are written in CasADi SX, and what IPOPT's
Hessian of the Lagrangian needs from them, ``sum_a lam_a d^2 Y_a / dx^2``
per knot, comes from CasADi's algorithmic differentiation (exact to
rounding), mapped over the knots:

* link poses ``T_i = T_parent exp([A_i] q_i)`` (world frame at q = 0, as
  the kernels; joint exponentials of :mod:`workbench.excitation.twist_sx`),
  a frame's pose ``T_link M`` with ``M`` its placement at q = 0;
* closure residuals from ``R = R_B^T R_A``, ``p = R_B^T (p_A - p_B)``
  (:mod:`workbench.closed_chains.closures`), ``K = dc/dq`` by AD, the
  closure at three levels on rows I: ``(c_I, (K dq)_I, (K ddq + d(K dq)/dq dq)_I)``;
* motor torques ``S^T tau(q, dq, ddq)``, tau the tree's inverse dynamics
  (:func:`workbench.excitation.twist_sx.torque_expression` at eta = 0),
  ``S_a = I``, ``S_p = -(K_p^T K_p)^{-1} K_p^T K_a`` (least squares, as the
  kernels' passive solve: the stacked residual may have redundant rows);
* the task vector: the tool's position, or its z axis for a pointing task.

Units: SI, radians; x as in the callbacks (joint values, rates, accelerations).
"""

from __future__ import annotations

import functools

import casadi as ca
import numpy as np

from workbench.closed_chains.model import ClosedChain
from workbench.excitation.twist_sx import exp_joint, torque_expression
from workbench.inertia import matrix_from_phi
from workbench.lie import Array
from workbench.ocp.sx_compiler import Compilation, compile_soon


def link_poses(chain, q) -> list[tuple]:
    """World poses (R, p) of the tree's links at joint values q (SX, n)."""
    poses: list[tuple] = []
    for i in range(chain.n):
        R, p = exp_joint(ca.DM(chain.twists[i]), q[i], chain.joint_kinds[i] == "prismatic")
        parent = chain.parents[i]
        if parent >= 0:
            R_parent, p_parent = poses[parent]
            R, p = R_parent @ R, R_parent @ p + p_parent
        poses.append((R, p))
    return poses


def frame_pose(chain, poses: list[tuple], name: str) -> tuple:
    """World pose (R, p) of the tree frame ``name`` given the link poses."""
    M = np.asarray(chain.placement_of(name))
    R_link, p_link = poses[chain.parent_of(name)]
    return R_link @ ca.DM(M[:3, :3]), R_link @ ca.DM(M[:3, 3]) + p_link


def closure_residual(kind: str, A: tuple, B: tuple):
    """Residual of a ``kind`` closure between frame poses A and B (module docstring)."""
    R = B[0].T @ A[0]
    p = B[0].T @ (A[1] - B[1])
    rotation = ca.vertcat(R[2, 1] - R[1, 2], R[0, 2] - R[2, 0], R[1, 0] - R[0, 1]) / 2
    return {
        "point": p,
        "rotation": rotation,
        "weld": ca.vertcat(p, rotation),
        "revolute": ca.vertcat(p, R[0, 2], R[1, 2]),
        "planar": p[:2],
    }[kind]


def knot_expressions(model: ClosedChain, rows: np.ndarray, x, phi=None) -> dict:
    """Torque, closure levels (SX of x (3 n,)) and task vector (SX of q) of one knot.

    ``phi`` (SX, 10 n): the links' inertial parameters (default the model's).
    """
    tree, n = model.tree, model.n
    active = [int(j) for j in model.active]
    passive = [int(j) for j in model.passive]
    q, dq, ddq = x[:n], x[n : 2 * n], x[2 * n :]
    poses = link_poses(tree, q)
    c = ca.vertcat(
        *[
            closure_residual(
                closure.kind,
                frame_pose(tree, poses, closure.frames[0]),
                frame_pose(tree, poses, closure.frames[1]),
            )
            for closure in model.closures
        ]
    )
    K = ca.jacobian(c, q)
    K_p = K[:, passive]
    S_p = -ca.solve(K_p.T @ K_p, K_p.T @ K[:, active])
    S = ca.SX.zeros(n, len(active))
    for k, j in enumerate(active):
        S[j, k] = 1
    for k, j in enumerate(passive):
        S[j, :] = S_p[k, :]
    inertias = None
    if phi is not None:  # G is linear in phi: G(phi) = sum_k phi_k G(e_k)
        basis = [ca.DM(G) for G in matrix_from_phi(np.eye(10))]
        inertias = [sum(phi[10 * i + k] * basis[k] for k in range(10)) for i in range(n)]
    tau = S.T @ torque_expression(tree, ca.SX.zeros(6 * n), q, dq, ddq, inertias)
    velocity = K @ dq
    acceleration = K @ ddq + ca.jtimes(velocity, q, dq)
    r = [int(i) for i in rows]
    R_tool, p_tool = frame_pose(tree, poses, tree.tool_name)
    return {
        "torque": tau,
        "closure": ca.vertcat(c[r], velocity[r], acceleration[r]),
        "task": p_tool if model.task == "position" else R_tool[:, 2],
    }


@functools.lru_cache(maxsize=16)
def knot_functions(
    model: ClosedChain, rows: tuple[int, ...], design: bool = False
) -> dict[str, ca.Function]:
    """Per-knot SX functions: name -> (x, lam) -> (Y, sum_a lam_a d^2 Y_a / dx^2).

    x is (q, dq, ddq) (3 n) for "torque" and "closure", q (n) for "task". With
    ``design`` the torque takes the links' phi (10 n) too, ``(x, phi, lam) ->
    (Y, d^2 / dx^2, d^2 / dx dphi)`` (the torque is linear in phi).
    """
    n = model.n
    x = ca.SX.sym("x", 3 * n)
    phi = ca.SX.sym("phi", 10 * n) if design else None
    expressions = knot_expressions(model, np.array(rows, dtype=int), x, phi)
    out = {}
    for name, y in expressions.items():
        variables = x[:n] if name == "task" else x  # the task depends on q only
        lam = ca.SX.sym("lam", y.numel())
        gradient = ca.gradient(ca.dot(lam, y), variables)
        hessian = ca.densify(ca.jacobian(gradient, variables))
        if name == "torque" and design:
            mixed = ca.densify(ca.jacobian(gradient, phi))
            out[name] = ca.Function(name, [variables, phi, lam], [y, hessian, mixed])
        else:
            out[name] = ca.Function(name, [variables, lam], [y, hessian])
    return out


@functools.lru_cache(maxsize=16)
def _compiled(model: ClosedChain, rows: tuple[int, ...], name: str, design: bool) -> Compilation:
    return compile_soon(knot_functions(model, rows, design)[name])


def lagrangian_hessians(model: ClosedChain, rows: np.ndarray, name: str, design: bool = False):
    """``(X (K, w), P, lam (K, o)) -> blocks``: ``sum_a lam_a d^2 Y_a / dx^2`` (K, w, w) at
    every knot, as :meth:`workbench.ocp.bridge.BatchedCallback.adjoint_derivatives`
    returns it; with ``design`` (the torque with the links' phi P (10 n) shared by all
    knots) also the mixed blocks (K, w, 10 n) and the zero phi-phi block.

    ``name`` is "torque", "closure" or "task" (:func:`knot_functions`),
    compiled to C (:mod:`workbench.ocp.sx_compiler`); a first compilation runs in the
    background until the first evaluation (or :func:`workbench.ocp.sx_compiler.wait`).
    """
    function = _compiled(model, tuple(int(i) for i in rows), name, design)
    buffers: dict[int, tuple] = {}

    def evaluate(X: Array, P: Array, lam: Array) -> tuple[Array, ...]:
        K, w = X.shape
        if K not in buffers:  # copy-free evaluation of the map over K knots
            buffers[K] = function.result().map(K).buffer()
        buffer, run = buffers[K]
        arguments = [np.ascontiguousarray(X, dtype=float)]
        if design:
            arguments.append(np.ascontiguousarray(np.tile(P, (K, 1)), dtype=float))
        arguments.append(np.ascontiguousarray(lam, dtype=float))
        for i, argument in enumerate(arguments):
            buffer.set_arg(i, memoryview(argument))
        hessian = np.empty((K, w, w))  # column-major (w, w K): [k] is the symmetric block
        buffer.set_res(1, memoryview(hessian))
        if not design:
            run()
            return (hessian,)
        mixed = np.empty((K, P.size, w))  # column-major (w, m K): [k] is the block's transpose
        buffer.set_res(2, memoryview(mixed))
        run()
        return hessian, np.swapaxes(mixed, 1, 2), np.zeros((P.size, P.size))

    return evaluate
