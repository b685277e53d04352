"""Every example runs end to end with fast settings (the examples use only the public API)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(name: str, argv: list[str]) -> None:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(argv)


def test_reach(tmp_path, capsys):
    run("reach", ["--out", str(tmp_path / "reach"), "--knots", "20"])
    assert (tmp_path / "reach" / "animation.html").is_file()
    assert "solved" in capsys.readouterr().out


def test_reach_delta(tmp_path, capsys):
    problem = EXAMPLES.parent / "problems" / "delta_reach.toml"
    run("reach", [str(problem), "--out", str(tmp_path / "delta"), "--knots", "15"])
    assert (tmp_path / "delta" / "report.html").is_file()


@pytest.mark.slow
def test_codesign(capsys):
    run("codesign", ["--knots", "25"])
    assert "moving mass" in capsys.readouterr().out


def test_calibrate_from_log(capsys):
    run("calibrate_from_log", ["--folds", "2"])
    assert "held-out relative RMS" in capsys.readouterr().out


def test_mesh_inertia(capsys):
    run("mesh_inertia", [])
    assert "trimesh" in capsys.readouterr().out


def test_twist_derivatives(capsys):
    run("twist_derivatives", ["--samples", "50"])
    error = float(capsys.readouterr().out.split("relative error ")[1].split()[0])
    assert error < 1e-6


def test_view(tmp_path):
    run("view", ["--out", str(tmp_path / "view.html")])
    assert "meshcat" in (tmp_path / "view.html").read_text().lower()
