"""Dynamic identification of a log in memory with the regressor computed block by block
(workbench.calibration.problems.regressor_blocks): the fit is numpy's lstsq of the whole
stacked system, whatever the block size, and memory does not grow with the regressor."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import workbench as wb
from workbench.calibration import KINDS, Folds, Options
from workbench.calibration.fitting.dynamic import torque_equations
from workbench.calibration.problems import regressor_blocks as regressor_blocks_module
from workbench.calibration.problems.regressor_blocks import regressor_blocks
from workbench.calibration.simulation.simulate import simulate_log
from workbench.identification.drives import Drives
from workbench.identification.least_squares import fit_factors
from workbench.identification.torque_model import TorqueModel, base_parameters
from workbench.recordings import signals


@pytest.fixture(scope="module")
def iiwa() -> wb.Chain:
    return wb.models.load("iiwa")


def described(log, decimation: int):
    """``log`` in two segments, decimated by ``decimation``, slow joint rows out of the fit."""
    return replace(
        log, decimation=decimation, border=signals.border(decimation),
        segments=((0, 700), (700, len(log))), min_speed=np.full(log.q.shape[1], 0.05),
    )  # fmt: skip


def gautier_lstsq(X: np.ndarray, tau: np.ndarray, joint: np.ndarray, n: int) -> np.ndarray:
    """Gautier's two-step weighted least squares by numpy's lstsq on the stacked rows: an
    ordinary fit, then joint j's rows weighted by 1 / sigma_j, sigma_j^2 = |r_j|^2 / (m_j - r)."""
    theta = np.linalg.lstsq(X, tau, rcond=None)[0]
    m = np.bincount(joint, minlength=n)
    sigma = np.sqrt(np.bincount(joint, (X @ theta - tau) ** 2, minlength=n) / (m - X.shape[1]))
    w = 1.0 / sigma[joint]
    return np.linalg.lstsq(X * w[:, None], tau * w, rcond=None)[0]


@pytest.mark.parametrize("decimation", [1, 3])
@pytest.mark.parametrize("block", [1, 37, 250, 100_000])
def test_blockwise_factors_fit_what_lstsq_fits_on_the_whole_stacked_system(iiwa, decimation, block):
    log, _ = simulate_log(iiwa, kind="dynamic", samples=1500, noise=0.3, friction=0.2, seed=5)
    log = described(log, decimation)
    model = TorqueModel(iiwa, Drives(iiwa.n, ("friction",), None, log.min_speed))
    base = base_parameters(model)
    whole = torque_equations(model, base, log)  # the whole regressor, decimated at once
    blocks = regressor_blocks(model, base, log, block=block, cache=0)
    assert len(blocks) == len(whole)
    np.testing.assert_array_equal(blocks.fit, whole.fit)
    scale = np.abs(whole.tau).max()
    np.testing.assert_allclose(blocks.tau, whole.tau, rtol=0, atol=1e-12 * scale)
    rows = np.arange(len(whole) // 5, len(whole))  # across both segments and many blocks
    use = whole.fit[rows]
    X, tau, joint = whole.X[rows][use], whole.tau[rows][use], np.nonzero(use)[1]
    beta = gautier_lstsq(X, tau, joint, iiwa.n)
    R, counts = blocks.factors(rows)
    np.testing.assert_array_equal(counts, np.bincount(joint, minlength=iiwa.n))
    fit = fit_factors(model, base, R, counts, x0=None, weighted=True, physical=False)
    np.testing.assert_allclose(fit.beta, beta, rtol=1e-8, atol=1e-8 * np.abs(beta).max())
    np.testing.assert_allclose(
        blocks.predict(beta, rows), whole.X[rows] @ beta, rtol=0, atol=1e-10 * scale
    )


def test_the_dynamic_problem_in_small_blocks_fits_and_predicts_the_stacked_system(
    iiwa, monkeypatch
):
    """Blocks of 64 equation rows (the fewest), none kept, every candidate's columns cut from
    the full model's blocks: each candidate's fold fits and fit on all samples are lstsq's of
    its whole regressor, its held-out errors those of the whole regressor."""
    monkeypatch.setattr(regressor_blocks_module, "BLOCK_BYTES", 1)
    monkeypatch.setattr(regressor_blocks_module, "CACHE_BYTES", 0)
    log, _ = simulate_log(iiwa, kind="dynamic", samples=900, noise=0.3, friction=0.2, seed=6)
    problem = KINDS["dynamic"].problem(iiwa, log, Options(weighted=False))
    assert problem.equations.block == 64 and problem.samples > 10 * 64
    assert [c.terms for c in problem.candidates] == [(), ("friction",)]
    folds = problem.folds(Folds(3))
    scale = np.abs(log.tau).max()
    for candidate in problem.candidates:
        s = problem.setup(candidate.terms)
        whole = torque_equations(s.model, s.base, log)
        r = whole.X.shape[2]
        for training, held in [(None, None), *folds]:
            rows = np.setdiff1d(np.arange(problem.samples), [] if held is None else held)
            X, tau = whole.X[rows].reshape(-1, r), whole.tau[rows].ravel()
            beta = np.linalg.lstsq(X, tau, rcond=None)[0]
            fit = problem.fit(training, candidate)
            np.testing.assert_allclose(fit.beta, beta, rtol=1e-9, atol=1e-9 * np.abs(beta).max())
            if held is not None:
                expected = whole.X[held] @ fit.beta - whole.tau[held]
                errors = problem.errors(fit, held)
                np.testing.assert_allclose(errors, expected, rtol=0, atol=1e-10 * scale)


PEAK = textwrap.dedent(
    """
    import json, resource, sys
    from workbench.cli import main
    code = main(["calibrate", "--model", "iiwa", "--log", sys.argv[1], "--kind", "dynamic",
                 "--folds", "5", "--out", sys.argv[2], "--quiet"])
    print(json.dumps([code, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024]))
    """
)

BYTES_PER_SAMPLE = 3000
"""Bound on the peak memory growth per sample of a 7-joint robot's whole command, beyond the
regressor blocks kept (512 MB, full at 150,000 samples): less than the whole regressor alone,
8 n r = 3,600 bytes per sample (with each candidate's, as before, 14,500)."""


@pytest.mark.slow
def test_peak_memory_grows_less_than_the_regressor_per_sample(iiwa, tmp_path):
    """The whole command on 200,000 and 300,000 samples, each in a fresh process: the peak
    RSS grows by less than :data:`BYTES_PER_SAMPLE` per added sample."""
    peaks = []
    for samples in (200_000, 300_000):
        log, _ = simulate_log(
            iiwa, kind="dynamic", samples=samples, noise=0.05, friction=0.2, dt=1e-3, seed=3
        )
        path = tmp_path / f"log{samples}.npz"
        table = {"t": log.t}
        for prefix in ("q", "dq", "ddq", "tau"):
            for i, joint in enumerate(log.joint_names):
                table[f"{prefix}_{joint}"] = getattr(log, prefix)[:, i]
        np.savez(path, **table)
        del log, table
        done = subprocess.run(
            [sys.executable, "-c", PEAK, str(path), str(tmp_path / f"out{samples}")],
            capture_output=True, text=True, cwd=Path(wb.__file__).parents[1],
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        code, peak = json.loads(done.stdout.strip().splitlines()[-1])
        assert code in (0, 1), done.stderr[-2000:]  # 1: a plausibility finding, results written
        summary = json.loads((tmp_path / f"out{samples}" / "summary.json").read_text())
        assert summary["samples"]["fitted"] == samples
        peaks.append(peak)
    growth = (peaks[1] - peaks[0]) / 100_000
    assert growth < BYTES_PER_SAMPLE, f"{growth:.0f} bytes per sample (peaks {peaks})"
