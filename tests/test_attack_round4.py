"""Hostile and odd inputs against problem kinds, drive terms and log readers: each is
refused with a WorkbenchError naming what and where, never a traceback."""

from __future__ import annotations

import json

import numpy as np
import pytest

from workbench.cli import main
from workbench.errors import WorkbenchError
from workbench.identification.drives import numbered_joints
from workbench.identification.least_squares import check_determined
from workbench.identification.torque_model import BaseParameters
from workbench.models import urdf_path
from workbench.models.urdf import load_robot
from workbench.ocp import kinds


@pytest.fixture
def own_kinds(monkeypatch):
    """A copy of the registry, so that nothing registered here outlives the test."""
    monkeypatch.setattr(kinds, "KINDS", dict(kinds.KINDS))


@pytest.mark.parametrize(
    ("name", "module", "named"),
    [
        (3, "workbench.ocp.reach_kind", "3"),
        ("", "workbench.ocp.reach_kind", "''"),
        (["a"], "workbench.ocp.reach_kind", "['a']"),
        ("ghost", "no.such.module", "no.such.module"),
        ("osk", "os", "read, solve, write"),
    ],
)
def test_register_refuses_a_kind_that_cannot_be_used(own_kinds, name, module, named):
    with pytest.raises(WorkbenchError, match=r"problem kind") as error:
        kinds.register(name, module)
    assert named in str(error.value)
    assert name not in kinds.KINDS if isinstance(name, str) else True


@pytest.mark.parametrize(
    "names", ['"joint_1"', '["joint_1", "joint_1"]', "[1, 2]", '{"a": 1}', '["joint_1", ""]']
)
def test_a_drive_files_numbered_joints_are_distinct_names(tmp_path, names):
    """A results folder's summary.json joint_names that is not a list of distinct joint
    names is refused naming the file (a repeated name gave one joint the other's drive
    values and exit 0; a string was read letter by letter)."""
    (tmp_path / "summary.json").write_text(f'{{"joint_names": {names}}}')
    with pytest.raises(WorkbenchError, match=r"summary\.json.*joint_names"):
        numbered_joints(tmp_path / "calibrated.drives.toml")


@pytest.mark.parametrize(("joints", "locked"), [([], {}), (None, {"joint_1": 0.1, "joint_2": 0.2})])
def test_every_joint_locked_is_refused(joints, locked):
    """No joint left to move ([model] joints = [] or [model.locked] naming them all) is
    refused naming the model (excite crashed with an IndexError in the inverse dynamics)."""
    with pytest.raises(WorkbenchError, match=r"planar_2r\.urdf.*every movable joint is locked"):
        load_robot(urdf_path("planar_2r"), joints, locked)


def test_a_constant_temperature_is_named_as_the_cause():
    """Temperature slopes whose columns are zero come from a drive temperature that never
    changes, not from still joints: the refusal says so (it blamed the joints' motion)."""
    rng = np.random.default_rng(0)
    A = np.column_stack([rng.standard_normal(50), np.zeros(50), np.zeros(50)])
    base = BaseParameters(np.arange(3), np.eye(3), ("Izz1", "fvT1", "fsT1"))
    with pytest.raises(WorkbenchError, match=r"fvT1.*temperature .*never changes"):
        check_determined(A, 50, np.array([1.0, 0.0, 0.0]), base, ["joint_1"])


def test_a_drive_files_delay_enters_the_nominal_prediction(tmp_path):
    """The nominal model's prediction (validation_before) uses the drive file's sensor delay:
    200 ms on a log recorded without delay worsens it (it used the default shapes)."""
    log = tmp_path / "x.csv"
    assert main(["simulate-log", "planar_2r", "--kind", "dynamic", "--out", str(log),
                 "--samples", "400", "--delay", "0.002"]) == 0  # fmt: skip
    nominal = {}
    for delay in (0.0, 200.0):  # ms; 200 ms is 20 samples of this log
        folder = tmp_path / f"model{delay:g}"
        folder.mkdir()
        urdf = folder / "planar_2r.urdf"
        urdf.write_bytes(urdf_path("planar_2r").read_bytes())
        (folder / "planar_2r.drives.toml").write_text(
            f'terms = ["friction", "sensor_delay"]\ndelay_ms = {delay}\n'
            "[values]\nfv1 = 0.0\nfs1 = 0.0\nfv2 = 0.0\nfs2 = 0.0\n"
        )
        out = tmp_path / f"out{delay:g}"
        main(["calibrate", "--model", str(urdf), "--log", str(log), "--kind", "dynamic",
              "--terms", "friction,sensor_delay", "--out", str(out), "--quiet"])  # fmt: skip
        summary = json.loads((out / "summary.json").read_text())
        nominal[delay] = summary["rms"]["validation_before"]
    assert nominal[200.0] > 2 * nominal[0.0]


def test_an_experiment_on_part_of_a_robot_says_where_the_others_are_held(tmp_path):
    """excite with [model] joints and [model.locked]: summary.json and report.html give the
    locked joints' values the trajectory was designed for (they named the moving joints only,
    so the trajectory could be run with the others anywhere)."""
    problem = tmp_path / "excite.toml"
    problem.write_text(
        "[trajectory]\nperiod = 2.0\nharmonics = 3\ncollocation = 20\nsample_rate = 50.0\n"
        '[model]\njoints = ["joint_1"]\n[model.locked]\njoint_2 = 0.5\n'
        "[design]\nmax_iterations = 3\n[output]\nanimation = false\n"
    )
    out = tmp_path / "excite"
    main(["excite", "--model", "planar_2r", "--kind", "dynamic", "--out", str(out), str(problem)])
    summary = json.loads((out / "summary.json").read_text())
    assert summary["joints"] == ["joint_1"]
    assert summary["locked"] == {"joint_2": 0.5}
    assert "joint_2 = 0.5" in (out / "report.html").read_text()


def test_info_shows_a_results_folders_calibrated_model(tmp_path, capsys):
    """workbench info DIR reads DIR/calibrated.urdf, as workbench export does (it was refused
    as an unknown model name); a folder without one is refused naming the file."""
    (tmp_path / "calibrated.urdf").write_bytes(urdf_path("planar_2r").read_bytes())
    assert main(["info", str(tmp_path)]) == 0
    assert "2 joints" in capsys.readouterr().out
    (tmp_path / "calibrated.urdf").unlink()
    assert main(["info", str(tmp_path)]) == 2
    assert "no calibrated.urdf in it" in capsys.readouterr().err
