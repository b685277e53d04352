"""Validation on another recording session, whose measuring frames moved, and random folds.

Truths written here: the iiwa (nominal, or with joint axes moved) seen by a
motion-capture device whose frame differs between two sessions; tool
positions by Pinocchio's forward kinematics. A calibration equal to the
nominal must tie with it on the second session (its frames are refitted
there, as the nominal's), and one that found the truth must beat it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import workbench as wb
from workbench.calibration.cross_validation import calibrate
from workbench.calibration.problems.problem import Options
from workbench.calibration.selection.validation import Folds
from workbench.calibration.simulation.simulate import perturbed_truth, simulate_log
from workbench.recordings.log import Marker
from workbench.recordings.recording import read_description
from workbench.testing.pinocchio_reference import tool_poses

NOISE = 2e-5  # m per coordinate


def tool_positions(chain: wb.Chain, q: np.ndarray) -> np.ndarray:
    """Tool positions (N, 3) of ``chain`` by Pinocchio."""
    return tool_poses(chain, q)[:, :3, 3]


def session(chain, truth, device: np.ndarray, seed: int, source: str):
    """A log of the truth's tool positions in a device frame unknown to the calibration."""
    log, _ = simulate_log(chain, samples=60, perturb=0.0, seed=seed)
    p = tool_positions(truth, log.q) @ device[:3, :3].T + device[:3, 3]
    p += np.random.default_rng(seed).normal(scale=NOISE, size=p.shape)
    return replace(
        log, position=None, markers=(Marker("tool", None, p),), frame_known=False, source=source
    )


@pytest.fixture(scope="module")
def iiwa() -> wb.Chain:
    return wb.models.load("iiwa")


def devices() -> tuple[np.ndarray, np.ndarray]:
    first = wb.lie.exp_se3(np.array([0.0, 0.0, 0.3, 1.2, -0.4, 0.1]))
    second = wb.lie.exp_se3(np.array([0.05, -0.02, -0.8, -0.6, 1.1, 0.3]))  # the camera moved
    return first, second


def test_a_calibration_equal_to_the_nominal_ties_on_another_session(iiwa):
    """Nominal kinematics (frames only): on the second session its frames are refitted on that
    session's own folds, as the nominal's, so the two tie exactly (not a loss)."""
    first, second = devices()
    log = session(iiwa, iiwa, first, seed=1, source="monday")
    other = session(iiwa, iiwa, second, seed=2, source="tuesday")
    report = calibrate(iiwa, "kinematic", log, other, Options(parameters="frames"))
    held = report.summary["heldout"]
    assert held["calibrated"]["relative_rms"] == held["nominal"]["relative_rms"]
    assert held["calibrated"]["position_rms_m"] < 2 * NOISE * np.sqrt(3)  # frames refitted
    assert held["scheme"].startswith("second log tuesday, blocked cross-validation, 5")
    refitted = held["frames_refitted"]["validation_log"]
    assert (
        "second log" in refitted["device_frame"]
        and "second log" in refitted["marker_frames"]["tool"]
    )


def test_a_calibration_that_found_the_joints_beats_the_nominal_on_another_session(iiwa):
    """Joint axes moved by 1e-2: the twists fitted on Monday, held on Tuesday with Tuesday's
    frames refitted, predict Tuesday's held-out positions to the noise; the nominal does not.
    The figure is checked from Pinocchio's tool positions of the calibrated chain, with the
    device and tool point refitted per fold by an independent least squares."""
    truth = perturbed_truth(iiwa, "kinematic", 1e-2, seed=3).chain
    first, second = devices()
    log = session(iiwa, truth, first, seed=4, source="monday")
    other = session(iiwa, truth, second, seed=5, source="tuesday")
    report = calibrate(iiwa, "kinematic", log, other)
    held = report.summary["heldout"]
    assert held["selection"]["kept"].startswith("twists")
    assert held["calibrated"]["position_rms_m"] < 2 * NOISE * np.sqrt(3)
    assert held["nominal"]["position_rms_m"] > 3 * held["calibrated"]["position_rms_m"]
    # independent check: per fold, the rigid map device <- base (Kabsch) and the tool point
    # fitted to the training samples by alternating least squares, then the held-out RMS
    measured = other.markers[0].position
    errors = []
    for train, test in Folds(5).splits(other.t):
        errors.append(held_out_distances(report.chain, other.q, measured, train, test))
    rms = np.sqrt(np.mean(np.concatenate(errors) ** 2))
    assert held["calibrated"]["position_rms_m"] == pytest.approx(rms, rel=1e-3)


def held_out_distances(chain, q, measured, train, test) -> np.ndarray:
    """Distances on ``test`` of ``X T(q) m`` with the device pose X (rotation vector and
    translation) and the tool point m (in the tool frame) fitted on ``train`` by SciPy's
    least squares, the tool poses T(q) from Pinocchio."""
    from scipy.optimize import least_squares
    from scipy.spatial.transform import Rotation

    poses = tool_poses(chain, q)

    def predict(x, rows):
        R = Rotation.from_rotvec(x[:3]).as_matrix()
        return (poses[rows, :3, :3] @ x[6:] + poses[rows, :3, 3]) @ R.T + x[3:6]

    # start: the device pose of the tool origins (Kabsch), then all nine parameters jointly
    a, b = poses[train, :3, 3], measured[train]
    U, _, Vt = np.linalg.svd((b - b.mean(0)).T @ (a - a.mean(0)))
    R0 = U @ np.diag([1, 1, np.linalg.det(U @ Vt)]) @ Vt
    x0 = np.concatenate(
        [Rotation.from_matrix(R0).as_rotvec(), b.mean(0) - R0 @ a.mean(0), [0, 0, 0]]
    )
    fit = least_squares(lambda x: (predict(x, train) - b).ravel(), x0, xtol=1e-15, ftol=1e-15)
    return np.linalg.norm(predict(fit.x, test) - measured[test], axis=1)


def test_random_folds_hold_every_sample_out_once():
    """Random folds: a permutation of the samples (every sample held out once, sizes within
    one), the same for the same seed, not the contiguous blocks."""
    t = np.arange(103) * 0.1
    splits = Folds(5, shuffle=True, seed=3).splits(t)
    held = np.concatenate([test for _, test in splits])
    assert np.array_equal(np.sort(held), np.arange(t.size))
    sizes = [test.size for _, test in splits]
    assert max(sizes) - min(sizes) <= 1 and len(sizes) == 5
    for train, test in splits:
        assert np.intersect1d(train, test).size == 0 and train.size + test.size == t.size
    again = Folds(5, shuffle=True, seed=3).splits(t)
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(splits, again, strict=True))
    other = Folds(5, shuffle=True, seed=4).splits(t)
    assert not all(np.array_equal(a[1], b[1]) for a, b in zip(splits, other, strict=True))
    blocks = Folds(5).splits(t)
    assert not all(np.array_equal(a[1], b[1]) for a, b in zip(splits, blocks, strict=True))
    assert "random" in Folds(5, shuffle=True, seed=3).label


def description(tmp_path, validation: str):
    np.savetxt(tmp_path / "q.csv", np.random.default_rng(0).normal(size=(30, 2)),
               delimiter=",", header="q1,q2", comments="")  # fmt: skip
    path = tmp_path / "log.toml"
    path.write_text(
        f'[positions]\nfile = "q.csv"\ncolumns = ["q1", "q2"]\n\n[validation]\n{validation}'
    )
    return read_description(path, wb.models.load("planar_2r"))


def test_the_description_asks_for_random_folds(tmp_path):
    log = description(tmp_path, "folds = 4\nshuffle = true\nseed = 12\n")
    assert (log.defaults.folds, log.defaults.shuffle, log.defaults.seed) == (4, True, 12)
    with pytest.raises(wb.WorkbenchError, match="shuffle"):
        description(tmp_path, "fraction = 0.2\nshuffle = true\n")
    with pytest.raises(wb.WorkbenchError, match="seed"):
        description(tmp_path, "folds = 4\nseed = 12\n")


@pytest.mark.parametrize(
    ("validation", "message"),
    [("fraction = 0\n", r"\[validation\] fraction = 0 must lie strictly between 0 and 1"),
     ("fraction = 1\n", r"\[validation\] fraction = 1 must lie strictly between 0 and 1"),
     ("fold = 3\n", r"unknown key\(s\) fold; known: folds, fraction, seed, shuffle")],
)  # fmt: skip
def test_a_validation_table_out_of_its_range_or_misspelt_is_named(tmp_path, validation, message):
    """A fraction of 0 (held nothing out, silently replaced by the default) or 1 (refused
    without naming the file) and a misspelt key (whose list of known keys left out folds
    and fraction) are refused naming the description and the key."""
    with pytest.raises(wb.WorkbenchError, match=message) as caught:
        description(tmp_path, validation)
    assert str(tmp_path / "log.toml") in str(caught.value)
