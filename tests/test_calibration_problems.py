"""Every registered calibration kind's problem, in memory and accumulated from a large log,
satisfies the one contract (workbench.calibration.problems.problem) and runs through the one loop
(workbench.calibration.cross_validation) to the noise the test put in its simulated log."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import workbench as wb
from workbench.calibration import KINDS, CalibrationProblem, EndSplit, Folds, Options, calibrate
from workbench.calibration.fitting.dynamic import torque_equations
from workbench.calibration.simulation.simulate import simulate_log
from workbench.recordings.chunked_logs import open_chunked_log

NOISE = {"kinematic": 1e-4, "twist": 0.05, "dynamic": 0.05}  # m per axis, N m per joint


@pytest.fixture(scope="module")
def iiwa() -> wb.Chain:
    return wb.models.load("iiwa")


def large_log(log, path):
    """``log`` as a Parquet file of row groups of 250 samples (a large log)."""
    table = {"t": log.t}
    for prefix in ("q", "dq", "ddq", "tau"):
        for i, joint in enumerate(log.joint_names):
            table[f"{prefix}_{joint}"] = getattr(log, prefix)[:, i]
    pq.write_table(pa.table(table), path, row_group_size=250)
    return path


def test_a_problem_without_the_operations_is_not_one():
    class Partial:
        def fit(self, training, candidate=None): ...

    assert not isinstance(Partial(), CalibrationProblem)


@pytest.mark.parametrize("name", list(KINDS))
def test_every_kind_satisfies_the_contract_and_calibrates_to_the_noise(iiwa, name):
    noise = NOISE[name]
    samples = 120 if name == "kinematic" else 600
    log, _ = simulate_log(iiwa, kind=name, samples=samples, perturb=1e-2, noise=noise, seed=7)
    options = Options(parameters="twists") if name == "kinematic" else Options()
    assert isinstance(KINDS[name].problem(iiwa, log, options), CalibrationProblem)
    report = calibrate(iiwa, name, log, Folds(3), options)
    held, rms = report.summary["heldout"], report.summary["rms"]
    assert held["samples"] == report.summary["samples"]["fitted"]  # every sample held out once
    assert [f["samples"] for f in held["folds"]] == [len(t) for _, t in Folds(3).splits(log.t)]
    # the truth is the log's model plus noise of known size: on samples no fit saw, the
    # calibrated model's error is that noise (3-D distances: sqrt(3) sigma), the nominal's more
    floor = noise * (math.sqrt(3) if name == "kinematic" else 1.0)
    assert 0.9 * floor < rms["validation_after"] < 1.25 * floor
    assert rms["validation_before"] > 2 * rms["validation_after"]
    assert held["calibrated"]["relative_rms"] < held["nominal"]["relative_rms"]


def test_the_large_log_problem_satisfies_the_contract_and_reports_as_in_memory(iiwa, tmp_path):
    log, _ = simulate_log(iiwa, kind="dynamic", samples=1500, noise=0.3, friction=0.2, seed=2)
    chunked = open_chunked_log(large_log(log, tmp_path / "log.parquet"), iiwa)
    options = Options(terms=("friction",), physical=False)  # least squares: equal to rounding
    problem = KINDS["dynamic"].problem(iiwa, chunked, options, Folds(4))
    assert isinstance(problem, CalibrationProblem)
    assert type(problem) is not type(KINDS["dynamic"].problem(iiwa, log, options))
    accumulated = calibrate(iiwa, "dynamic", chunked, Folds(4), options).summary
    in_memory = calibrate(iiwa, "dynamic", log, Folds(4), options).summary

    def numbers(entry, path=""):
        """Every number of a summary entry, by its path."""
        if isinstance(entry, dict):
            return {k: v for key in entry for k, v in numbers(entry[key], f"{path}/{key}").items()}
        if isinstance(entry, list):
            return {k: v for i, e in enumerate(entry) for k, v in numbers(e, f"{path}/{i}").items()}
        return {path: entry} if isinstance(entry, int | float) else {}

    for key in ("heldout", "rms", "train_relative_rms", "samples", "base_parameters"):
        a, b = numbers(in_memory[key], key), numbers(accumulated[key], key)
        assert a.keys() == b.keys() and a
        for path, value in a.items():
            assert b[path] == pytest.approx(value, rel=1e-10, abs=1e-12), path
    assert np.isfinite(accumulated["heldout_relative_rms"])


@pytest.mark.parametrize("scheme", [Folds(4), EndSplit(0.3)])
def test_fold_fits_from_block_factors_are_the_least_squares_of_the_training_rows(iiwa, scheme):
    """The in-memory dynamic problem fits a fold from its training blocks' triangular factors,
    computed once and merged: the least squares of the training rows (numpy's lstsq)."""
    log, _ = simulate_log(iiwa, kind="dynamic", samples=800, noise=0.3, friction=0.2, seed=4)
    problem = KINDS["dynamic"].problem(
        iiwa, log, Options(weighted=False, terms=("friction",), physical=False)
    )
    equations = torque_equations(problem.model, problem.base, log)  # the whole regressor
    for training, held in problem.folds(scheme):
        rows = np.setdiff1d(np.arange(problem.samples), held)
        X = equations.X[rows].reshape(-1, equations.X.shape[2])
        beta = np.linalg.lstsq(X, equations.tau[rows].ravel(), rcond=None)[0]
        fit = problem.fit(training)
        assert fit.rows == X.shape[0]
        np.testing.assert_allclose(fit.beta, beta, rtol=1e-9, atol=1e-9 * np.abs(beta).max())


def test_the_identifiable_subspace_when_lapacks_divide_and_conquer_fails(monkeypatch):
    """Where numpy's SVD (gesdd) does not converge (the TX40 twist fit on a processor with
    AVX-512 kernels), the subspace comes from gesvd: the same singular values (numpy's own, to
    1e-12 relative) and the same span of directions."""
    from workbench.calibration.fitting.solver import identifiable_subspace

    rng = np.random.default_rng(3)
    J = rng.standard_normal((40, 9)) @ np.diag(np.logspace(0, -12, 9))
    prior = np.linalg.qr(rng.standard_normal((9, 7)))[0]
    expected = identifiable_subspace(J, prior)
    svd = np.linalg.svd

    def fails(*args, **kwargs):
        raise np.linalg.LinAlgError("SVD did not converge")

    monkeypatch.setattr(np.linalg, "svd", fails)
    fallback = identifiable_subspace(J, prior)
    monkeypatch.setattr(np.linalg, "svd", svd)
    s = np.linalg.svd(np.linalg.qr(J @ prior / np.linalg.norm(J @ prior, axis=0), mode="r"),
                      compute_uv=False)  # fmt: skip
    np.testing.assert_allclose(fallback.singular_values, s, rtol=1e-12, atol=1e-12 * s[0])
    assert fallback.basis.shape == expected.basis.shape
    k = expected.basis.shape[1]
    overlap = np.linalg.svd(expected.basis.T @ fallback.basis, compute_uv=False)
    np.testing.assert_allclose(overlap, np.ones(k), atol=1e-10)
