"""Recordings as they come: CSV and ROS bags of one recording, jittery clocks, gaps, drops.

References: the simulated truth (the trajectory evaluated at the clock's own
stamps, torques from inverse dynamics of a perturbed model) and the same
identification on a uniform clock; bags written with ``rosbags``' writers.
"""

from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench.calibration.cross_validation import calibrate
from workbench.calibration.selection.validation import Folds
from workbench.calibration.simulation.simulate import perturbed_truth
from workbench.calibration.simulation.trajectories import exciting_trajectory
from workbench.recordings.clock import resample, uniform_clock
from workbench.recordings.log_files import read_log
from workbench.recordings.tables import write_table
from workbench.testing.bag_writer import STORAGES, write_joint_states

RATE = 100.0
SAMPLES = 6000  # 60 s at 100 Hz
NOISE = 0.02  # N m


@pytest.fixture(scope="module")
def planar():
    return wb.models.load("planar_2r")


def recording(chain, stamps_ns: np.ndarray, seed: int = 0):
    """Stamps (s, as a bag reader computes them), q and tau of the truth at those stamps."""
    sec, nsec = np.divmod(stamps_ns, 1_000_000_000)
    t = sec.astype(float) + nsec / 1e9
    truth = perturbed_truth(chain, "dynamic", 0.1, seed=seed + 1)
    _, q, dq, ddq = exciting_trajectory(chain, SAMPLES, 1.0 / RATE, seed=seed, times=t)
    rng = np.random.default_rng(seed + 2)
    tau = wb.inverse_dynamics(truth.chain, q, dq, ddq) + rng.normal(scale=NOISE, size=q.shape)
    return t, q, tau


def describe(directory, data: str, extra: str = "") -> str:
    text = f'[positions]\nfile = "{data}"\n[torques]\nfile = "{data}"\n[validation]\nfolds = 5\n'
    path = directory / f"{data.replace('/', '_')}.toml"
    path.write_text(text + extra)
    return path


def csv_description(directory, chain, t, q, tau, name="log.csv") -> str:
    columns = {"t": t} | {f"q{i}": q[:, i] for i in range(chain.n)}
    columns |= {f"tau{i}": tau[:, i] for i in range(chain.n)}
    write_table(directory / name, columns)
    names = ", ".join(f'"q{i}"' for i in range(chain.n))
    torques = ", ".join(f'"tau{i}"' for i in range(chain.n))
    path = directory / f"{name}.toml"
    path.write_text(
        f'[time]\nfile = "{name}"\ncolumn = "t"\n[positions]\nfile = "{name}"\n'
        f'columns = [{names}]\n[torques]\nfile = "{name}"\ncolumns = [{torques}]\n'
        "[validation]\nfolds = 5\n"
    )
    return path


def identified(chain, path) -> dict[str, tuple[float, float]]:
    log = read_log(path, chain, require=("tau",))
    report = calibrate(chain, "dynamic", log, Folds(5))
    return {name: (value, abs(value) * rel / 100.0) for name, value, rel in report.parameters}


def jittery_stamps(seed: int = 5) -> np.ndarray:
    """±25 % jitter, 1 % of samples dropped, one 0.5 s gap; integer nanoseconds."""
    rng = np.random.default_rng(seed)
    period = 1e9 / RATE
    nominal = np.arange(int(SAMPLES * 1.02)) * period
    stamps = nominal + rng.uniform(-0.25, 0.25, size=nominal.shape) * period
    stamps[nominal >= 30e9] += 0.5e9  # a 0.5 s gap half-way
    keep = rng.random(nominal.shape) >= 0.01
    return np.rint(1e9 + stamps[keep][:SAMPLES]).astype(np.int64)


def test_one_recording_as_csv_and_every_bag_storage_gives_the_same_parameters(tmp_path, planar):
    """CSV with a time column, ROS 1 bag, ROS 2 sqlite3 and MCAP bags, a bare .mcap file, and
    the bag given directly as --log: the same identified parameters to 1e-12."""
    t, q, tau = recording(planar, jittery_stamps())
    results = {"csv": identified(planar, csv_description(tmp_path, planar, t, q, tau))}
    names = list(planar.joint_names)
    for storage in STORAGES:
        bag = {"ros1": "run.bag", "sqlite3": "run_db3", "mcap": "run_mcap"}[storage]
        write_joint_states(tmp_path / bag, storage, t, names, position=q, effort=tau)
        results[storage] = identified(planar, describe(tmp_path, bag))
    write_joint_states(tmp_path / "bare.mcap", "mcap", t, names, position=q, effort=tau)
    results["bare mcap"] = identified(planar, describe(tmp_path, "bare.mcap"))
    results["--log run.bag"] = identified(planar, tmp_path / "run.bag")
    reference = results["csv"]
    assert len(reference) >= 4  # the base parameters of the 2R; friction terms by selection
    for source, values in results.items():
        assert values.keys() == reference.keys(), source
        for name, (value, _) in values.items():
            assert value == pytest.approx(reference[name][0], rel=1e-12, abs=1e-12), (source, name)


def test_jitter_drops_and_a_gap_identify_what_a_uniform_clock_does(tmp_path, planar):
    """±25 % jitter, 1 % dropped samples and a 0.5 s gap: every parameter within three
    standard deviations of the uniform log's, the clock reported."""
    uniform_ns = 1_000_000_000 + np.arange(SAMPLES) * 10_000_000
    t, q, tau = recording(planar, uniform_ns)
    uniform = identified(planar, csv_description(tmp_path, planar, t, q, tau, "uniform.csv"))
    t, q, tau = recording(planar, jittery_stamps())
    path = csv_description(tmp_path, planar, t, q, tau, "jittery.csv")
    jittery = identified(planar, path)
    for name, (value, std) in jittery.items():
        scale = np.hypot(std, uniform[name][1])
        assert abs(value - uniform[name][0]) <= 3.0 * scale + 1e-9, name
    clock = read_log(path, planar, require=("tau",)).clock
    assert clock["resampled"] and len(clock["segments"]) == 2
    assert clock["gaps"][0]["length_s"] == pytest.approx(0.5, abs=0.01)
    assert clock["dropped_samples"] == pytest.approx(0.01 * SAMPLES, rel=0.3)
    assert 20.0 < clock["jitter_max_percent"] <= 50.0


def test_resampling_follows_the_signal_and_keeps_segments_apart():
    """Linear interpolation on the grid: within period^2 / 8 |q''| of a sine; no grid sample
    in the gap; duplicates averaged; a uniform clock returns its samples untouched."""
    rng = np.random.default_rng(0)
    period = 0.01
    t = np.arange(3000) * period + rng.uniform(-0.3, 0.3, 3000) * period
    t[1500:] += 1.0
    x = np.sin(2 * np.pi * 0.7 * t)
    clock = uniform_clock(t)
    assert len(clock.segments) == 2 and clock.gaps[0][1] > 1.0
    out = resample(clock, t, x)
    steps = np.diff(np.sort(t))
    longest = steps[steps < 5 * period].max()  # the longest step inside a segment
    bound = longest**2 / 8 * (2 * np.pi * 0.7) ** 2
    assert np.abs(out - np.sin(2 * np.pi * 0.7 * clock.t)).max() <= bound
    assert not np.any((clock.t > t[1499] + period) & (clock.t < t[1500] - period))
    same = np.arange(10) * 0.1
    assert resample(uniform_clock(same), same, same * 2) is not None
    np.testing.assert_array_equal(resample(uniform_clock(same), same, same * 2), same * 2)
    twice = np.r_[0.0, 0.1, 0.1, 0.2, 0.3]
    merged = resample(uniform_clock(twice, period=0.1), twice, np.r_[0.0, 1.0, 3.0, 2.0, 3.0])
    np.testing.assert_allclose(merged, [0.0, 2.0, 2.0, 3.0])


def test_a_joint_missing_from_a_whole_stretch_is_named(tmp_path, planar):
    t, q, tau = recording(planar, 1_000_000_000 + np.arange(SAMPLES) * 10_000_000)
    drop = np.zeros(q.shape, dtype=bool)
    drop[: SAMPLES // 2, 1] = True  # joint 2 never reported in the first half
    names = list(planar.joint_names)
    t[SAMPLES // 2 :] += 1.0  # ... which is a stretch of its own
    write_joint_states(tmp_path / "run.bag", "ros1", t, names, position=q, effort=tau, drop=drop)
    with pytest.raises(wb.WorkbenchError, match=f"no positions of joint.*{names[1]}"):
        read_log(describe(tmp_path, "run.bag"), planar, require=("tau",))


def test_a_table_log_on_a_jittery_clock_is_resampled_and_split(tmp_path, planar):
    """A table in the project's columns (t, q_, tau_) with jitter and a gap: resampled, split
    into two segments, its Savitzky-Golay derivatives follow the truth's."""
    t, q, tau = recording(planar, jittery_stamps())
    names = planar.joint_names
    columns = {"t": t} | {f"q_{j}": q[:, i] for i, j in enumerate(names)}
    columns |= {f"tau_{j}": tau[:, i] for i, j in enumerate(names)}
    log = read_log(write_table(tmp_path / "log.csv", columns), planar, require=("tau",))
    assert log.clock["resampled"] and log.segments is not None and len(log.segments) == 2
    times = log.t + t[0]  # log.t counts from the first stamp
    _, _, dq, _ = exciting_trajectory(planar, SAMPLES, 1.0 / RATE, seed=0, times=times)
    inner = np.concatenate([np.arange(a + 10, b - 10) for a, b in log.segments])
    assert np.abs(log.dq[inner] - dq[inner]).max() < 1e-2 * np.abs(dq).max()


@pytest.mark.parametrize("jitter", [0.0, 0.25])
def test_epoch_stamps_give_the_clock_period_not_their_rounding(jitter):
    """Stamps at today's epoch (1.7e9 s) in float64 are multiples of 0.24 µs: every 5 ms step
    rounds to one of two values and their median is off by up to 24 ppm (1 ms over 40 s).
    The period comes out of the span instead: within one rounding (1e-7 of the true 5 ms) and,
    with stamps jittered by +-25 % of a period, within the two end stamps' jitter over the
    span (the median of steps that jitter by +-50 % is off by about 0.3 %); 1 % of the
    samples dropped. The grid ends where the stamps end."""
    rng = np.random.default_rng(3)
    k = np.flatnonzero(rng.uniform(size=8000) > 0.01)  # 1 % dropped
    t = 1.7e9 + 0.005 * (k + rng.uniform(-jitter, jitter, k.size))
    steps = np.diff(t)
    assert abs(np.median(steps) / 0.005 - 1) > 1e-6  # the rounding the median would keep
    clock = uniform_clock(t)
    assert abs(clock.period / 0.005 - 1) < 1e-7 + 2 * jitter / (k[-1] - k[0])
    assert abs(clock.t[-1] - t[-1]) < 0.5 * 0.005


def test_bags_by_relative_paths_with_a_folder_part(tmp_path, planar, monkeypatch):
    """--log bags/run.bag, a ROS 2 bag folder bags/run_mcap and a bare bags/bare.mcap, named
    from the folder above (no doubled folder, the bag folder not taken for a large log's
    chunks): the parameters of the same recording as a CSV, to 1e-12."""
    from workbench.cli import main
    from workbench.recordings.chunked_logs import is_chunked_log

    t, q, tau = recording(planar, jittery_stamps())
    reference = identified(planar, csv_description(tmp_path, planar, t, q, tau))
    names = list(planar.joint_names)
    (tmp_path / "bags").mkdir()
    write_joint_states(tmp_path / "bags/run.bag", "ros1", t, names, position=q, effort=tau)
    write_joint_states(tmp_path / "bags/run_mcap", "mcap", t, names, position=q, effort=tau)
    write_joint_states(tmp_path / "bags/bare.mcap", "mcap", t, names, position=q, effort=tau)
    monkeypatch.chdir(tmp_path)
    assert not is_chunked_log("bags/run_mcap")
    for path in ("bags/run.bag", "bags/run_mcap", "bags/bare.mcap"):
        values = identified(planar, path)
        assert values.keys() == reference.keys(), path
        for name, (value, _) in values.items():
            assert value == pytest.approx(reference[name][0], rel=1e-12, abs=1e-12), (path, name)
    args = ["calibrate", "--model", "planar_2r", "--log", "bags/run_mcap", "--kind", "dynamic"]
    assert main([*args, "--quiet", "--out", "out"]) == 0
