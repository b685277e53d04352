"""Large logs: dynamic identification from factors accumulated chunk by chunk equals the in-memory
fit, the in-memory report's held-out figures come out of one pass, unsupported options are refused,
and memory stays bounded whatever the log's length."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import workbench as wb
from workbench.calibration.cross_validation import calibrate
from workbench.calibration.fitting.dynamic import calibrate_dynamic, torque_equations
from workbench.calibration.problems.problem import Options
from workbench.calibration.reporting.report import write_report
from workbench.calibration.selection.validation import EndSplit, Folds
from workbench.calibration.simulation.simulate import simulate_log
from workbench.errors import WorkbenchError
from workbench.identification.drives import Drives
from workbench.identification.torque_model import TorqueModel, base_parameters
from workbench.recordings.chunked_logs import is_chunked_log, open_chunked_log
from workbench.recordings.log_files import read_log, write_log

SAMPLES = 4000


@pytest.fixture(scope="module")
def iiwa() -> wb.Chain:
    return wb.models.load("iiwa", moving=True)


@pytest.fixture(scope="module")
def log(iiwa):
    simulated, _ = simulate_log(
        iiwa, kind="dynamic", samples=SAMPLES, noise=0.3, friction=0.2, dt=0.01
    )
    return simulated


def columns(log, rows=slice(None)) -> dict[str, np.ndarray]:
    out = {"t": log.t[rows]}
    for prefix in ("q", "dq", "ddq", "tau"):
        for i, joint in enumerate(log.joint_names):
            out[f"{prefix}_{joint}"] = getattr(log, prefix)[rows, i]
    return out


def write_chunks(log, folder, kind: str, size: int = 1100):
    """The log as one Parquet file with row groups, or a folder of NPZ / CSV chunks."""
    folder.mkdir(parents=True, exist_ok=True)
    if kind == "parquet":
        path = folder / "log.parquet"
        pq.write_table(pa.table(columns(log)), path, row_group_size=size)
        return path
    for k, start in enumerate(range(0, len(log), size)):
        part = columns(log, slice(start, start + size))
        write_log_columns(folder / f"part-{k:03d}.{kind}", part)
    return folder


def write_log_columns(path, table):
    if path.suffix == ".npz":
        np.savez(path, **table)
    else:
        data = np.column_stack(list(table.values()))
        np.savetxt(path, data, delimiter=",", header=",".join(table), comments="", fmt="%.17g")


@pytest.fixture(scope="module")
def in_memory(iiwa, log, tmp_path_factory):
    path = tmp_path_factory.mktemp("mem") / "log.npz"
    write_log(path, log)
    return read_log(path, iiwa, require=("tau",))


def relative(a, b) -> float:
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


@pytest.fixture(scope="module")
def column_norms(iiwa, in_memory):
    model = TorqueModel(iiwa, Drives(iiwa.n))
    X = torque_equations(model, base_parameters(model), in_memory).X
    return np.linalg.norm(X.reshape(-1, X.shape[2]), axis=0)


@pytest.fixture(scope="module")
def in_memory_fits(iiwa, in_memory):
    settings = {"default": {}, "unweighted": {"weighted": False}, "physical": {"physical": True}}
    return {name: calibrate_dynamic(iiwa, in_memory, **kw) for name, kw in settings.items()}


def assert_same_fit(a, b, column_norms):
    assert relative(b.beta, a.beta) < 1e-12
    # per parameter, in the torque it explains (beta_i |X_i|, the scaled unknowns of both
    # solvers), relative to the largest: both solve to rounding, so a parameter 1000 times
    # smaller than the largest agrees to ~1e-12 of its own value only
    theta_a, theta_b = a.beta * column_norms, b.beta * column_norms
    assert np.max(np.abs(theta_b - theta_a)) < 1e-12 * np.max(np.abs(theta_a))
    assert relative(b.x, a.x) < 1e-11
    assert relative(b.covariance, a.covariance) < 1e-9
    np.testing.assert_allclose(b.sigma, a.sigma, rtol=1e-10)
    assert b.rows == a.rows and b.physically_consistent == a.physically_consistent
    assert b.condition_number == pytest.approx(a.condition_number, rel=1e-9)


@pytest.mark.parametrize("kind", ["parquet", "npz", "csv"])
def test_chunked_fit_equals_in_memory(iiwa, log, in_memory_fits, column_norms, tmp_path, kind):
    source = write_chunks(log, tmp_path / kind, kind)
    assert is_chunked_log(source)
    chunked = open_chunked_log(source, iiwa)
    assert len(chunked) == SAMPLES and len(chunked.parts) == 4
    assert_same_fit(in_memory_fits["default"], calibrate_dynamic(iiwa, chunked), column_norms)


def test_chunked_options_equal_in_memory(iiwa, log, in_memory_fits, column_norms, tmp_path):
    chunked = open_chunked_log(write_chunks(log, tmp_path, "parquet"), iiwa)
    b = calibrate_dynamic(iiwa, chunked, weighted=False)
    assert_same_fit(in_memory_fits["unweighted"], b, column_norms)
    # --physical: the consistent model is the barrier method's optimum (duality gap 1e-10 of
    # the objective) from inputs equal to 1e-14: beta equal to the solver's tolerance, which
    # bounds the objective, quadratic in beta, so beta to about sqrt(1e-10) (4e-8 seen; the
    # standard parameters x differ along directions the torques do not see)
    a = in_memory_fits["physical"]
    b = calibrate_dynamic(iiwa, chunked, physical=True)
    assert a.physically_consistent and b.physically_consistent
    assert relative(b.beta, a.beta) < 1e-6


@pytest.mark.parametrize("scheme", [Folds(3), EndSplit(0.25)])
def test_chunked_report_equals_in_memory(iiwa, log, in_memory, tmp_path, scheme):
    source = write_chunks(log, tmp_path / "parquet", "parquet", size=700)
    report_b = calibrate(iiwa, "dynamic", open_chunked_log(source, iiwa), scheme)
    report_a = calibrate(iiwa, "dynamic", in_memory, scheme)
    a, b = report_a.summary, report_b.summary
    for key in ("heldout_relative_rms", "train_relative_rms"):
        assert b[key] == pytest.approx(a[key], rel=1e-10)
    for side in ("calibrated", "nominal"):
        assert b["heldout"][side]["relative_rms"] == pytest.approx(
            a["heldout"][side]["relative_rms"], rel=1e-10
        )
        for joint, value in a["heldout"][side]["rms"].items():
            assert b["heldout"][side]["rms"][joint] == pytest.approx(value, rel=1e-9)
    for key, value in a["rms"].items():
        if key != "unit":
            assert b["rms"][key] == pytest.approx(value, rel=1e-10)
    assert [f["samples"] for f in b["heldout"]["folds"]] == [
        f["samples"] for f in a["heldout"]["folds"]
    ]
    assert b["samples"] == a["samples"]
    assert set(a) <= set(b)
    for (name_a, value_a, _), (name_b, value_b, _) in zip(
        report_a.parameters, report_b.parameters, strict=True
    ):
        assert name_a == name_b and value_b == pytest.approx(value_a, rel=1e-9, abs=1e-12)
    out = tmp_path / "results"
    out.mkdir()
    write_report(out, report_b)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["large_log"]["parts"] == 6
    for name in ("parameters.csv", "report.html", "heldout_torques.png"):
        assert (out / name).is_file()
    # a URDF only for a model a URDF can hold (least squares on this log: impossible inertias)
    possible = not wb.chain.impossible_inertias(report_b.chain)
    assert (out / "calibrated.urdf").is_file() == possible == summary["urdf_check"]["written"]


def test_refused_options_and_bad_parts(iiwa, log, tmp_path):
    source = write_chunks(log, tmp_path / "npz", "npz")
    chunked = open_chunked_log(source, iiwa)
    with pytest.raises(WorkbenchError, match="least squares only"):
        calibrate_dynamic(iiwa, chunked, loss="soft_l1")
    with pytest.raises(WorkbenchError, match="leave-one-out"):
        calibrate(iiwa, "dynamic", chunked, Folds(-1))
    with pytest.raises(WorkbenchError, match="second validation log"):
        calibrate(iiwa, "dynamic", chunked, chunked)
    with pytest.raises(WorkbenchError, match="least squares only"):
        calibrate(iiwa, "dynamic", chunked, Folds(3), Options(loss="huber"))
    # pre-processing is the user's: without dq the large-log reader names what is missing
    part = dict(np.load(source / "part-000.npz"))
    del part[f"dq_{iiwa.joint_names[2]}"]
    bad = tmp_path / "bad"
    bad.mkdir()
    np.savez(bad / "part-000.npz", **part)
    with pytest.raises(WorkbenchError, match=f"missing column.*dq_{iiwa.joint_names[2]}"):
        open_chunked_log(bad, iiwa)
    # parts out of time order
    order = tmp_path / "order"
    order.mkdir()
    (order / "a.npz").write_bytes((source / "part-001.npz").read_bytes())
    (order / "b.npz").write_bytes((source / "part-000.npz").read_bytes())
    with pytest.raises(WorkbenchError, match="not after the end of"):
        open_chunked_log(order, iiwa)
    # a NaN names its part, row and column
    nan = tmp_path / "nan"
    nan.mkdir()
    part = dict(np.load(source / "part-000.npz"))
    part[f"tau_{iiwa.joint_names[1]}"][7] = np.nan
    np.savez(nan / "part-000.npz", **part)
    with pytest.raises(WorkbenchError, match=f"row 8, column tau_{iiwa.joint_names[1]}"):
        calibrate_dynamic(iiwa, open_chunked_log(nan, iiwa))
    (tmp_path / "empty").mkdir()
    with pytest.raises(WorkbenchError, match="no chunk files"):
        open_chunked_log(tmp_path / "empty", iiwa)


def test_command_line_reads_a_large_log(iiwa, log, in_memory, tmp_path, capsys):
    """`workbench calibrate --kind dynamic --log LOG.parquet` is the chunked run, with the
    in-memory run's held-out figure on the same samples; other kinds refuse a large log."""
    from workbench.cli import main

    source = write_chunks(log, tmp_path / "parquet", "parquet", size=900)
    args = ["calibrate", "--model", "iiwa", "--log", str(source), "--quiet"]
    assert main([*args, "--kind", "dynamic", "--folds", "3", "--out", str(tmp_path / "a")]) == 0
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    expected = calibrate(iiwa, "dynamic", in_memory, Folds(3)).summary
    assert summary["large_log"]["parts"] == 5
    assert summary["heldout_relative_rms"] == pytest.approx(
        expected["heldout_relative_rms"], rel=1e-10
    )
    assert main([*args, "--kind", "kinematic", "--out", str(tmp_path / "b")]) == 2
    assert "large log" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


def test_malformed_parts_and_options_are_one_line(iiwa, log, tmp_path, capsys):
    """Malformed chunks, too many folds and options that do not apply to a large log: one
    line naming what and where, exit code 2, nothing written."""
    from workbench.cli import main

    source = write_chunks(log, tmp_path / "npz", "npz")
    joint = f"q_{iiwa.joint_names[0]}"
    cases = {}
    table = columns(log)
    table[joint] = np.array(["x"] * len(log))
    pq.write_table(pa.table(table), tmp_path / "strings.parquet")
    cases["strings.parquet"] = f"column {joint} holds string values"
    for name, change, message in (
        ("text", lambda part: part.__setitem__(joint, part[joint].astype(str)), "array of <U"),
        ("short", lambda part: part.__setitem__(joint, part[joint][:-1]), "entries, t has"),
        ("matrix", lambda part: part.__setitem__(joint, part[joint][:, None]), "2-D array"),
    ):
        folder = tmp_path / name
        folder.mkdir()
        part = dict(np.load(source / "part-000.npz"))
        change(part)
        np.savez(folder / "part-000.npz", **part)
        cases[name] = message
    args = ["calibrate", "--model", "iiwa", "--kind", "dynamic", "--quiet"]
    for name, message in cases.items():
        out = tmp_path / f"out-{name}"
        assert main([*args, "--log", str(tmp_path / name), "--out", str(out)]) == 2, name
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (name, err)
        assert not out.exists()
    good = ["--log", str(source), "--out", str(tmp_path / "out")]
    for extra, message in (
        (["--folds", str(SAMPLES + 1)], "takes 2 to"),
        (["--validation-log", str(source)], "--validation-log do(es) not apply"),
        (["--drop-bad-rows"], "--drop-bad-rows do(es) not apply"),
    ):
        assert main([*args, *good, *extra]) == 2, extra
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and message in err[0], (extra, err)
        assert not (tmp_path / "out").exists()
    write_log(tmp_path / "log.npz", log)
    memory = ["--log", str(tmp_path / "log.npz"), "--out", str(tmp_path / "out")]
    assert main([*args, *memory, "--validation-log", str(source)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a large log" in err[0]


@pytest.mark.slow
def test_memory_stays_bounded(tmp_path):
    """1.5 million iiwa samples (1.2 GB of regressor if it were built) identified with less than
    500 MB of memory above what the process held before the fit (peak RSS)."""
    script = textwrap.dedent(
        f"""
        import json, resource, numpy as np, pyarrow as pa, pyarrow.parquet as pq
        import workbench as wb
        from workbench.calibration.simulation.trajectories import exciting_trajectory
        from workbench.calibration.fitting.dynamic import calibrate_dynamic
        from workbench.recordings.chunked_logs import open_chunked_log
        from workbench.dynamics.inverse_dynamics import inverse_dynamics
        chain = wb.models.load("iiwa", moving=True)
        path = "{tmp_path}/big.parquet"
        chunk = 100_000
        schema = pa.schema([("t", pa.float64())] + [(f"{{p}}_{{j}}", pa.float64())
                           for p in ("q", "dq", "ddq", "tau") for j in chain.joint_names])
        with pq.ParquetWriter(path, schema) as writer:
            for k in range(15):
                t, q, dq, ddq = exciting_trajectory(chain, chunk, dt=0.01, seed=k)
                t = t + k * chunk * 0.01
                tau = inverse_dynamics(chain, q, dq, ddq) + 0.2 * np.sign(dq)
                cols = {{"t": t}}
                for p, a in (("q", q), ("dq", dq), ("ddq", ddq), ("tau", tau)):
                    names = [f"{{p}}_{{j}}" for j in chain.joint_names]
                    cols.update(dict(zip(names, a.T)))
                writer.write_table(pa.table(cols), row_group_size=chunk)
                del t, q, dq, ddq, tau, cols
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        fit = calibrate_dynamic(chain, open_chunked_log(path, chain))
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({{"before_mb": before / 1024, "peak_mb": peak / 1024,
                           "rows": fit.rows}}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["rows"] == 1_500_000 * 7
    assert figures["peak_mb"] - figures["before_mb"] < 500, figures
