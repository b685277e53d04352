"""Efforts in the log's declared unit, and gains suggested from the nominal model kept apart.

A UR5 (example-robot-data) logs motor currents: the truth's torques (Pinocchio's RNEA plus
friction) divided by a torque constant per joint. Read with ``[torques] unit = "A"`` the
summary's effort units are amperes; read with the torque constants as ``scale`` they are N m.
Read with the scales the effort check suggests from the nominal model, and said so
(``scale_from_nominal``), the check's agreement is no evidence of the units.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import workbench as wb
from workbench.calibration.checks.effort_units import (
    SUGGESTED_FROM,
    compare_efforts,
    effort_summary,
)
from workbench.calibration.checks.fit_plausibility import diagnose
from workbench.calibration.run import Request, run_calibration
from workbench.calibration.simulation.simulate import simulate_log
from workbench.recordings.log_files import read_log, write_log
from workbench.testing.log_descriptions import csv_description
from workbench.testing.pinocchio_reference import truth_torques

CONSTANTS = np.array([9.0, 11.0, 7.0, 2.5, 3.0, 1.5])  # N m per A, joint side


@pytest.fixture(scope="module")
def ur5():
    return wb.models.load("ur5")


@pytest.fixture(scope="module")
def currents(tmp_path_factory, ur5):
    """A folder with log.csv (currents) and a description maker, and the truth's torques."""
    log, truth = simulate_log(ur5, kind="dynamic", samples=600, perturb=0.05, friction=0.3, seed=3)
    tau = truth_torques(truth, log)
    folder = tmp_path_factory.mktemp("currents")
    write_log(folder / "log.csv", replace(log, tau=tau / CONSTANTS, temperature=None))

    def describe(name: str, torques: str) -> str:
        path = folder / f"{name}.toml"
        path.write_text(csv_description(ur5.joint_names) + torques)
        return str(path)

    return describe, tau


def summary_of(path: str) -> dict:
    return run_calibration(Request("ur5", path, "dynamic", terms=("friction",))).report.summary


def test_currents_declared_in_amperes_are_reported_in_amperes(ur5, currents):
    """Every effort-derived unit of the summary is the declared one, per joint type (revolute:
    per rad)."""
    describe, _ = currents
    summary = summary_of(describe("amperes", 'unit = "A"\n'))
    assert summary["units"]["effort"] == "A" and summary["rms"]["unit"] == "A"
    for joint in ur5.joint_names:
        units = summary["units"]["joints"][joint]
        assert units["effort"] == units["coulomb_friction"] == units["offset"] == "A"
        assert units["viscous_friction"] == "A s/rad" and units["rotor_inertia"] == "A s^2/rad"
    assert summary["effort_check"]["suggested_scale_from"] == SUGGESTED_FROM


def test_currents_scaled_by_their_torque_constants_are_newton_metres(ur5, currents):
    """The torque constants as scale: N m, and the check supports the units it compared."""
    describe, _ = currents
    scale = ", ".join(f"{k:g}" for k in CONSTANTS)
    summary = summary_of(describe("scaled", f"scale = [{scale}]\n"))
    assert summary["units"]["effort"] == "N m" and summary["rms"]["unit"] == "N m"
    assert {u["effort"] for u in summary["units"]["joints"].values()} == {"N m"}
    check = summary["effort_check"]
    assert check["units_supported"]
    assert set(check["units_supported"]) | set(check["units_unverified"]) == set(ur5.joint_names)


def test_gains_suggested_from_the_nominal_are_no_evidence_of_the_units(ur5, currents):
    """Currents read as N m: the check suggests a scale per joint, from the nominal model, said
    so. Applied and declared with scale_from_nominal, no joint counts as a supported unit and
    the diagnosis does not list them as the right unit; the same scales undeclared would."""
    describe, _ = currents
    raw = read_log(describe("raw", ""), ur5, require=("tau",))
    found = compare_efforts(raw, ur5)
    scaled = [f for f in found if f.verdict == "scale"]
    assert scaled and all("from the nominal model's torques" in f.message for f in scaled)
    assert all('scale_from_nominal = ["' in f.message for f in scaled)
    suggested = [f.suggested_scale if np.isfinite(f.suggested_scale) else 1.0 for f in found]
    scale = "scale = [" + ", ".join(f"{k:.6g}" for k in suggested) + "]\n"
    names = ", ".join(f'"{j}"' for j in ur5.joint_names)
    declared = read_log(
        describe("declared", scale + f"scale_from_nominal = [{names}]\n"), ur5, require=("tau",)
    )
    assert declared.scale_from_nominal == ur5.joint_names
    undeclared = read_log(describe("undeclared", scale), ur5, require=("tau",))
    by_nominal = effort_summary(compare_efforts(declared, ur5))
    as_given = effort_summary(compare_efforts(undeclared, ur5))
    assert as_given["units_supported"]  # the nominal's own gains agree with it, by construction
    assert by_nominal["units_supported"] == []
    assert set(by_nominal["units_unverified"]) == set(ur5.joint_names)
    text = " ".join(d.evidence for d in diagnose(declared, ur5))
    assert "taken as the right unit" not in text


def test_a_position_unit_is_no_effort_unit(ur5, currents):
    describe, _ = currents
    with pytest.raises(wb.WorkbenchError, match=r"unit = 'rad'.*efforts"):
        read_log(describe("radians", 'unit = "rad"\n'), ur5, require=("tau",))
