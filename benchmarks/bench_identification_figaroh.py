"""FIGAROH 1.0.2 on two real recordings: TX40 dynamic identification and UR10 calibration.

The FIGAROH side of the comparison on real data. Subcommands:

* ``tx40``: dynamic identification of the Staubli TX40 from
  ``/work/shared/data/staubli_tx40`` (45,000 samples at 5 kHz of motor positions
  and motor torques), two FIGAROH variants (plus one extra), scored on one
  common 100 Hz grid with in-sample, blocked 5-fold and end-of-log figures;
* ``ur10``: kinematic calibration of the UR10 from ``/work/shared/data/ur10``
  (23 camera-measured 6D flange poses), leave-one-out over the poses and
  in-sample, for three parameter sets.

The data are FIGAROH's example data (Apache-2.0, see
``/work/shared/data/LICENSE-figaroh-apache-2.0.txt``); the short code copied
from FIGAROH's example (``UR10Calibration.cost_function``) is Apache-2.0,
Copyright Thanh Nguyen and CNRS / Toward SAS.

Setup (FIGAROH is not a dependency of the workbench; separate venv that sees
the workbench venv), then run from the repository root::

    python3.11 -m venv /tmp/figvenv
    echo "import site; site.addsitedir('/work/venv/lib/python3.11/site-packages')" \\
        > /tmp/figvenv/lib/python3.11/site-packages/zz_workvenv.pth
    /tmp/figvenv/bin/pip install figaroh==1.0.2
    /tmp/figvenv/bin/python benchmarks/bench_identification_figaroh.py tx40 [--json tx40.json]
    /tmp/figvenv/bin/python benchmarks/bench_identification_figaroh.py ur10 [--json ur10.json]

``--data DIR`` points at another copy of the data (default ``/work/shared/data``),
``--verbose`` shows FIGAROH's own console output (quality reports).

Common TX40 scoring (functions below, plain numpy, for any identification method)
--------------------------------------------------------------------------------
Joint positions ``q = R^-1 q_motor`` (``R = diag(r)``, ``R[5, 4] = r[5]``),
joint 2 and 3 zeros shifted by -pi/2 and +pi/2; joint torques
``tau = R_t tau_motor`` (``R_t = diag(r)``, ``R_t[4, 5] = r[5]``), with
``r = [32, 32, 45, -48, 45, 32]``. ``decimate_to_100hz`` is the operator D
(``decimate`` by 10 then by 5, zero phase); decimated sample ``i`` sits at raw
index ``50 i`` (900 samples); the first and last 5 are never scored (890 rows).
Target: ``D(tau)``. A method is a ``fit_predict(train_raw)`` callable: fit using
only raw samples with ``train_raw[r]`` true, return its (900, 6) prediction on
the 100 Hz grid. ``score_tx40`` runs in-sample (fit on all, score the 890 rows),
blocked 5-fold CV (fold k = rows with raw index in [9000 k, 9000 (k+1));
predictions of the 5 folds pooled) and the end split (fit on raw index < 36000,
score raw index >= 36000). Relative RMS = ||tau_hat - tau|| / ||tau|| over the
scored rows and 6 joints; per-joint RMS in N m.

FIGAROH on the TX40
-------------------
Both variants run FIGAROH's example class ``TX40Identification`` from
``figaroh_example/utils/staubli_tx40_tools.py``, loaded by file path, unchanged:
``load_robot(urdf, package_dirs)`` -> ``TX40Identification(robot, config)`` ->
``initialize()`` -> ``solve(...)``.

1. "as shipped": ``solve(decimate=True, plotting=False, save_results=False,
   wls=False)``, i.e. the example's arguments except ``plotting`` (display
   only). FIGAROH filters positions (median 5 + Butterworth 4th order 100 Hz),
   differentiates with ``np.gradient``, decimates torques and regressor columns
   by 10 (500 Hz), fits OLS on its QR base regressor. No wrist coupling terms.
2. "original preprocessing": the same, plus ``add_additional_parameters()``
   (wrist coupling Iam6, fvm6, fsm6) before ``solve(decimation_factor=100)``,
   and, per joint j, the decimated rows of joint j's equation whose |dq_j| (its
   ``fv_j`` regressor column) is below ``dq_lim_def[j]`` of ``TX40_config.yaml``
   left out of the fit, as FIGAROH's original TX40 script (which produced
   ``TX40_bp_5_reference.csv``) did. FIGAROH 1.0.2 has no option for this: its
   only row filter in ``solve()`` is the ``_mask_rows`` hook (whole-sample masks
   from a ``TrajectoryData``), so a subclass of the example class overrides that
   hook with the per-joint velocity test; everything else is FIGAROH's ``solve()``
   (same QR base selection, OLS). The subclass also skips ``solve()``'s post-fit
   "validation" on the training data: it rebuilds the regressor without the
   coupling columns and fails (IndexError); it is a report, not part of the fit.
3. extra, not a FIGAROH configuration: "original preprocessing, torques aligned",
   variant 2 with the example's torque/position misalignment removed (see the
   findings: ``_remove_border_effects`` returns the torques untrimmed), to show
   what that bug costs. Not in the total time.

Bringing FIGAROH to the 100 Hz grid: its full-rate base regressor
(``regressor_reduced[:, base columns]``, row k at raw index k, kinematics from
its own filtering) goes through D per joint and is multiplied by
the parameters. For variant 1 this equals ``decimate(W_500Hz @ phi, 5)`` (D is
linear; checked, reported as ``check_500hz_equivalence``); for variant 2 (50 Hz
rows, not on the 100 Hz grid) it is the clean equivalent. Fits on a subset
(folds, end split) reproduce ``solve()`` on a row subset: the same base
regressor (decimated rows, same base-parameter selection, same velocity filter
for variant 2) and the same OLS (``lstsq``) on the rows whose raw index (decimated
row k = raw ``10 k`` or ``100 k``) is allowed; the fit on all rows reproduces
``phi_base`` (``check_lstsq_vs_solve``). In-sample uses FIGAROH's ``phi_base``.
Times: wall time from ``load_robot`` to the return of ``solve()``, one run each;
FIGAROH's imports (with the pinocchio, pandas, matplotlib they pull in) apart.
``solve()``'s post-fit report on the training data (``_compute_validation_metrics``)
is wrapped by a timer (same call) and its share reported.

FIGAROH on the UR10
-------------------
FIGAROH's example ``UR10Calibration`` (a ``BaseCalibration`` with its own cost:
RPY residuals, position weight 1, orientation weight 0.5, ``sqrt(0.001) * var``
rows for every parameter except the first 6 (base) and the last 6 (tip)),
``known_baseframe = known_tipframe = False`` set after construction as the
example does, ``initialize()``, ``solve(plotting=False, enable_logging=False)``
(defaults: LM, up to 3 fits excluding samples above ``outlier_eps`` = 0.02 m).
Pose j is left out with FIGAROH's ``del_list=[j]`` and predicted with
``calc_updated_fkm`` at its joint angles. Rows:

* "frames only (nominal)": FIGAROH has no calibration level with only the base
  and tip frames (levels: ``full_params``, ``joint_offset``); after
  ``initialize()`` the parameter list is cut to the 12 frame parameters
  (``base_*``, ``pEE*_1``, ``phiEE*_1``), same cost and solver;
* "joint_offset": FIGAROH's other level, for reference (frames + the 4 joint
  offsets the frames do not absorb);
* "full_params": the example's level; FIGAROH keeps 30 parameters (6 base, 18
  joint placement, 6 tip) after its structural QR selection and
  ``eliminate_absorbed_parameters``.

Orientation convention: FIGAROH reads ``phix1, phiy1, phiz1`` as roll-pitch-yaw
(``pin.rpy.rpyToMatrix``: R = Rz(phiz) Ry(phiy) Rx(phix)) and its forward model
returns ``matrixToRpy``; it is not a rotation vector. The data agree: with the
nominal URDF and a free base and tip frame, the poses fit to ~3.6 mm / 9 mrad
read as RPY and to ~9 mm / 1.2 rad read as rotation vectors (``convention_check``
in the JSON). Errors here use RPY: position RMS sqrt(mean ||p_pred - p_meas||^2)
[m], orientation RMS sqrt(mean angle(R_pred^T R_meas)^2) [rad].

Adaptations of FIGAROH's example code (all of them)
----------------------------------------------------
* Config: FIGAROH 1.0.2 refuses the legacy configs shipped with the data
  (``TX40_config.yaml``, ``ur10_config.yaml``); they are converted with
  FIGAROH's ``figaroh.utils.config_migration.convert_legacy_to_unified`` (only the
  section the task needs), then: ``extends:`` removed (the template it names is
  not in the wheel; the converter writes a complete task block), ``robot.name``
  set (required by the parser), UR10 ``data.source_file`` set to the CSV path.
  The example scripts name files that are not shipped (``config/TX40_config.yaml``
  is this legacy file; ``config/ur10_config_new.yaml`` is absent).
* UR10 ``coeff_regularize``: the converter writes 0 and 1.0.2 raises on any
  non-zero ``regularization_coefficient`` (removed in 1.0), but the example's cost
  function still reads ``calib_config["coeff_regularize"]``; it is set to the
  config's 0.001 after construction, like ``known_baseframe``.
* UR10 code: ``figaroh_example/utils/ur10_tools.py`` does not import with 1.0.2
  (``get_param_from_yaml`` no longer exists in
  ``figaroh.identification.identification_tools``), so ``UR10Calibration``'s
  ``cost_function`` is copied below (code unchanged, reformatted), in a
  ``BaseCalibration`` subclass named ``UR10Calibration``.
* Paths: the TX40 example reads ``data/curr_data.csv`` and
  ``data/pos_read_data.csv`` relative to the working directory; it runs in a
  temporary directory holding symlinks to the data. The TX40 URDF's
  ``package://staubli_tx40_description`` resolves through a temporary package
  directory (symlink to the data folder, meshes load); the UR10 URDF's meshes
  (``package://ur_description``) are not shipped, so ``<visual>``/``<collision>``
  are stripped from a temporary copy.
* ``plotting=False`` in both examples' ``solve()`` (display only).
* Variant 2 and the frames-only UR10 row, as described above.

Findings (FIGAROH 1.0.2 on this data)
--------------------------------------
* TX40 example: torques are trimmed by 20 samples at both ends
  (``_remove_border_effects``) but positions only at the end
  (``_sync_torque_w_kinematics``), so FIGAROH fits the regressor at raw index k
  against the torque at raw index k + 20 (4 ms late). FIGAROH's original script
  trimmed the positions as well (``low_pass_filter_data``). The common scoring
  here uses aligned torques; variant 3 shows the fit without the shift.
* TX40 example: the wrist coupling (``has_coupled_wrist: True``) is ignored unless
  ``add_additional_parameters()`` is called, and then ``solve()`` fails in its
  post-fit report; ``dq_lim_def`` is parsed, unused.
* UR10: the example's ``ur10_tools.py`` does not import, the config's
  ``coeff_regularize`` is refused (it barely matters here: 0 instead of 0.001
  moves the full_params LOO position RMS by 5 um), and the "rotation vector"
  reading of ``phix/phiy/phiz`` in ``/work/shared/data/README.md`` is neither
  FIGAROH's (RPY) nor the data's.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from scipy import signal
from timing import machine, row

DEFAULT_DATA = Path("/work/shared/data")
REPOSITORY = Path(__file__).resolve().parents[1]

# ── TX40: transmission, grid and splits ─────────────────────────────────────

TX40_RATIOS = np.array([32.0, 32.0, 45.0, -48.0, 45.0, 32.0])
TX40_TS = 2e-4  # s, raw sample period (5 kHz)
TX40_RAW_SAMPLES = 45_000
TX40_STEP = 50  # raw samples per 100 Hz sample
TX40_BORDER = 5  # 100 Hz samples never scored at each end
TX40_FOLD_RAW = 9_000  # raw samples per blocked CV fold
TX40_END_SPLIT_RAW = 36_000  # end split: fit before, score from here


def load_tx40(data_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """Raw TX40 recording: motor positions [rad] and motor torques, each (45000, 6)."""
    folder = data_dir / "staubli_tx40"
    q_motor = np.loadtxt(folder / "pos_read_data.csv", delimiter=",", skiprows=1)
    tau_motor = np.loadtxt(folder / "curr_data.csv", delimiter=",", skiprows=1)
    return q_motor, tau_motor


def tx40_joint_positions(q_motor: np.ndarray) -> np.ndarray:
    """Joint positions (URDF zeros) from motor positions: ``R^-1 q_motor``, joint 2/3 offsets.

    ``R = diag(r)`` with the wrist coupling ``R[5, 4] = r[5]`` (0-based); the
    URDF's joint 2 and joint 3 zeros are -pi/2 and +pi/2 from the encoder zeros.
    """
    red = np.diag(TX40_RATIOS)
    red[5, 4] = TX40_RATIOS[5]
    q = np.linalg.solve(red, np.asarray(q_motor, dtype=float).T).T
    q[:, 1] -= np.pi / 2
    q[:, 2] += np.pi / 2
    return q


def tx40_joint_torques(tau_motor: np.ndarray) -> np.ndarray:
    """Joint torques from motor torques: ``R_t tau_motor``, ``R_t = diag(r)``, ``R_t[4, 5] = r[5]``.

    Rows are samples; returns (n, 6).
    """
    red = np.diag(TX40_RATIOS)
    red[4, 5] = TX40_RATIOS[5]
    return np.asarray(tau_motor, dtype=float) @ red.T


def decimate_to_100hz(x: np.ndarray) -> np.ndarray:
    """Operator D: a raw 5 kHz signal (samples along axis 0) to 100 Hz.

    ``decimate(decimate(x, 10, zero_phase=True), 5, zero_phase=True)`` along
    axis 0 (scipy's order-8 Chebyshev I anti-aliasing filter each time). Output
    sample ``i`` sits at raw index ``50 i``; 45,000 raw samples give 900.
    """
    once = signal.decimate(x, 10, zero_phase=True, axis=0)
    return signal.decimate(once, 5, zero_phase=True, axis=0)


def tx40_target(tau_motor: np.ndarray) -> np.ndarray:
    """Measured joint torques on the 100 Hz grid: ``D(R_t tau_motor)``, (900, 6)."""
    return decimate_to_100hz(tx40_joint_torques(tau_motor))


def tx40_raw_index(n_decimated: int) -> np.ndarray:
    """Raw index of each 100 Hz sample: ``50 i``."""
    return TX40_STEP * np.arange(n_decimated)


def tx40_scored_rows(n_decimated: int) -> np.ndarray:
    """The 100 Hz samples that are scored: all but the first and last 5 (890 of 900)."""
    return np.arange(TX40_BORDER, n_decimated - TX40_BORDER)


def tx40_folds(n_decimated: int, n_folds: int = 5) -> list[np.ndarray]:
    """Blocked CV folds: fold k = scored 100 Hz rows with raw index in [9000 k, 9000 (k+1))."""
    rows = tx40_scored_rows(n_decimated)
    raw = tx40_raw_index(n_decimated)[rows]
    return [rows[raw // TX40_FOLD_RAW == k] for k in range(n_folds)]


def tx40_end_split_rows(n_decimated: int) -> np.ndarray:
    """End split: scored 100 Hz rows with raw index >= 36000 (fit on raw index < 36000)."""
    rows = tx40_scored_rows(n_decimated)
    return rows[tx40_raw_index(n_decimated)[rows] >= TX40_END_SPLIT_RAW]


def relative_rms(predicted: np.ndarray, measured: np.ndarray) -> float:
    """sqrt(sum (pred - meas)^2) / sqrt(sum meas^2) over all samples and joints."""
    return float(np.linalg.norm(predicted - measured) / np.linalg.norm(measured))


def per_joint_rms(predicted: np.ndarray, measured: np.ndarray) -> list[float]:
    """RMS error of each joint (column) over the samples, in the signal's unit (N m)."""
    return np.sqrt(np.mean((predicted - measured) ** 2, axis=0)).tolist()


def _figures(predicted: np.ndarray, measured: np.ndarray) -> dict:
    return {
        "relative_rms": relative_rms(predicted, measured),
        "per_joint_rms": per_joint_rms(predicted, measured),
        "rows": len(measured),
    }


def score_tx40(
    fit_predict: Callable[[np.ndarray], np.ndarray],
    target: np.ndarray,
    raw_samples: int = TX40_RAW_SAMPLES,
) -> dict:
    """In-sample, blocked 5-fold and end-split figures of one identification method.

    Args:
        fit_predict: ``fit_predict(train_raw)`` fits using only the raw samples
            ``r`` with ``train_raw[r]`` true (a bool array of ``raw_samples``;
            filtering may use the whole signal, only the fitted rows are
            restricted) and returns the predicted joint torques on the 100 Hz
            grid, shape ``target.shape`` (900, 6).
        target: measured joint torques on the 100 Hz grid, ``tx40_target``.

    Returns:
        ``{"in_sample", "cv5", "end_split"}``, each with ``relative_rms``,
        ``per_joint_rms`` [N m] and ``rows``; ``cv5`` also ``fold_relative_rms``.
        CV pools the 5 folds' held-out predictions before computing the figures.
    """
    n = len(target)
    raw = np.arange(raw_samples)
    rows = tx40_scored_rows(n)
    out = {"in_sample": _figures(fit_predict(np.ones(raw_samples, bool))[rows], target[rows])}

    pooled = np.full(target.shape, np.nan)
    fold_figures = []
    for k, fold in enumerate(tx40_folds(n)):
        pred = fit_predict(raw // TX40_FOLD_RAW != k)
        pooled[fold] = pred[fold]
        fold_figures.append(relative_rms(pred[fold], target[fold]))
    out["cv5"] = _figures(pooled[rows], target[rows])
    out["cv5"]["fold_relative_rms"] = fold_figures

    test = tx40_end_split_rows(n)
    pred = fit_predict(raw < TX40_END_SPLIT_RAW)
    out["end_split"] = _figures(pred[test], target[test])
    return out


def load_tx40_reference(data_dir: Path) -> dict[str, dict]:
    """Published base parameters: name -> value (OLS), rel. std %, second (WLS) value, std %."""
    out = {}
    for line in (data_dir / "staubli_tx40" / "TX40_bp_5_reference.csv").read_text().splitlines():
        if not line.strip():
            continue
        name, value, std, value2, std2 = line.rsplit(",", 4)
        out[name.strip()] = {
            "value": float(value),
            "rel_std_pct": float(std),
            "value_wls": float(value2),
            "rel_std_wls_pct": float(std2),
        }
    return out


# ── UR10: poses, convention, errors ─────────────────────────────────────────

UR10_JOINTS = (
    "shoulder_pan_joint",
    "shoulder_lift_joint",
    "elbow_joint",
    "wrist_1_joint",
    "wrist_2_joint",
    "wrist_3_joint",
)


def rpy_to_matrix(rpy: np.ndarray) -> np.ndarray:
    """Rotation matrices from roll-pitch-yaw, FIGAROH's (pinocchio's) convention.

    ``R = Rz(yaw) Ry(pitch) Rx(roll)`` for each row ``(roll, pitch, yaw)`` =
    ``(phix, phiy, phiz)``; returns (n, 3, 3).
    """
    r, p, y = np.atleast_2d(rpy).T
    cr, sr, cp, sp, cy, sy = np.cos(r), np.sin(r), np.cos(p), np.sin(p), np.cos(y), np.sin(y)
    return np.stack(
        [
            np.stack([cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr], -1),
            np.stack([sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr], -1),
            np.stack([-sp, cp * sr, cp * cr], -1),
        ],
        -2,
    )


def load_ur10(data_dir: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """UR10 poses: joint angles (23, 6), flange positions (23, 3) [m], RPY (23, 3), R (23, 3, 3)."""
    path = data_dir / "ur10" / "calibration.csv"
    header = path.read_text().splitlines()[0].split(",")
    table = np.loadtxt(path, delimiter=",", skiprows=1)
    col = {name: i for i, name in enumerate(header)}
    q = table[:, [col[j] for j in UR10_JOINTS]]
    p = table[:, [col[c] for c in ("x1", "y1", "z1")]]
    rpy = table[:, [col[c] for c in ("phix1", "phiy1", "phiz1")]]
    return q, p, rpy, rpy_to_matrix(rpy)


def rotation_angles(r_pred: np.ndarray, r_meas: np.ndarray) -> np.ndarray:
    """Angle [rad] of ``R_pred^T R_meas`` for each pair of (n, 3, 3) rotation stacks.

    ``atan2(|axis part|, (trace - 1) / 2)``, accurate for small angles too.
    """
    m = np.einsum("nji,njk->nik", r_pred, r_meas)
    axis = np.stack([m[:, 2, 1] - m[:, 1, 2], m[:, 0, 2] - m[:, 2, 0], m[:, 1, 0] - m[:, 0, 1]], 1)
    cos = (np.trace(m, axis1=1, axis2=2) - 1.0) / 2.0
    return np.arctan2(np.linalg.norm(axis, axis=1) / 2.0, cos)


def pose_rms(
    p_pred: np.ndarray, r_pred: np.ndarray, p_meas: np.ndarray, r_meas: np.ndarray
) -> tuple[float, float]:
    """(position RMS [m], orientation RMS [rad]) = sqrt(mean ||dp||^2), sqrt(mean angle^2)."""
    pos = float(np.sqrt(np.mean(np.sum((p_pred - p_meas) ** 2, axis=1))))
    ori = float(np.sqrt(np.mean(rotation_angles(r_pred, r_meas) ** 2)))
    return pos, ori


def score_ur10(
    fit_predict: Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
    p_meas: np.ndarray,
    r_meas: np.ndarray,
) -> dict:
    """Leave-one-out and in-sample pose errors of one calibration method.

    Args:
        fit_predict: ``fit_predict(train, test)`` calibrates on the poses with
            indices ``train`` and returns the predicted flange positions (len(test), 3)
            [m] and rotations (len(test), 3, 3) at the poses ``test``.
        p_meas, r_meas: measured positions (n, 3) and rotations (n, 3, 3).

    Returns:
        ``loo`` and ``in_sample`` position/orientation RMS, per-pose LOO errors,
        wall time of every fit (``fit_predict`` call).
    """
    n = len(p_meas)
    every = np.arange(n)
    p_loo, r_loo, seconds = np.zeros((n, 3)), np.zeros((n, 3, 3)), []
    for j in range(n):
        start = time.perf_counter()
        p, r = fit_predict(np.delete(every, j), np.array([j]))
        seconds.append(time.perf_counter() - start)
        p_loo[j], r_loo[j] = p[0], r[0]
    start = time.perf_counter()
    p_in, r_in = fit_predict(every, every)
    in_seconds = time.perf_counter() - start
    loo = pose_rms(p_loo, r_loo, p_meas, r_meas)
    ins = pose_rms(p_in, r_in, p_meas, r_meas)
    return {
        "loo_position_rms": loo[0],
        "loo_orientation_rms": loo[1],
        "in_sample_position_rms": ins[0],
        "in_sample_orientation_rms": ins[1],
        "loo_position_errors": np.linalg.norm(p_loo - p_meas, axis=1).tolist(),
        "loo_orientation_errors": rotation_angles(r_loo, r_meas).tolist(),
        "loo_fit_seconds": seconds,
        "loo_seconds_total": float(sum(seconds)),
        "in_sample_fit_seconds": in_seconds,
    }


# ── FIGAROH plumbing ────────────────────────────────────────────────────────


class _ListHandler(logging.Handler):
    def __init__(self, sink: list[str]):
        super().__init__(logging.WARNING)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        self.sink.append(f"{record.name} {record.levelname}: {record.getMessage()}")


@contextlib.contextmanager
def figaroh_output(messages: list[str], verbose: bool) -> Iterator[None]:
    """Collect FIGAROH's warnings (``warnings`` and logging >= WARNING); hide its prints."""
    handler = _ListHandler(messages)
    loggers = [logging.getLogger("figaroh"), logging.getLogger("calibration")]
    for lg in loggers:
        lg.addHandler(handler)
    sink = contextlib.nullcontext() if verbose else contextlib.redirect_stdout(io.StringIO())
    try:
        with sink, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        for lg in loggers:
            lg.removeHandler(handler)
    messages.extend(f"{w.category.__name__}: {w.message}" for w in caught)


@contextlib.contextmanager
def working_directory(path: Path) -> Iterator[None]:
    old = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def unique_messages(messages: list[str]) -> list[dict]:
    """Distinct messages with their counts, first-seen order."""
    counts: dict[str, int] = {}
    for m in messages:
        counts[m] = counts.get(m, 0) + 1
    return [{"message": m, "count": c} for m, c in counts.items()]


def unified_config(legacy_yaml: Path, section: str, robot_name: str, out: Path, **data) -> Path:
    """FIGAROH's own legacy -> unified conversion of one section, written to ``out``.

    ``extends`` is dropped (the template is not shipped in the wheel; the
    converter writes a complete task block) and ``robot.name`` is set.
    """
    import yaml
    from figaroh.utils.config_migration import convert_legacy_to_unified

    legacy = yaml.safe_load(legacy_yaml.read_text())
    config = convert_legacy_to_unified({section: legacy[section]})
    config.pop("extends", None)
    config["tasks"] = {section: config["tasks"][section]}
    config.setdefault("robot", {})["name"] = robot_name
    config["tasks"][section].setdefault("data", {}).update(data)
    out.write_text(yaml.safe_dump(config, sort_keys=False))
    return out


def load_module(name: str, path: Path):
    """Import a file as module ``name`` (the examples' ``utils`` packages are not installed)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def fmt(x: float, spec: str = ".3f") -> str:
    return "-" if x is None or not np.isfinite(x) else format(x, spec)


# ── TX40 with FIGAROH ───────────────────────────────────────────────────────


def original_preprocessing_class(tx40_class, aligned: bool = False):
    """The example's ``TX40Identification`` with FIGAROH's row-mask hook doing the
    original low-velocity filter: per joint j, the decimated rows of joint j's
    equation with |dq_j| (its ``fv_j`` column) below ``dq_lim_def[j]`` are left out.

    ``aligned``: also keep the torques' first 20 samples (the example drops them
    but not the positions', so torque row k would be raw sample k + 20).
    """

    class TX40OriginalPreprocessing(tx40_class):
        def _mask_rows(self, tau, regressor, factor=1):
            names = list(self.active_parameters)
            joints = self.identif_config["active_joints"]
            limits = self.identif_config["dq_lim_def"]
            n = len(tau) // len(joints)
            keep = np.ones(len(tau), bool)
            for j, joint in enumerate(joints):
                block = slice(j * n, (j + 1) * n)
                column = names.index(f"fv_{joint}")
                keep[block] = np.abs(regressor[block, column]) >= limits[j]
            self.fit_row_mask = keep
            return tau[keep], regressor[keep]

        def _compute_validation_metrics(self):
            # solve()'s post-fit "validation" on the training data rebuilds the
            # regressor without the coupling columns add_additional_parameters()
            # appended, then indexes it with the base columns: IndexError. Skipped.
            return None

    if not aligned:
        return TX40OriginalPreprocessing

    class TX40OriginalAligned(TX40OriginalPreprocessing):
        def _remove_border_effects(self, tau_processed, filter_params):
            return tau_processed  # torque row k = raw sample k, like the positions

    return TX40OriginalAligned


class FigarohTx40Model:
    """FIGAROH's identified TX40 model as a ``fit_predict(train_raw)`` for ``score_tx40``.

    Keeps what FIGAROH's ``solve()`` fitted on (its decimated base regressor and
    torques, and the rows it used) and its full-rate base regressor through D.
    """

    def __init__(self, ident, factor: int):
        base = list(ident._base_indices)
        joints = len(ident.identif_config["act_idxv"])
        n_dec = len(ident.tau_decimated) // joints
        self.w_dec = ident.regressor_decimated[:, base]
        self.tau_dec = np.asarray(ident.tau_decimated)
        self.fit_rows = getattr(ident, "fit_row_mask", np.ones(len(self.tau_dec), bool))
        self.row_raw = np.tile(factor * np.arange(n_dec), joints)
        self.phi = np.asarray(ident.phi_base, dtype=float)
        n = ident.num_samples
        w_full = ident.regressor_reduced
        # (joints, 900, n_base): D of each joint block of the full-rate base regressor
        self.w_100 = np.stack(
            [decimate_to_100hz(w_full[j * n : (j + 1) * n][:, base]) for j in range(joints)]
        )
        self.check_lstsq = float(
            np.max(np.abs(self.fit(np.ones(factor * n_dec, bool), own=False) - self.phi))
            / np.max(np.abs(self.phi))
        )
        self.check_500hz = None
        if factor == 10:  # D(W_full) @ phi == decimate(W_500Hz @ phi, 5)
            via_500 = np.stack(
                [
                    signal.decimate(
                        self.w_dec[j * n_dec : (j + 1) * n_dec] @ self.phi, 5, zero_phase=True
                    )
                    for j in range(joints)
                ],
                axis=1,
            )
            self.check_500hz = float(np.max(np.abs(via_500 - self.predict(self.phi))))

    def predict(self, phi: np.ndarray) -> np.ndarray:
        """Joint torques on the 100 Hz grid, (900, joints)."""
        return np.einsum("jib,b->ij", self.w_100, phi)

    def fit(self, train_raw: np.ndarray, own: bool = True) -> np.ndarray:
        """FIGAROH's OLS on the allowed rows; its own ``phi_base`` when all rows are allowed."""
        rows = self.fit_rows & train_raw[self.row_raw]
        if own and rows.sum() == self.fit_rows.sum():
            return self.phi
        return np.linalg.lstsq(self.w_dec[rows], self.tau_dec[rows], rcond=None)[0]

    def __call__(self, train_raw: np.ndarray) -> np.ndarray:
        return self.predict(self.fit(train_raw))


REQUESTED_TX40_VARIANTS = ("as_shipped", "original")

PARAMETER_KEYS = [f"{p}{j}" for p in ("fv", "fs", "Ia", "off") for j in range(1, 7)] + [
    "Iam6",
    "fvm6",
    "fsm6",
]


def _terms(expression: str) -> list[str]:
    """Parameter names in a base-parameter expression, reference style (``fv_joint_1``: ``fv1``)."""
    return re.findall(r"(?<![\w.])([A-Za-z]+\d)\b", expression.replace("_joint_", ""))


def parameter_value(names: list[str], values, key: str) -> dict | None:
    """The base parameter that is ``key`` or that regroups it: value, expression, regrouped?"""
    for name, value in zip(names, values, strict=True):
        terms = _terms(name)
        if key in terms:
            return {"value": float(value), "expression": name, "regrouped": len(terms) > 1}
    return None


def run_figaroh_tx40(variant: str, tx40_module, paths: dict, verbose: bool) -> dict:
    """One FIGAROH run, timed from ``load_robot`` to the return of ``solve()``."""
    from figaroh.tools.robot import load_robot

    original = variant.startswith("original")
    cls = tx40_module.TX40Identification
    if original:
        cls = original_preprocessing_class(cls, aligned=variant == "original_aligned")
    messages: list[str] = []
    with working_directory(paths["workdir"]), figaroh_output(messages, verbose):
        start = time.perf_counter()
        robot = load_robot(str(paths["urdf"]), package_dirs=str(paths["packages"]))
        ident = cls(robot, str(paths["config"]))
        ident.initialize()
        validation_seconds = []
        post_fit_validation = ident._compute_validation_metrics

        def timed_validation():  # same call, timed: solve()'s training-data report
            t0 = time.perf_counter()
            try:
                return post_fit_validation()
            finally:
                validation_seconds.append(time.perf_counter() - t0)

        ident._compute_validation_metrics = timed_validation
        if original:
            ident.add_additional_parameters()
            ident.solve(
                decimate=True, decimation_factor=100, plotting=False, save_results=False, wls=False
            )
        else:
            # the example's arguments (identification.py), plotting off
            ident.solve(decimate=True, plotting=False, save_results=False, wls=False)
        seconds = time.perf_counter() - start
    factor = 100 if original else 10
    model = FigarohTx40Model(ident, factor)
    n_dec = len(model.tau_dec) // 6
    fit = model.fit_rows
    own = model.tau_dec[fit] - model.w_dec[fit] @ model.phi
    return {
        "model": model,
        "seconds": seconds,
        "post_fit_validation_seconds": float(sum(validation_seconds)),
        "decimation": factor,
        "base_parameters": len(ident.phi_base),
        "fit_rows": int(model.fit_rows.sum()),
        "fit_rows_per_joint": model.fit_rows.reshape(6, n_dec).sum(axis=1).tolist(),
        "params_base": list(ident.params_base),
        "phi_base": [float(v) for v in ident.phi_base],
        "figaroh_effort_rmse": float(ident.rms_error),
        # FIGAROH's own residual on the rows it fitted (its decimation, its torque rows)
        "figaroh_own_relative_residual": float(
            np.linalg.norm(own) / np.linalg.norm(model.tau_dec[fit])
        ),
        "check_lstsq_vs_solve": model.check_lstsq,
        "check_500hz_equivalence": model.check_500hz,
        "messages": unique_messages(messages),
    }


# ── the workbench, same data, same scoring ──────────────────────────────────


def workbench_tx40() -> dict:
    """The workbench's identification (models/staubli_tx40/identification.toml), scored here.

    Fits use the project's own pipeline (Butterworth-filtered positions,
    parallel FIR decimation to 100 Hz, per-joint WLS, rows below 1 % of the
    velocity limit left out); the predicted full-rate torques ``W(q, dq, ddq)
    beta`` go through the common operator D like FIGAROH's. "nominal" is the
    URDF with the published drive parameters (``tx40.drives.toml``), no fit.
    """
    import workbench as wb
    from workbench.calibration.problems.kinds import DynamicProblem, Options
    from workbench.identification.drives import read_drive_file, sidecar_path
    from workbench.recordings.log_files import read_log

    start = time.perf_counter()
    chain = wb.models.load("staubli_tx40")
    log = read_log(REPOSITORY / "models" / "staubli_tx40" / "identification.toml", chain)
    nominal = read_drive_file(sidecar_path(wb.models.urdf_path("staubli_tx40")), chain.n)[1]
    problem = DynamicProblem(chain, log, Options(nominal_drives=nominal))
    fit = problem.fit(None)
    seconds = time.perf_counter() - start
    raw_of_row = np.rint(problem.times / TX40_TS).astype(np.int64)
    W = problem.model.columns(log.q, log.dq, log.ddq, select=problem.base.independent)

    def fit_predict(train_raw: np.ndarray) -> np.ndarray:
        beta = problem.fit(np.flatnonzero(train_raw[raw_of_row])).beta
        return decimate_to_100hz(W @ beta)

    def nominal_predict(train_raw: np.ndarray) -> np.ndarray:
        return decimate_to_100hz(W @ (problem.base.matrix @ problem.x0))

    parameters = {k: parameter_value(list(problem.base.names), fit.beta, k) for k in PARAMETER_KEYS}
    command = [
        sys.executable, "-m", "workbench.cli", "calibrate", "--model", "staubli_tx40",
        "--log", str(REPOSITORY / "models" / "staubli_tx40" / "identification.toml"),
        "--kind", "dynamic", "--quiet",
    ]  # fmt: skip
    cli = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(3):
            begin = time.perf_counter()
            subprocess.run([*command, "--out", f"{tmp}/out{k}"], check=True, capture_output=True)
            cli.append(time.perf_counter() - begin)
    return {
        "fit_predict": fit_predict,
        "nominal_predict": nominal_predict,
        "seconds": seconds,
        "cli_seconds": cli,
        "base_parameters": len(problem.base.names),
        "fit_rows": fit.rows,
        "parameters": parameters,
    }


def workbench_ur10() -> dict:
    """The workbench's kinematic calibration (models/ur10/calibration.toml): fit_predict callables.

    Calibrated: joint twists, flange marker frame and camera frame (LM on the
    analytic Jacobian, rotation weight from the residuals); nominal: the camera
    and marker frames only, joints nominal.
    """
    import workbench as wb
    from workbench.calibration.problems.kinds import KinematicCalibrationProblem, Options
    from workbench.recordings.log_files import read_log

    chain = wb.models.load("ur10e")
    log = read_log(REPOSITORY / "models" / "ur10" / "calibration.toml", chain)
    problem = KinematicCalibrationProblem(chain, log, Options())

    def method(fit_of):
        def fit_predict(train: np.ndarray, test: np.ndarray):
            fit = fit_of(train)
            ((p, R),) = problem.problem.subset(test).predict(fit.model)
            return p, R

        return fit_predict

    return {"calibrated": method(problem.fit), "nominal": method(problem.baseline)}


def tx40(args) -> dict:
    start = time.perf_counter()
    import figaroh.identification.base_identification
    import figaroh.tools.robot
    import figaroh.utils.config_migration

    tx40_module = load_module(
        "figaroh_example_staubli_tx40_tools",
        args.data / "staubli_tx40" / "figaroh_example" / "utils" / "staubli_tx40_tools.py",
    )
    import_seconds = time.perf_counter() - start

    q_motor, tau_motor = load_tx40(args.data)
    target = tx40_target(tau_motor)
    reference = load_tx40_reference(args.data)
    variants = {
        "as_shipped": "as shipped",
        "original": "original preprocessing",
        "original_aligned": "original preprocessing, torques aligned (extra)",
    }
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "data").mkdir()
        (tmp / "packages").mkdir()
        folder = args.data / "staubli_tx40"
        for name in ("curr_data.csv", "pos_read_data.csv"):
            (tmp / "data" / name).symlink_to(folder / name)
        (tmp / "packages" / "staubli_tx40_description").symlink_to(folder.resolve())
        paths = {
            "workdir": tmp,
            "urdf": folder.resolve() / "tx40_mdh_modified.urdf",
            "packages": tmp / "packages",
            "config": unified_config(
                folder / "TX40_config.yaml", "identification", "staubli_tx40", tmp / "tx40.yaml"
            ),
        }
        for key in variants:
            run = run_figaroh_tx40(key, tx40_module, paths, args.verbose)
            run["scores"] = score_tx40(run.pop("model"), target)
            run["parameters"] = {
                k: parameter_value(run["params_base"], run["phi_base"], k) for k in PARAMETER_KEYS
            }
            runs[key] = run

    ours = workbench_tx40()
    ours["scores"] = score_tx40(ours.pop("fit_predict"), target)
    nominal = score_tx40(ours.pop("nominal_predict"), target)
    published = {
        k: parameter_value(list(reference), [v["value"] for v in reference.values()], k)
        for k in PARAMETER_KEYS
    }
    for entry in published.values():
        if entry is not None:
            entry["value_wls"] = reference[entry["expression"]]["value_wls"]

    print(machine())
    import figaroh

    version = getattr(figaroh, "__version__", "1.0.2")
    print(f"figaroh {version}; FIGAROH imports (with what they pull in): {import_seconds:.2f} s\n")
    print(
        f"TX40, {len(q_motor)} raw samples at 5 kHz; scored on the 100 Hz grid "
        f"({len(tx40_scored_rows(len(target)))} rows), relative RMS ||tau_hat - tau|| / ||tau||\n"
    )
    print(
        row(
            "FIGAROH variant",
            "decimation",
            "base params",
            "fit rows",
            "load -> solution [s]",
            "of which post-fit validation [s]",
            "FIGAROH's own fit residual",
            "in-sample",
            "5-fold CV",
            "end split (raw >= 36000)",
        )
    )
    print(row(*["---"] * 10))
    total = 0.0
    for key, label in variants.items():
        r = runs[key]
        s = r["scores"]
        if key in REQUESTED_TX40_VARIANTS:
            total += r["seconds"]
        print(
            row(
                label,
                r["decimation"],
                r["base_parameters"],
                r["fit_rows"],
                f"{r['seconds']:.2f}",
                f"{r['post_fit_validation_seconds']:.2f}",
                fmt(r["figaroh_own_relative_residual"]),
                fmt(s["in_sample"]["relative_rms"]),
                fmt(s["cv5"]["relative_rms"]),
                fmt(s["end_split"]["relative_rms"]),
            )
        )
    s = ours["scores"]
    print(
        row(
            "workbench (identification.toml)",
            50,
            ours["base_parameters"],
            ours["fit_rows"],
            f"{ours['seconds']:.2f}",
            "-",
            "-",
            fmt(s["in_sample"]["relative_rms"]),
            fmt(s["cv5"]["relative_rms"]),
            fmt(s["end_split"]["relative_rms"]),
        )
    )
    print(
        row(
            "nominal: URDF + published drive parameters",
            "-", "-", "-", "-", "-", "-",
            fmt(nominal["in_sample"]["relative_rms"]),
            fmt(nominal["cv5"]["relative_rms"]),
            fmt(nominal["end_split"]["relative_rms"]),
        )
    )  # fmt: skip
    cli = sorted(ours["cli_seconds"])
    print(
        f"\nworkbench calibrate --model staubli_tx40 --log .../identification.toml --kind "
        f"dynamic, whole command (interpreter start, imports, reading, 6 fits, plots, URDF): "
        f"median {cli[1]:.2f} s of 3 (min {cli[0]:.2f}, max {cli[2]:.2f})."
    )
    print(
        f"\nTotal FIGAROH time (as shipped + original preprocessing, imports excluded): "
        f"{total:.2f} s. The first run in the process carries a one-time warm-up (~0.7 s here). "
        "FIGAROH's own fit residual: ||tau - W phi|| / ||tau|| on the rows it fitted (its "
        "decimation, its torque rows); the other figures use the common 100 Hz scoring.\n"
    )

    print("Per-joint RMS [N m]\n")
    print(row("FIGAROH variant", "figure", *[f"joint {j}" for j in range(1, 7)]))
    print(row(*["---"] * 8))
    for key, label in variants.items():
        for fig, fig_label in (
            ("in_sample", "in-sample"),
            ("cv5", "5-fold CV"),
            ("end_split", "end split"),
        ):
            values = runs[key]["scores"][fig]["per_joint_rms"]
            print(row(label, fig_label, *[f"{v:.3f}" for v in values]))
    for label, scores in (("workbench", ours["scores"]), ("nominal", nominal)):
        for fig, fig_label in (("in_sample", "in-sample"), ("cv5", "5-fold CV")):
            values = scores[fig]["per_joint_rms"]
            print(row(label, fig_label, *[f"{v:.3f}" for v in values]))
    print("\n5-fold CV, relative RMS of each fold\n")
    print(row("FIGAROH variant", *[f"fold {k}" for k in range(5)]))
    print(row(*["---"] * 6))
    for key, label in variants.items():
        folds = runs[key]["scores"]["cv5"]["fold_relative_rms"]
        print(row(label, *[f"{v:.3f}" for v in folds]))

    print(
        "\nIdentified vs published (TX40_bp_5_reference.csv: OLS value, second column WLS); "
        "* = regrouped base parameter (its expression, not the parameter alone; "
        "expressions may differ between the two)\n"
    )
    print(row("parameter", "published", "published (WLS)", *variants.values(), "workbench"))
    print(row(*["---"] * (4 + len(variants))))

    def cell(entry, key="value"):
        if entry is None:
            return "-"
        return f"{entry[key]:.4g}" + ("*" if entry["regrouped"] else "")

    for k in PARAMETER_KEYS:
        print(
            row(
                k,
                cell(published[k]),
                cell(published[k], "value_wls"),
                *[cell(runs[v]["parameters"][k]) for v in variants],
                cell(ours["parameters"][k]),
            )
        )
    print("\nChecks and FIGAROH messages\n")
    for key, label in variants.items():
        r = runs[key]
        print(
            f"- {label}: max |lstsq(all rows) - phi_base| / max|phi_base| = "
            f"{r['check_lstsq_vs_solve']:.1e}"
            + (
                f"; max |D(W_full) phi - decimate(W_500Hz phi, 5)| = "
                f"{r['check_500hz_equivalence']:.1e} N m"
                if r["check_500hz_equivalence"] is not None
                else ""
            )
            + f"; fit rows per joint {r['fit_rows_per_joint']}"
        )
        for m in r["messages"]:
            print(f"  - ({m['count']}x) {m['message'][:300]}")
    return {
        "machine": machine(),
        "figaroh_version": version,
        "import_seconds": import_seconds,
        "total_seconds": total,
        "scored_rows": len(tx40_scored_rows(len(target))),
        "variants": {variants[k]: runs[k] for k in variants},
        "workbench": ours,
        "nominal": nominal,
        "published": published,
    }


# ── UR10 with FIGAROH ───────────────────────────────────────────────────────


def ur10_calibration_class():
    from figaroh.calibration.base_calibration import BaseCalibration
    from figaroh.calibration.calibration_tools import calc_updated_fkm

    class UR10Calibration(BaseCalibration):
        """FIGAROH's example UR10Calibration (figaroh_example/utils/ur10_tools.py), cost copied."""

        def cost_function(self, var):
            coeff_ = self.calib_config["coeff_regularize"]
            PEEe = calc_updated_fkm(self.model, self.data, var, self.q_measured, self.calib_config)

            # Main residual: difference between measured and estimated poses
            raw_residuals = self.PEE_measured - PEEe

            # Apply unit-aware weighting using BaseCalibration utility method
            # This handles position (meters) vs orientation (radians) properly
            weighted_residuals = self.apply_measurement_weighting(
                raw_residuals, pos_weight=1.0, orient_weight=0.5
            )

            # Regularization term for intermediate parameters (excludes base/tip)
            # This helps stabilize optimization for UR10's 6-DOF kinematic chain
            n_base_params = 6  # Base frame parameters
            n_markers = self.calib_config["NbMarkers"]
            n_tip_params = n_markers * self.calib_config["calibration_index"]
            regularization_params = var[n_base_params:-n_tip_params]
            regularization_residuals = np.sqrt(coeff_) * regularization_params

            # Combine residuals
            res_vect = np.append(weighted_residuals, regularization_residuals)
            return res_vect

    return UR10Calibration


UR10_LEVELS = {
    "frames only (nominal)": "full_params",
    "joint_offset": "joint_offset",
    "full_params": "full_params",
}


class FigarohUr10:
    """FIGAROH's UR10 calibration at one level, as ``fit_predict(train, test)`` (``score_ur10``)."""

    def __init__(self, label, robot, config, q_all, coeff_regularize, verbose):
        self.label, self.robot, self.config = label, robot, config
        self.q_all, self.coeff, self.verbose = q_all, coeff_regularize, verbose
        self.cls = ur10_calibration_class()
        self.messages: list[str] = []
        self.fits: list[dict] = []

    def __call__(self, train: np.ndarray, test: np.ndarray):
        import pinocchio as pin
        from figaroh.calibration.calibration_tools import calc_updated_fkm

        n = len(self.q_all)
        del_list = sorted(set(range(n)) - {int(i) for i in train})
        with figaroh_output(self.messages, self.verbose):
            cal = self.cls(self.robot, str(self.config), del_list=del_list)
            cal.calib_config["known_baseframe"] = False
            cal.calib_config["known_tipframe"] = False
            cal.calib_config["coeff_regularize"] = self.coeff
            cal.initialize()
            if self.label.startswith("frames only"):
                cal.calib_config["param_name"] = cal._frame_param_names()
            result = cal.solve(plotting=False, enable_logging=False)
        cfg = cal.calib_config
        self.fits.append(
            {
                "left_out": del_list,
                "parameters": len(cfg["param_name"]),
                "success": bool(result.success),
                "nfev": int(result.nfev),
                "excluded_outliers": [int(i) for i in cal.outlier_indices],
            }
        )
        q = np.tile(np.asarray(cfg["q0"], dtype=float), (len(test), 1))
        q[:, cfg["config_idx"]] = self.q_all[test]
        pee = calc_updated_fkm(cal.model, cal.data, result.x, q, dict(cfg, NbSample=len(test)))
        pee = pee.reshape(6, len(test)).T
        r = np.stack([pin.rpy.rpyToMatrix(v) for v in pee[:, 3:]])
        self.param_name = list(cfg["param_name"])
        return pee[:, :3], r


def convention_check(model_urdf: Path, q, p, rpy, starts: int = 10) -> dict:
    """Which orientation reading fits the nominal URDF: best base+tip frame fit, RPY vs rotvec.

    Fits a free base frame and a free tip frame (12 parameters, LM from
    ``starts`` random starts) to the 23 poses with the nominal URDF kinematics,
    reading ``phix/phiy/phiz`` once as roll-pitch-yaw and once as a rotation vector.
    """
    import pinocchio as pin
    from scipy.optimize import least_squares

    model = pin.buildModelFromUrdf(str(model_urdf))
    data = model.createData()
    frame = model.getFrameId("wrist_3_link")
    poses = []
    for qi in q:
        pin.framesForwardKinematics(model, data, qi)
        poses.append(data.oMf[frame].copy())
    rng = np.random.default_rng(0)
    out = {}
    for name, rot in (
        ("rpy", [pin.rpy.rpyToMatrix(v) for v in rpy]),
        ("rotation_vector", [pin.exp3(v) for v in rpy]),
    ):

        def residuals(x, rot=rot):
            base = pin.SE3(pin.exp3(x[3:6]), x[:3])
            tip = pin.SE3(pin.exp3(x[9:12]), x[6:9])
            res = []
            for pose, pi, ri in zip(poses, p, rot, strict=True):
                m = base * pose * tip
                res.append(np.r_[m.translation - pi, 0.5 * pin.log3(ri.T @ m.rotation)])
            return np.concatenate(res)

        best = None
        for _ in range(starts):
            x0 = np.r_[
                rng.normal(0, 1, 3), rng.normal(0, 2, 3), rng.normal(0, 0.1, 3), rng.normal(0, 2, 3)
            ]
            sol = least_squares(residuals, x0, method="lm")
            if best is None or sol.cost < best.cost:
                best = sol
        res = best.fun.reshape(-1, 6)
        out[name] = {
            "position_rms": float(np.sqrt(np.mean(np.sum(res[:, :3] ** 2, axis=1)))),
            "orientation_rms": float(np.sqrt(np.mean(np.sum((2 * res[:, 3:]) ** 2, axis=1)))),
        }
    return out


def ur10(args) -> dict:
    start = time.perf_counter()
    import figaroh.calibration.base_calibration
    import figaroh.calibration.calibration_tools
    import figaroh.tools.robot
    import figaroh.utils.config_migration

    import_seconds = time.perf_counter() - start
    from figaroh.tools.robot import load_robot

    q, p, rpy, rot = load_ur10(args.data)
    folder = args.data / "ur10"
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        urdf = tmp / "ur10_robot.urdf"
        text = (folder / "ur10_robot.urdf").read_text()
        urdf.write_text(re.sub(r"<(visual|collision)\b.*?</\1>", "", text, flags=re.S))
        robot = load_robot(str(urdf), package_dirs=str(tmp), load_by_urdf=True)
        configs = {}
        for level in set(UR10_LEVELS.values()):
            config = unified_config(
                folder / "ur10_config.yaml",
                "calibration",
                "ur10",
                tmp / f"ur10_{level}.yaml",
                source_file=str((folder / "calibration.csv").resolve()),
            )
            if level != "full_params":
                text = config.read_text().replace(
                    "calibration_level: full_params", f"calibration_level: {level}"
                )
                config.write_text(text)
            configs[level] = config
        import yaml

        legacy = yaml.safe_load((folder / "ur10_config.yaml").read_text())["calibration"]
        coeff = float(legacy["coeff_regularize"])
        for label, level in UR10_LEVELS.items():
            method = FigarohUr10(label, robot, configs[level], q, coeff, args.verbose)
            scores = score_ur10(method, p, rot)
            scores.update(
                calibration_level=level,
                parameters=method.fits[-1]["parameters"],
                parameter_names=method.param_name,
                fits=method.fits,
                messages=unique_messages(method.messages),
            )
            results[label] = scores
        check = convention_check(urdf, q, p, rpy)
    ours = {}
    for label, method in workbench_ur10().items():
        ours[label] = score_ur10(method, p, rot)

    print(machine())
    import figaroh

    version = getattr(figaroh, "__version__", "1.0.2")
    print(f"figaroh {version}; FIGAROH imports (with what they pull in): {import_seconds:.2f} s\n")
    print(
        f"UR10, {len(q)} camera-measured flange poses (config says nb_sample "
        f"{legacy['nb_sample']}); FIGAROH UR10Calibration cost, coeff_regularize {coeff}, "
        "orientation weight 0.5, unknown base and tip frames; LOO = leave-one-out "
        "(predict the left-out pose), errors in m and rad\n"
    )
    print(
        row(
            "FIGAROH model",
            "parameters",
            "time / fit [s]",
            "LOO total [s]",
            "LOO position RMS [m]",
            "LOO orientation RMS [rad]",
            "in-sample position RMS [m]",
            "in-sample orientation RMS [rad]",
            "outliers excluded",
        )
    )
    print(row(*["---"] * 9))
    total = 0.0
    for label, s in results.items():
        total += s["loo_seconds_total"] + s["in_sample_fit_seconds"]
        excluded = sum(len(f["excluded_outliers"]) for f in s["fits"])
        print(
            row(
                label,
                s["parameters"],
                f"{np.mean(s['loo_fit_seconds']):.3f}",
                f"{s['loo_seconds_total']:.2f}",
                f"{s['loo_position_rms']:.3e}",
                f"{s['loo_orientation_rms']:.3e}",
                f"{s['in_sample_position_rms']:.3e}",
                f"{s['in_sample_orientation_rms']:.3e}",
                excluded,
            )
        )
    for label, s in ours.items():
        print(
            row(
                f"workbench, {label}"
                + (" (camera and marker frames)" if label == "nominal" else ""),
                "-",
                f"{np.mean(s['loo_fit_seconds']):.3f}",
                f"{s['loo_seconds_total']:.2f}",
                f"{s['loo_position_rms']:.3e}",
                f"{s['loo_orientation_rms']:.3e}",
                f"{s['in_sample_position_rms']:.3e}",
                f"{s['in_sample_orientation_rms']:.3e}",
                "-",
            )
        )
    print(f"\nTotal FIGAROH time ({3 * (len(q) + 1)} fits, imports excluded): {total:.2f} s\n")
    print(
        "Orientation convention check (nominal URDF, free base and tip frames, best of 10 "
        "LM starts): phix/phiy/phiz read as RPY -> "
        f"{check['rpy']['position_rms']:.2e} m, {check['rpy']['orientation_rms']:.2e} rad; "
        f"read as rotation vector -> {check['rotation_vector']['position_rms']:.2e} m, "
        f"{check['rotation_vector']['orientation_rms']:.2e} rad\n"
    )
    print("FIGAROH messages\n")
    for label, s in results.items():
        fails = [f["left_out"] for f in s["fits"] if not f["success"]]
        print(f"- {label}: {len(s['fits'])} fits, not converged: {fails or 'none'}")
        for m in s["messages"]:
            print(f"  - ({m['count']}x) {m['message'][:300]}")
    return {
        "machine": machine(),
        "figaroh_version": version,
        "import_seconds": import_seconds,
        "total_seconds": total,
        "poses": len(q),
        "coeff_regularize": coeff,
        "models": results,
        "workbench": ours,
        "convention_check": check,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("robot", choices=("tx40", "ur10"))
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="data folder")
    parser.add_argument("--json", type=Path, help="write all numbers to this JSON file")
    parser.add_argument("--verbose", action="store_true", help="show FIGAROH's console output")
    args = parser.parse_args()
    args.data = args.data.resolve()
    out = tx40(args) if args.robot == "tx40" else ur10(args)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
