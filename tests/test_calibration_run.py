"""One calibration run from a request: options of another kind and a validation log that is
the training log are refused before any work, naming the option."""

from __future__ import annotations

import pytest

import workbench as wb
from workbench.calibration import Request
from workbench.calibration.run import check_request, run_calibration
from workbench.calibration.simulation.simulate import simulate_log
from workbench.cli import main
from workbench.recordings.log_files import write_log


@pytest.mark.parametrize(
    ("kind", "option", "value"),
    [
        ("dynamic", "inertial", True),
        ("kinematic", "physical", True),
        ("dynamic", "rotation_weight", 0.5),
        ("twist", "payload_log", "x.csv"),
    ],
)
def test_options_of_another_kind_are_refused(kind, option, value):
    request = Request("planar_2r", "log.csv", kind, **{option: value})
    with pytest.raises(wb.WorkbenchError, match=f"--{option.replace('_', '-')} applies to"):
        check_request(request)


def test_validation_log_equal_to_the_log_is_refused(tmp_path, capsys):
    chain = wb.models.load("planar_2r")
    log, _ = simulate_log(chain, kind="dynamic", samples=300, perturb=0.05, noise=0.01)
    path = write_log(tmp_path / "log.csv", log)
    same = str(tmp_path / "." / "log.csv")
    argv = ["calibrate", "--model", "planar_2r", "--log", str(path), "--kind", "dynamic",
            "--validation-log", same, "--out", str(tmp_path / "o")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "is the log calibrated on" in err and err.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_a_request_runs_as_the_command_does(tmp_path):
    chain = wb.models.load("planar_2r")
    log, _ = simulate_log(chain, kind="dynamic", samples=600, perturb=0.05, noise=0.01)
    path = write_log(tmp_path / "log.csv", log)
    outcome = run_calibration(Request("planar_2r", str(path), "dynamic", folds=3))
    assert outcome.improved and not outcome.diagnoses
    assert outcome.report.summary["heldout"]["scheme"].startswith("blocked cross-validation")
