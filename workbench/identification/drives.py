"""Drive terms of the joint-torque model, linear in their parameters.

Measured joint torques are the rigid-body torques plus what the drives add:

    tau = Y(q, dq, ddq) phi + C(q, dq, ddq) x,

where ``C`` (N, n, p) holds one column per drive parameter in ``x``. The
terms, each switchable, with the names of the identification literature
(joint numbers j and motor numbers k from 1):

* ``friction``: ``fv<j>`` viscous friction (column ``dq_j`` in row j) and
  ``fs<j>`` Coulomb friction (``sign(dq_j)`` in row j; smooth through rest
  when the log sets a speed threshold, see :class:`Drives`);
* ``rotor_inertia``: ``Ia<j>``, the rotor inertia reflected to joint j
  (``ddq_j`` in row j), i.e. ``r_j^2 J_rotor`` for gear ratio r_j;
* ``offset``: ``off<j>``, a constant torque (current-sensor offset);
* ``coupled_motors``: for every motor whose transmission row drives several
  joints (motor positions ``q_m = R q``, e.g. a wrist motor that turns with
  the previous joint), the parts of its rotor inertia and friction that the
  per-joint terms cannot hold. Motor k's own torque
  ``J_k ddq_mk + fv_k dq_mk + fs_k sign(dq_mk)`` reaches the joints through
  ``R^T`` (virtual power), so joint i sees ``R_ki J_k sum_j R_kj ddq_j``.
  The diagonal parts (i = j) add to ``Ia_i`` and ``fv_i``; the rest, in the
  units of joint k (``Iam_k = R_kk^2 J_k``, ``fvm_k = R_kk^2 fv_k``,
  ``fsm_k = |R_kk| fs_k``), are

  - ``Iam<k>``: ``(R_ki R_kj / R_kk^2) ddq_j`` in row i, for i != j,
  - ``fvm<k>``: the same with ``dq_j``,
  - ``fsm<k>``: ``(R_ki / |R_kk|) sign(R_k . dq)`` in every row i with
    ``R_ki != 0``.

  For the Staubli TX40 (``R[5, 4] = R[5, 5] = 32``) these are the ``Iam6``,
  ``fvm6`` and ``fsm6`` columns of its published identification.

Terms beyond viscous and Coulomb friction (each linear in its parameters
once a shape is fixed; the shapes are fitted by outer searches on the
training rows, :mod:`workbench.calibration.fitting.drive_shapes`):

* ``stribeck``: ``fst<j>`` [N m], the Stribeck friction peak at rest,
  column ``exp(-(|dq_j| / vs_j)^delta) s(dq_j)`` in row j, with
  ``delta = 1`` (:data:`STRIBECK_EXPONENT`, the exponential curve of Tustin), ``s``
  the (smooth) sign of the Coulomb term and ``vs_j`` [rad/s] the Stribeck
  speed of joint j (``Drives.stribeck_speed``; searched on a log scale);
* ``load_friction``: ``fl<j>`` [dimensionless, N m per N m], Coulomb
  friction proportional to the torque the joint transmits, column
  ``|tau_load_j| s(dq_j)`` in row j; ``tau_load`` is a rigid-body torque
  along the logged motion (plus a known payload's), given to the columns
  (:class:`DriveInputs`) so that the term is linear: the equations are
  built with the *nominal* model's, and the identification alternates
  (:mod:`workbench.calibration.fitting.drive_shapes`): the load of the model fitted
  with the previous load, twice, so that the final ``tau_load`` is the
  identified model's own rigid-body torque;
* ``temperature``: ``fvT<j>`` [N m s/rad/K] and ``fsT<j>`` [N m/K], the
  change of viscous and Coulomb friction with the drive temperature:
  columns ``(T_j - T0_j) dq_j`` and ``(T_j - T0_j) s(dq_j)``, so joint j's
  friction is ``(fv + fvT (T - T0)) dq + (fs + fsT (T - T0)) s(dq)`` with
  ``T0_j`` the log's mean temperature of joint j (degrees of any scale;
  K and deg C differences agree);
* ``sensor_delay``: no column: one constant delay ``d`` [s] per recording,
  the measured torques lagging the positions (``tau_measured(t) =
  tau_model(t - d)``, ``Drives.delay``); the equations compare the model at
  t with the measurement at ``t + d`` (interpolated before decimation).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workbench.config import Section, read_toml
from workbench.errors import WorkbenchError
from workbench.identification.term_names import TERMS
from workbench.lie import Array
from workbench.models.mjcf import Coupling

DEFAULT_TERMS = ("friction",)
STRIBECK_EXPONENT = 1.0  # delta of exp(-(|dq| / vs)^delta)
# per-joint parameters of each term, in column order
_PER_JOINT = (
    ("rotor_inertia", ("Ia",)),
    ("friction", ("fv", "fs")),
    ("offset", ("off",)),
    ("stribeck", ("fst",)),
    ("load_friction", ("fl",)),
    ("temperature", ("fvT", "fsT")),
)

_INPUTS = {"temperature": "temperature", "load_friction": "load"}  # term -> DriveInputs field


@dataclass(frozen=True)
class DriveInputs:
    """Per-sample inputs of drive terms besides the motion, (N, n) each (None: not needed).

    ``temperature``: ``T - T0`` per joint (the ``temperature`` term);
    ``load``: the nominal rigid-body torque per joint (``load_friction``).
    """

    temperature: Array | None = None
    load: Array | None = None

    def rows(self, rows: slice | np.ndarray) -> DriveInputs:
        """The inputs of the samples ``rows``."""
        return DriveInputs(
            None if self.temperature is None else self.temperature[rows],
            None if self.load is None else self.load[rows],
        )


@dataclass(frozen=True, eq=False)
class Drives:
    """Which drive terms the torque model has, and the transmission for coupled motors.

    ``transmission`` is the motor-from-joint matrix R (n, n) of
    ``q_motor = R q`` (None: one motor per joint, no coupling);
    ``min_speed`` (n,) the joint speeds below which Coulomb friction fades:
    ``fs tanh(3 dq / min_speed)`` instead of ``fs sign(dq)`` (friction at rest
    is anywhere within +-fs and a sign of measurement noise predicts it
    badly; above min_speed, where rows are fitted, the two agree to 0.5 %);
    ``stribeck_speed`` (n,) the Stribeck speeds vs_j [rad/s] (default 1;
    fitted by :mod:`workbench.calibration.fitting.drive_shapes`); ``delay`` [s] the
    torque sensor's delay behind the positions (``sensor_delay``).
    """

    n: int
    terms: tuple[str, ...] = DEFAULT_TERMS
    transmission: Array | None = None
    min_speed: Array | None = None
    stribeck_speed: Array | None = None
    delay: float = 0.0

    def __post_init__(self) -> None:
        unknown = [t for t in self.terms if t not in TERMS]
        if unknown:
            raise WorkbenchError(
                f"unknown torque-model term(s) {', '.join(unknown)}; choose from {', '.join(TERMS)}"
            )
        if self.transmission is not None:
            R = np.asarray(self.transmission, dtype=float)
            if R.shape != (self.n, self.n):
                raise WorkbenchError(
                    f"transmission matrix has shape {R.shape}; expected ({self.n}, {self.n})"
                )
            object.__setattr__(self, "transmission", R)
            for k in self.coupled:
                if R[k, k] == 0:
                    raise WorkbenchError(
                        f"transmission row {k + 1} couples joints but its own entry R[{k + 1}, "
                        f"{k + 1}] is 0: motor {k + 1} must turn with joint {k + 1} (number the "
                        "motors after the joints they drive)"
                    )
            if not np.all(np.isfinite(R)) or np.linalg.matrix_rank(R) < self.n:
                raise WorkbenchError(
                    f"transmission matrix {np.array2string(R, separator=', ')} is not invertible: "
                    "every joint must be turned by the motors (q_motor = R q)"
                )
        if "stribeck" in self.terms:
            vs = np.ones(self.n) if self.stribeck_speed is None else self.stribeck_speed
            vs = np.asarray(vs, dtype=float)
            if vs.shape != (self.n,) or not np.all(vs > 0):
                raise WorkbenchError(
                    f"Stribeck speeds {vs.tolist()}: expected {self.n} positive values (rad/s)"
                )
            object.__setattr__(self, "stribeck_speed", vs)

    @property
    def coupled(self) -> list[int]:
        """Motors (0-based) whose transmission row drives more than one joint."""
        if "coupled_motors" not in self.terms or self.transmission is None:
            return []
        return [k for k in range(self.n) if np.count_nonzero(self.transmission[k]) > 1]

    @property
    def names(self) -> list[str]:
        """Parameter names in column order: per joint (Ia, fv, fs, off, fst, fl, fvT, fsT),
        then coupled motors."""
        per_joint = [p for term, params in _PER_JOINT if term in self.terms for p in params]
        names = [f"{p}{j + 1}" for j in range(self.n) for p in per_joint]
        return names + [f"{p}{k + 1}" for k in self.coupled for p in ("Iam", "fvm", "fsm")]

    @property
    def inputs_needed(self) -> tuple[str, ...]:
        """The :class:`DriveInputs` fields the terms read."""
        return tuple(field for term, field in _INPUTS.items() if term in self.terms)

    def smooth_sign(self, dq: Array) -> Array:
        """The sign (N, n) Coulomb-like terms multiply: ``sign(dq)`` or its smooth form."""
        return _sign(dq, self.min_speed)

    def columns(self, dq: Array, ddq: Array, inputs: DriveInputs | None = None) -> Array:
        """C (N, n, p): d tau / d x for the drive parameters x (module docstring); ``inputs``
        the per-sample temperatures and load torques the terms need."""
        N, n = dq.shape
        inputs = inputs or DriveInputs()
        for term, field in _INPUTS.items():
            if term in self.terms and getattr(inputs, field) is None:
                raise WorkbenchError(
                    f"the torque-model term {term} needs the {field} of every sample"
                )
        blocks = []
        rows = np.arange(n)

        def diagonal(values: Array) -> Array:
            C = np.zeros((N, n, n))
            C[:, rows, rows] = values
            return C

        sign = self.smooth_sign(dq)
        values = {
            "Ia": lambda: ddq,
            "fv": lambda: dq,
            "fs": lambda: sign,
            "off": lambda: np.ones_like(dq),
            "fst": lambda: stribeck_shape(dq, self.stribeck_speed) * sign,
            "fl": lambda: np.abs(inputs.load) * sign,
            "fvT": lambda: inputs.temperature * dq,
            "fsT": lambda: inputs.temperature * sign,
        }
        chosen = [p for term, params in _PER_JOINT if term in self.terms for p in params]
        per_joint = [diagonal(values[p]()) for p in chosen]
        if per_joint:  # interleave: joint 1's terms, then joint 2's, ...
            blocks.append(np.stack(per_joint, axis=3).reshape(N, n, n * len(per_joint)))
        for k in self.coupled:
            blocks.append(self._coupled_columns(k, dq, ddq))
        return np.concatenate(blocks, axis=2) if blocks else np.zeros((N, n, 0))

    def _coupled_columns(self, k: int, dq: Array, ddq: Array) -> Array:
        R = self.transmission
        r = R[k] / R[k, k]  # motor k's row in joint-k units
        off = np.outer(r, r)
        np.fill_diagonal(off, 0.0)
        threshold = None if self.min_speed is None else abs(R[k, k]) * self.min_speed[k]
        sign = _sign(dq @ R[k], threshold)  # of the motor's speed
        return np.stack([ddq @ off.T, dq @ off.T, sign[:, None] * (R[k] / abs(R[k, k]))], axis=2)


def stribeck_shape(dq: Array, vs: Array) -> Array:
    """``exp(-(|dq| / vs)^delta)`` (N, n) for Stribeck speeds vs (n,), delta
    :data:`STRIBECK_EXPONENT`: 1 at rest, falling to exp(-1) at ``vs``."""
    return np.exp(-((np.abs(dq) / vs) ** STRIBECK_EXPONENT))


def _sign(speed: Array, threshold: Array | float | None) -> Array:
    """sign(speed), or ``tanh(3 speed / threshold)``: smooth through rest, within 0.5 % of the
    sign above the threshold (where torque rows are fitted)."""
    if threshold is None:
        return np.sign(speed)
    return np.tanh(3.0 * speed / threshold)


def drive_torques(
    drives: Drives, x: Array, dq: Array, ddq: Array, inputs: DriveInputs | None = None
) -> Array:
    """tau (N, n) of the drive terms with parameters ``x`` (p,)."""
    return np.einsum("snp,p->sn", drives.columns(dq, ddq, inputs), x)


def simulator_terms(drives: Drives, values: dict[str, float]) -> dict[str, object]:
    """The drive parameters ``values`` (by name) as MuJoCo joint and tendon terms.

    Keyword arguments of :func:`workbench.models.mjcf.mjcf_string`: per joint
    ``armature`` (Ia), ``damping`` (fv) and ``frictionloss`` (fs); per coupled
    motor k a :class:`~workbench.models.mjcf.Coupling` (a fixed tendon with
    coefficients ``c = R_k / R_kk``) with ``Iam``, ``fvm`` and ``fsm``. The
    tendon adds ``Iam c c^T`` to the mass matrix, diagonal included, while
    ``Iam`` holds only the off-diagonal part (module docstring): the joints'
    ``armature`` and ``damping`` give back ``c_i^2 Iam`` and ``c_i^2 fvm``.
    Offsets (``off``) are a bias of the torque measurement, no force on the
    robot, and are not written. Joint stiffnesses (``k``) are MuJoCo's joint
    ``stiffness``. Missing names count as 0.
    """
    n = drives.n
    value = np.vectorize(lambda name: values.get(name, 0.0), otypes=[float])
    joints = np.arange(1, n + 1).astype(str)
    armature, damping = value(np.char.add("Ia", joints)), value(np.char.add("fv", joints))
    frictionloss = value(np.char.add("fs", joints))
    stiffness = value(np.char.add("k", joints))
    couplings = []
    for k in drives.coupled:
        c = drives.transmission[k] / drives.transmission[k, k]
        Iam, fvm = values.get(f"Iam{k + 1}", 0.0), values.get(f"fvm{k + 1}", 0.0)
        armature = armature - c**2 * Iam
        damping = damping - c**2 * fvm
        couplings.append(Coupling(f"motor_{k + 1}", c, Iam, fvm, values.get(f"fsm{k + 1}", 0.0)))
    return {
        "armature": armature,
        "damping": damping,
        "frictionloss": frictionloss,
        "stiffness": stiffness,
        "couplings": couplings,
    }


def sidecar_path(urdf: str | os.PathLike) -> Path:
    """Where the drive parameters of a URDF live: ``robot.urdf`` -> ``robot.drives.toml``."""
    urdf = Path(urdf)
    return urdf.with_name(urdf.stem + ".drives.toml")


MAX_DRIVE_VALUE = 1e6  # SI; beyond any robot drive (the largest joints hold ~1e5 N m)


def check_model_order(numbered: Sequence[str], joint_names: Sequence[str], where: str) -> None:
    """Refuse a drive file's numbered joints that are not in the model's order: a calibration
    numbers its joints as the model orders them, so another order (an edited ``summary.json``)
    would give one joint's drive terms to another."""
    positions = [joint_names.index(name) for name in numbered if name in joint_names]
    if positions != sorted(positions):
        raise WorkbenchError(
            f"{where}: joint_names {list(numbered)!r:.200} are not in the model's joint order "
            f"({', '.join(joint_names)}); a calibration writes them in that order, so the "
            "drive values would go to other joints"
        )


def numbered_joints(path: str | os.PathLike) -> list[str] | None:
    """The joints a drive file numbers when a calibration wrote it: its results folder's
    ``summary.json`` ``joint_names`` (of a whole robot, the calibrated joints only); None for
    any other drive file (it numbers the model's joints in order)."""
    summary = Path(path).with_name("summary.json")
    if not summary.is_file():
        return None
    try:
        names = json.loads(summary.read_text()).get("joint_names")
    except (ValueError, AttributeError) as error:
        raise WorkbenchError(f"{summary}: not a calibration summary ({error})") from None
    if names is None:
        return None
    distinct = isinstance(names, list) and len(set(map(str, names))) == len(names)
    if not distinct or not all(isinstance(name, str) and name for name in names):
        raise WorkbenchError(f"{summary}: joint_names = {names!r} must be distinct joint names")
    return names


def nominal_drive_values(
    urdf: str | os.PathLike, joint_names: Sequence[str]
) -> dict[str, float] | None:
    """The values of the drive file beside ``urdf`` (:func:`sidecar_path`) numbered by
    ``joint_names``, the joints of the model calibrated now (a file that numbers other joints,
    :func:`numbered_joints`, is renumbered; its coupled motors' terms are left out); None
    without a drive file."""
    return nominal_drive_file(urdf, joint_names)[0]


def nominal_drive_file(
    urdf: str | os.PathLike, joint_names: Sequence[str]
) -> tuple[dict[str, float] | None, Array | None, float]:
    """The drive file beside ``urdf`` for ``joint_names``: its values (as
    :func:`nominal_drive_values`), its Stribeck speeds (n,) [rad/s] (None: no ``stribeck``
    term; 1 rad/s for a joint it does not number) and its sensor delay [s]; (None, None,
    0.0) without a drive file."""
    path = sidecar_path(urdf)
    if not path.is_file():
        return None, None, 0.0
    numbered = numbered_joints(path)
    drives, values = read_drive_file(path, len(joint_names if numbered is None else numbered))
    speeds = np.asarray(drives.stribeck_speed, dtype=float) if "stribeck" in drives.terms else None
    if numbered is None:
        return values, speeds, drives.delay
    check_model_order(numbered, list(joint_names), str(path.with_name("summary.json")))
    now = {name: j + 1 for j, name in enumerate(joint_names)}
    out = {}
    for key, value in values.items():
        prefix, number = re.fullmatch(r"([A-Za-z]+)(\d+)", key).groups()
        joint = None if prefix in ("Iam", "fvm", "fsm") else numbered[int(number) - 1]
        if joint in now:
            out[f"{prefix}{now[joint]}"] = value
    if speeds is not None:
        speed = dict(zip(numbered, speeds.tolist(), strict=True))
        speeds = np.array([speed.get(name, 1.0) for name in joint_names])
    return out, speeds, drives.delay


def read_drive_file(path: str | os.PathLike, n: int) -> tuple[Drives, dict[str, float]]:
    """The terms, transmission and parameter values of a drive file (:func:`drive_file_text`)."""
    path = Path(path)
    top = Section(read_toml(path, "drive file"), str(path))
    terms = tuple(top.strings("terms", choices=TERMS))
    transmission = top.array("transmission", None, shape=(n, n))
    stribeck_speed = top.array("stribeck_speed", None, shape=(n,))
    delay = 1e-3 * top.number("delay_ms", 0.0)
    values = top.section("values")
    try:
        drives = Drives(n, terms, transmission, stribeck_speed=stribeck_speed, delay=delay)
    except WorkbenchError as exc:
        raise WorkbenchError(f"{path}: {exc}") from None
    known = set(drives.names)
    springs = set(stiffness_names(n))
    result = {}
    for name in list(values.table):
        if name not in known | springs:
            raise WorkbenchError(
                f"{values.where(name)}: not a parameter of terms {list(terms)} for {n} joints "
                f"(nor a joint stiffness k1..k{n})"
            )
        limit = None if name in springs else MAX_DRIVE_VALUE  # a stiffness: > 0, no bound
        bounds = {} if limit is None else {"minimum": -limit, "maximum": limit}
        result[name] = values.number(name, positive=name in springs, **bounds)
    values.done()
    top.done()
    return drives, result


def stiffness_names(n: int) -> list[str]:
    """The drive-file names of the joint stiffnesses, ``k1`` .. ``kn`` (N m/rad or N/m: the
    series compliance under gravity of :mod:`workbench.calibration.fitting.compliance`; absent:
    rigid)."""
    return [f"k{j}" for j in range(1, n + 1)]


def drive_file_text(
    drives: Drives,
    values: Array,
    std: Array | None = None,
    note: str = "",
    stiffness: Mapping[str, tuple[float, float]] | None = None,
) -> str:
    """TOML text of drive parameters (joint side, SI), readable by :func:`read_drive_file`;
    ``stiffness`` adds joint stiffnesses (:func:`stiffness_names`: value and std)."""
    lines = [
        "# Drive parameters, joint side, SI units: viscous friction fv [N m s/rad], Coulomb",
        "# friction fs [N m], rotor inertia Ia [kg m^2], torque offset off [N m]; coupled",
        "# motors: Iam, fvm, fsm; Stribeck peak fst [N m] with speeds stribeck_speed",
        "# [rad/s]; load-dependent friction fl [N m per N m of nominal rigid-body torque];",
        "# temperature slopes fvT [N m s/rad/K], fsT [N m/K] about the log's mean",
        "# temperature; torque sensor delay delay_ms [ms] (see workbench.identification.drives);",
        "# joint stiffness k [N m/rad] under gravity (absent: rigid).",
    ]
    lines += [f"# {line}" for line in note.splitlines() if line]
    lines.append(f"terms = [{', '.join(repr(t).replace(chr(39), chr(34)) for t in drives.terms)}]")
    if drives.transmission is not None:
        rows = ", ".join(
            "[" + ", ".join(repr(float(v)) for v in row) + "]" for row in drives.transmission
        )
        lines.append(f"transmission = [{rows}]")
    if "stribeck" in drives.terms:
        speeds = ", ".join(repr(float(v)) for v in drives.stribeck_speed)
        lines.append(f"stribeck_speed = [{speeds}]  # rad/s, exponent {STRIBECK_EXPONENT:g}")
    if "sensor_delay" in drives.terms:
        lines.append(f"delay_ms = {1e3 * drives.delay!r}  # torques lag positions")
    lines.append("")
    lines.append("[values]")
    for k, name in enumerate(drives.names):
        comment = "" if std is None else f"  # std {std[k]:.3g}"
        lines.append(f"{name} = {float(values[k])!r}{comment}")
    for name, (value, deviation) in (stiffness or {}).items():
        lines.append(f"{name} = {float(value)!r}  # std {deviation:.3g}")
    return "\n".join(lines) + "\n"
