"""Relative poses of closure frames as products of exponentials, and their derivatives.

A closure between frames A (on link a) and B (on link b) depends on the
relative pose ``X = T_B^{-1} T_A``. The joints both links share cancel, and
what remains is one serial product over the loop (Kwon's normal form with
eta, [Kwon] eq. 6):
    X = M_B(eta)^{-1} [prod_{j in b's branch, leaf first} E_j(eta)^{-1}]
                      [prod_{j in a's branch, root first} E_j(eta)] M_A(eta),
    E_j(eta) = exp([eta_j]) exp([A_j] q_j) exp(-[eta_j]),

with ``M(eta) = exp([eta_k]) M`` for a link's own frame (eta block k) and
``M`` fixed for an attached frame. Each factor is the exponential of a
coordinate (a joint value, or eta at eta = 0) times a twist, so moving the
coordinates by ``delta`` gives

    X(x + delta) = prod_l exp(delta_l [S_l]) X(x),   S_l = Ad_{P_l} xi_l,     (1)

``P_l`` the product of the factors before factor l and ``xi_l`` its twist.
Along a direction w (joint values u, eta e) factor l turns at the twist
``zeta_l(w)`` (``sign u_j S_l`` for a joint, ``sign Ad_{P_l} e_k`` for eta
block k). Differentiating (1), with ``Z_l(w) = sum_{k<l} zeta_k(w)``:
    dX[w]      = [V(w)] X,  V(w) = sum_l zeta_l(w),                         (2)
    d2X[a, b]  = sum_l ([Z_l(a) + zeta_l(a)/2][zeta_l(b)]
                        + [Z_l(b) + zeta_l(b)/2][zeta_l(a)]) X,              (3)
    d3X[a, a, w] = d_w of (3) at b = a, with d_w zeta_l(a) = ad_{Z_l(w)} zeta_l(a)
                   (the twists move with the factors before them) and
                   d_w X = [V(w)] X.                                         (4)

Eq. (3) is exact for joint factors and for one eta factor with joint
factors; second derivatives between two eta components are not needed
anywhere and not provided. :class:`LoopState` holds X and the twists at N
configurations; :mod:`workbench.closed_chains.loop_kernels` evaluates
eq. (2-4) per sample in compiled code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench import lie
from workbench.chain import Chain
from workbench.closed_chains.loop_kernels import loop_pose
from workbench.lie import Array


@dataclass(frozen=True)
class Factor:
    """A factor of a loop product: ``exp(sign [A_joint] q_joint)`` or ``exp(sign [eta_block])``."""

    joint: int  # tree joint index, or -1 for an eta factor
    sign: float
    block: int  # eta block of an eta factor, or -1


def loop_factors(chain: Chain, link_a: int, block_a: int | None,
                 link_b: int, block_b: int | None) -> tuple[Factor, ...]:  # fmt: skip
    """The factors of ``T_B^{-1} T_A`` in product order (module docstring)."""
    path_a = np.flatnonzero(chain.ancestors[:, link_a]) if link_a >= 0 else np.zeros(0, int)
    path_b = np.flatnonzero(chain.ancestors[:, link_b]) if link_b >= 0 else np.zeros(0, int)
    only_a = [int(j) for j in path_a if j not in path_b]
    only_b = [int(j) for j in path_b if j not in path_a]
    factors = []
    if block_b is not None:
        factors.append(Factor(-1, -1.0, block_b))
    for sign, joints in ((-1.0, only_b[::-1]), (1.0, only_a)):
        for j in joints:
            factors += [Factor(-1, 1.0, j), Factor(j, sign, -1), Factor(-1, -1.0, j)]
    if block_a is not None:
        factors.append(Factor(-1, 1.0, block_a))
    return tuple(factors)


@dataclass(frozen=True, eq=False)
class Loop:
    """One closure's loop product laid out for the kernels, built once per model.

    ``joint`` (L,) and ``sign`` (L,) per factor (joint -1: an eta factor),
    the placements ``M_a`` and ``M_b_inverse``; coordinate c of the loop sits
    in factor ``factor[c]`` and is global coordinate ``index[c]`` (tree joint
    j, or ``n + 6 block + k`` for eta component k of a tree with n joints).
    """

    joint: Array
    sign: Array
    M_a: Array
    M_b_inverse: Array
    factor: Array
    index: Array

    @classmethod
    def of(cls, factors: tuple[Factor, ...], M_a: Array, M_b: Array, n: int) -> Loop:
        """The layout of ``factors`` between the placements M_a and M_b, for a tree of n joints."""
        factor, index = [], []
        for l, f in enumerate(factors):
            if f.joint >= 0:
                factor.append(l)
                index.append(f.joint)
            else:
                factor += [l] * 6
                index += list(n + 6 * f.block + np.arange(6))
        return cls(
            joint=np.array([f.joint for f in factors], dtype=np.int64),
            sign=np.array([f.sign for f in factors], dtype=float),
            M_a=np.ascontiguousarray(M_a, dtype=float),
            M_b_inverse=np.ascontiguousarray(lie.inverse(M_b)),
            factor=np.array(factor, dtype=np.int64),
            index=np.array(index, dtype=np.int64),
        )


class LoopState:
    """X and the loop's twists at N configurations, for one closure (module docstring).

    The loop's *coordinates* are its joint values and, for every eta
    factor, the six components of that eta block (:class:`Loop`): the
    coordinate c turns at the twist ``T[:, c]``.
    """

    def __init__(self, chain: Chain, loop: Loop, q: Array):
        self.T, self.X = loop_pose(
            chain.twists, loop.joint, loop.sign, loop.M_b_inverse, loop.M_a, q
        )
        self.factor = loop.factor
        self.index = loop.index
        self.L = len(loop.joint)
