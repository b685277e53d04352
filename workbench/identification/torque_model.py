"""The joint-torque model of identification in standard parameters, and its base parameters.

Model (linear in the parameters):

    tau = W(q, dq, ddq) x,   x = [link 1, drives of joint 1, link 2, ..., coupled motors],

with, per link j, the ten *standard* inertial parameters of the
identification literature (Khalil & Dombre), named as there:
``Ixx<j> Ixy<j> Ixz<j> Iyy<j> Iyz<j> Izz<j>`` (inertia about the origin of
joint j's frame, in that frame; ``Ixy`` the tensor entry), ``mx<j> my<j>
mz<j>`` (first moments m c) and ``m<j>``, followed by that joint's drive
terms (:mod:`workbench.identification.drives`), then the coupled-motor terms.
The inertial columns are Pinocchio's ``computeJointTorqueRegressor``
reordered; joint frames are the model's own (URDF) joint frames.

Base parameters (Gautier's numerical method, as in FIGAROH and SYMORO):
W is evaluated at random states; zero columns are dropped; QR *without*
pivoting in the order above keeps a column when the part of it not spanned by
the columns before it exceeds ``rtol`` of its norm. Each dropped column is a
combination ``W_d = W_kept K`` of kept ones, so ``W x = W_kept beta`` with
``beta = x_kept + K x_dropped``: every base parameter is its first standard
parameter plus a regrouping, named as a readable expression such as
``Izz1 + 1.0*Ia1 + 1.0*Iyy2 + 0.05185*m3``. Because the order puts each
link's parameters before the next link's, the representatives are the ones
of the published identifications of serial robots.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from workbench import inertia
from workbench.chain import Chain
from workbench.dynamics.inverse_dynamics import inverse_dynamics
from workbench.dynamics.regressor import regressor_columns
from workbench.errors import WorkbenchError
from workbench.identification.drives import DriveInputs, Drives
from workbench.lie import Array

STANDARD = ("Ixx", "Ixy", "Ixz", "Iyy", "Iyz", "Izz", "mx", "my", "mz", "m")
# project phi order [m, hx, hy, hz, Ixx, Iyy, Izz, Ixy, Ixz, Iyz] -> standard order
TO_STANDARD = np.array([4, 7, 8, 5, 9, 6, 1, 2, 3, 0])
FROM_STANDARD = np.argsort(TO_STANDARD)


@dataclass(frozen=True, eq=False)
class TorqueModel:
    """``tau = W x`` for a chain and its drives (module docstring)."""

    chain: Chain
    drives: Drives

    @property
    def names(self) -> list[str]:
        """Standard parameter names in column order."""
        n = self.chain.n
        grouped = [f"{p}{j + 1}" for j in range(n) for p in STANDARD] + self.drives.names
        return [grouped[k] for k in self.order]

    @property
    def order(self) -> np.ndarray:
        """Permutation from [inertial, drives] to the interleaved column order."""
        n = self.chain.n
        per = (len(self.drives.names) - 3 * len(self.drives.coupled)) // max(n, 1)
        order: list[int] = []
        for j in range(n):
            order += range(10 * j, 10 * j + 10)
            order += range(10 * n + per * j, 10 * n + per * (j + 1))
        order += range(10 * n + per * n, 10 * n + len(self.drives.names))
        return np.array(order, dtype=np.int64)

    @property
    def size(self) -> int:
        return 10 * self.chain.n + len(self.drives.names)

    def columns(
        self,
        q: Array,
        dq: Array,
        ddq: Array,
        select: np.ndarray | None = None,
        inputs: DriveInputs | None = None,
    ) -> Array:
        """W (N, n, P) in the interleaved standard order (module docstring), or its ``select``
        columns (gathered once, without building the others); ``inputs`` what drive terms
        read besides the motion (:class:`~workbench.identification.drives.DriveInputs`)."""
        n = self.chain.n
        grouped = self.order if select is None else self.order[select]
        link, param = np.divmod(grouped, 10)
        inertial = grouped < 10 * n
        source = np.where(inertial, 10 * link + TO_STANDARD[param % 10], grouped - 10 * n)
        W = np.empty((*q.shape, grouped.size))
        if inertial.any():
            W[:, :, inertial] = regressor_columns(self.chain, q, dq, ddq, source[inertial])
        if not inertial.all():
            W[:, :, ~inertial] = self.drives.columns(dq, ddq, inputs)[:, :, source[~inertial]]
        return W

    def values(self, drive_values: Array | None = None) -> Array:
        """x (P,) of the chain's inertias (joint frames) and the given drive parameters."""
        local = inertia.phi_from_matrix(self.chain.local_inertias())[:, TO_STANDARD]
        drive = np.zeros(len(self.drives.names)) if drive_values is None else drive_values
        return np.concatenate([local.ravel(), drive])[self.order]

    def split(self, x: Array) -> tuple[Array, Array]:
        """(phi (n, 10) in the base frame at q = 0, project order; drive parameters) of x."""
        unordered = np.empty_like(x)
        unordered[self.order] = x
        n = self.chain.n
        local = unordered[: 10 * n].reshape(n, 10)[:, FROM_STANDARD]
        phi = inertia.moved_phi(local, self.chain.joint_frames)
        return phi, unordered[10 * n :]

    def link_phi(self, x: Array) -> Array:
        """Each link's phi (n, 10) in its joint frame, project order, from x (for consistency)."""
        unordered = np.empty_like(x)
        unordered[self.order] = x
        n = self.chain.n
        return unordered[: 10 * n].reshape(n, 10)[:, FROM_STANDARD]


@dataclass(frozen=True)
class BaseParameters:
    """Base parameters ``beta = matrix @ x`` (r, P), kept columns and readable names."""

    independent: np.ndarray  # (r,) kept columns of W
    matrix: Array  # (r, P)
    names: tuple[str, ...]  # (r,) regrouping expressions


def base_parameters(
    model: TorqueModel,
    samples: int = 200,
    rtol: float = 1e-6,
    seed: int = 0,
    channels: np.ndarray | None = None,
) -> BaseParameters:
    """Base parameters of ``model`` from random states (module docstring); ``channels`` (n,)
    bool: the joints whose torque equations are measured (default all), so that parameters
    seen only in the others' (their drive terms, some of their links') are not base ones."""
    chain = model.chain
    rng = np.random.default_rng(seed)
    lower, upper = np.maximum(chain.lower, -np.pi), np.minimum(chain.upper, np.pi)
    q = rng.uniform(lower, upper, size=(samples, chain.n))
    dq, ddq = rng.normal(size=(2, samples, chain.n))
    # temperatures independent of the motion; load torques those of the nominal model (the
    # load_friction term's), so that a joint the nominal model loads with nothing drops it
    temperature = rng.normal(size=(samples, chain.n))
    inputs = DriveInputs(temperature, inverse_dynamics(chain, q, dq, ddq))
    W = model.columns(q, dq, ddq, inputs=inputs)
    W = (W if channels is None else W[:, np.asarray(channels, dtype=bool)]).reshape(-1, model.size)
    norms = np.linalg.norm(W, axis=0)
    active = np.flatnonzero(norms > rtol * norms.max())
    R = np.linalg.qr(W[:, active] / norms[active], mode="r")
    kept = active[np.abs(np.diag(R)) > rtol]
    if kept.size == 0:
        raise WorkbenchError(f"model '{chain.name}': no parameter changes the joint torques")
    dropped = np.setdiff1d(np.arange(model.size), kept)
    K = np.linalg.lstsq(W[:, kept], W[:, dropped], rcond=None)[0]
    K[np.abs(K) < 1e-10 * max(1.0, np.abs(K).max())] = 0.0
    matrix = np.zeros((kept.size, model.size))
    matrix[np.arange(kept.size), kept] = 1.0
    matrix[:, dropped] = K
    names = model.names
    expressions = tuple(_expression(names, matrix[i], kept[i]) for i in range(kept.size))
    return BaseParameters(kept, matrix, expressions)


def _expression(names: list[str], row: Array, first: int) -> str:
    """'Izz1 + 1.0*Ia1 - 0.225*m3' for a row of the base-parameter matrix."""
    text = names[first]
    for k in np.flatnonzero(row):
        if k == first:
            continue
        c = float(row[k])
        number = f"{abs(c):.6g}"
        if not any(ch in number for ch in ".e"):
            number += ".0"
        text += f" {'-' if c < 0 else '+'} {number}*{names[k]}"
    return text


def parse_expression(text: str) -> dict[str, float]:
    """{standard parameter: coefficient} of a base-parameter name (inverse of the naming)."""
    terms: dict[str, float] = {}
    position = 0
    for match in _TERM.finditer(text):
        if match.start() != position:
            break
        sign = -1.0 if match.group(1) == "-" else 1.0
        terms[match.group(3)] = sign * float(match.group(2) or 1.0)
        position = match.end()
    if position != len(text) or not terms:
        raise WorkbenchError(f"cannot parse base-parameter name '{text}'")
    return terms


_TERM = re.compile(r"\s*(?:([+-])\s*)?(?:([0-9.]+(?:[eE][+-]?[0-9]+)?)\*)?([A-Za-z]+[0-9]+)")
