"""Files of an excitation result, written into a (staging) directory.

* dynamic / twist: ``trajectory.csv`` and ``trajectory.npz`` in the log
  column convention (``t, q_<joint>, dq_<joint>, ddq_<joint>``; readable by
  :func:`workbench.recordings.log_files.read_log`, sampled at the problem's
  ``sample_rate`` for a controller), ``coefficients.csv`` (the Fourier
  coefficients per joint: ``joint, c0, a1..aL, b1..bL`` with period and
  harmonics in the header comment), ``limits.png`` (every quantity as a
  fraction of its limit), ``positions.png``, ``velocities.png``,
  ``accelerations.png``, ``torques.png`` (against the limits), and
  ``precision.png`` (predicted relative std of the designed and of the
  initial random trajectory);
* kinematic: ``postures.csv`` (``t, q_<joint>``, one posture every 10 s, the
  time to move, settle and measure; add the measured ``px, py, pz`` columns
  and it is a kinematic calibration log),
  ``postures.png``, ``precision.png``;
* both: ``summary.json`` (the moving joints, the locked ones' values in rad or m,
  criterion, log det, condition number, per
  parameter the nominal value, predicted std and relative std for the stated
  noise, the limits reached on a fine grid, solver statistics),
  ``animation.html`` (meshcat, self-contained), unless the problem turns the
  animation off, and ``report.html``: the summary's figures (:func:`page_rows`,
  the numbers of summary.json to 6 significant digits), its warnings, every
  plot and the animation in one self-contained page
  (:mod:`workbench.viz.report_page`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from workbench.excitation.experiment import ExcitationResult, Prediction
from workbench.io import atomic_write_text, json_text
from workbench.lie import Array
from workbench.ocp.nlp import SOLVED
from workbench.recordings.log import Log
from workbench.recordings.log_files import write_log
from workbench.viz import excitation_plots as plots
from workbench.viz import viewer
from workbench.viz.playback import robot_by_name
from workbench.viz.report_page import write_report_page


def _number(x: float) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _median(x: Array) -> float | None:
    finite = x[np.isfinite(x)]
    return float(np.median(finite)) if finite.size else None


def _no_relative_std(prediction: Prediction, k: int) -> str:
    """Why parameter k has no relative std."""
    if not math.isfinite(prediction.std[k]):
        return "not identifiable from this experiment: no std"
    return "nominal value 0: relative std undefined; predicted_std is absolute"


def _parameters(prediction: Prediction, initial: Prediction | None) -> list[dict[str, Any]]:
    rows = []
    rel = prediction.relative_std
    rel0 = initial.relative_std if initial is not None else None
    for k, name in enumerate(prediction.names):
        row = {
            "name": name,
            "nominal": _number(prediction.nominal[k]),
            "predicted_std": _number(prediction.std[k]),
            "predicted_relative_std_percent": _number(rel[k]),
        }
        if initial is not None:
            row["initial_std"] = _number(initial.std[k])
            row["initial_relative_std_percent"] = _number(rel0[k])
        if not math.isfinite(rel[k]):
            row["relative_std_note"] = _no_relative_std(prediction, k)
        rows.append(row)
    return rows


def solver_warning(result: ExcitationResult) -> str | None:
    """Why the designed trajectory is no optimum (IPOPT stopped unsolved, e.g. at its iteration
    limit), or None."""
    d = result.design
    if d.status in SOLVED:
        return None
    return (
        f"IPOPT stopped with {d.status} after {d.iterations} iterations ([design] "
        f"max_iterations = {result.problem.design.max_iterations} per start in "
        f"{result.problem.source}): the trajectory is the best one found, not an optimum; "
        "raise max_iterations"
    )


def summary(result: ExcitationResult, model: str) -> dict[str, Any]:
    """The content of summary.json (module docstring)."""
    p, p0 = result.prediction, result.initial
    out: dict[str, Any] = {
        "kind": result.kind,
        "model": model,
        "joints": list(result.chain.joint_names),
        "locked": dict(result.chain.reduction.locked) if result.chain.reduction else {},
        "problem": result.problem.source,
        "seconds": result.seconds,
    }
    if result.kind == "kinematic":
        s = result.selection
        settings = result.problem.postures
        out["criterion"] = {
            "name": "logdet",
            "log_det": s.log_det,
            "greedy_log_det": _number(s.greedy_log_det),  # None: the greedy set was singular
            "upper_bound": s.upper_bound,
            "d_efficiency_lower_bound": s.efficiency_bound,
            "condition_number": s.condition_number,
            "exchanges": s.exchanges,
            "random_selection_log_det": _number(p0.log_det),  # None: singular (-inf)
        }
        out["noise"] = {
            "position_m": settings.sigma_position,
            "rotation_rad": settings.sigma_rotation,
            "measure": settings.measure,
            "device_known": settings.device_known,
        }
        out["postures"] = {
            "selected": int(result.q.shape[0]),
            "candidates": int(result.information.q.shape[0]),
            "candidate_indices": s.selected.tolist(),
        }
        out["parameters"] = _parameters(p, p0)
        out["parameters_note"] = (
            "identifiable directions of the calibration parameters (joint eta, device and marker "
            "frames), std in m or rad along each; nominal values are 0"
        )
        return out
    d = result.design
    out["criterion"] = {
        "name": d.criterion,
        "value": d.value,
        "log_det": d.log_det,
        "condition_number": d.condition_number,
        "initial_value": d.initial.get("value"),
        "initial_log_det": d.initial.get("log_det"),
        "initial_condition_number": d.initial.get("condition_number"),
        "collocation_points": d.collocation,
        "note": "over the collocation points of one period, Coulomb friction smoothed",
    }
    out["prediction"] = {
        "samples": p.samples,
        "log_det": p.log_det,
        "condition_number": p.condition_number,
        "initial_log_det": p0.log_det,
        "initial_condition_number": p0.condition_number,
        "median_relative_std_percent": _median(p.relative_std),
        "initial_median_relative_std_percent": _median(p0.relative_std),
    }
    out["noise"] = {
        "torque_std_N_m": result.noise.tolist(),
        "model": "independent Gaussian torque noise per joint, white over the written samples",
    }
    settings = result.problem.trajectory
    out["trajectory"] = {
        "period_s": settings.period,
        "harmonics": settings.harmonics,
        "periods": settings.periods,
        "sample_rate_hz": settings.sample_rate,
        "samples": int(result.t.size),
        "duration_s": float(result.t[-1]),
        "start": result.q[0].tolist(),
    }
    lim = result.limits
    out["limits"] = {
        "lower": lim.lower.tolist(),
        "upper": lim.upper.tolist(),
        "velocity": lim.velocity.tolist(),
        "acceleration": lim.acceleration.tolist(),
        "torque": lim.torque.tolist(),
        "peak_fraction_on_fine_grid": {k: v.tolist() for k, v in d.limit_ratios.items()},
        "fine_grid_points_per_period": d.collocation * result.problem.design.fine,
    }
    out["solver"] = {
        "status": d.status,
        "iterations": d.iterations,
        "seconds": d.seconds,
    }
    warning = solver_warning(result)
    out["warnings"] = [] if warning is None else [warning]
    out["parameters"] = _parameters(p, p0)
    return out


def write_results(stage: Path, result: ExcitationResult, model: str) -> list[Path]:
    """Write every output file of ``result`` into ``stage`` (module docstring)."""

    chain = result.chain
    names = chain.joint_names
    written: list[Path] = []
    if result.kind == "kinematic":
        log = Log(t=result.t, q=result.q, joint_names=names, source="<postures>")
        written.append(write_log(stage / "postures.csv", log))
        lim = result.limits
        written.append(
            plots.plot_postures(stage / "postures.png", result.q, lim.lower, lim.upper, names)
        )
        written.append(
            plots.plot_precision(
                stage / "precision.png", result.prediction.names, result.prediction.std,
                result.initial.std, ylabel="predicted std [m or rad]",
                title="Predicted precision: selected vs random postures",
                missing_note="not identifiable from the selected postures: no std",
            )
        )  # fmt: skip
    else:
        log = Log(
            t=result.t, q=result.q, dq=result.dq, ddq=result.ddq, joint_names=names,
            source="<excitation>",
        )  # fmt: skip
        written.append(write_log(stage / "trajectory.csv", log))
        written.append(write_log(stage / "trajectory.npz", log))
        written.append(_write_coefficients(stage / "coefficients.csv", result))
        lim = result.limits
        series = {"q": result.q, "dq": result.dq, "ddq": result.ddq, "tau": result.tau}
        lower = {"q": lim.lower, "dq": -lim.velocity, "ddq": -lim.acceleration, "tau": -lim.torque}
        upper = {"q": lim.upper, "dq": lim.velocity, "ddq": lim.acceleration, "tau": lim.torque}
        written.append(
            plots.plot_limits(stage / "limits.png", result.t, series, lower, upper, names)
        )
        titles = {
            "q": ("positions.png", "Joint positions", "rad"),
            "dq": ("velocities.png", "Joint velocities", "rad/s"),
            "ddq": ("accelerations.png", "Joint accelerations", "rad/s^2"),
            "tau": ("torques.png", "Joint torques (nominal model)", "N m"),
        }
        for key, (file, title, unit) in titles.items():
            written.append(
                plots.plot_quantity(
                    stage / file, result.t, series[key], lower[key], upper[key], names,
                    title=title, ylabel=unit,
                )
            )  # fmt: skip
        written.append(
            plots.plot_precision(
                stage / "precision.png", result.prediction.names,
                result.prediction.relative_std, result.initial.relative_std,
            )
        )  # fmt: skip
    content = summary(result, model)
    written.append(atomic_write_text(stage / "summary.json", json_text(content)))
    animation = None
    if result.problem.animation:
        animation = animation_html(result, model)
        written.append(atomic_write_text(stage / "animation.html", animation))
    images = [path for path in written if path.suffix == ".png"]
    written.append(
        write_report_page(
            stage / "report.html", f"{result.kind} excitation design for {model}",
            page_rows(content), images, warnings=content.get("warnings", []),
            animation=animation,
        )
    )  # fmt: skip
    return written


def page_rows(summary: dict[str, Any]) -> list[tuple[str, Any]]:
    """The summary table of ``report.html``: the figures of ``summary`` (its content, module
    docstring) to 6 significant digits; "not finite" where summary.json has null."""
    rows: list[tuple[str, Any]] = [
        ("kind", summary["kind"]),
        ("model", summary["model"]),
        ("joints", ", ".join(summary["joints"])),
        ("problem", summary["problem"]),
    ]
    if summary["locked"]:
        rows.append(
            ("locked joints", ", ".join(f"{j} = {v:g}" for j, v in summary["locked"].items()))
        )
    c = summary["criterion"]
    if summary["kind"] == "kinematic":
        postures, noise = summary["postures"], summary["noise"]
        rows += [
            ("postures selected / candidates",
             f"{postures['selected']} / {postures['candidates']}"),
            ("log det F, selected", _text(c["log_det"])),
            ("log det F, random selection", _text(c["random_selection_log_det"])),
            ("log det F, greedy start", _text(c["greedy_log_det"])),
            ("upper bound on log det F", _text(c["upper_bound"])),
            ("D-efficiency, lower bound", _text(c["d_efficiency_lower_bound"])),
            ("condition number", _text(c["condition_number"])),
            ("exchanges", c["exchanges"]),
            ("measure", noise["measure"]),
            ("device frame known", "yes" if noise["device_known"] else "no (calibrated too)"),
            ("noise: position [m], rotation [rad]",
             f"{_text(noise['position_m'])}, {_text(noise['rotation_rad'])}"),
            ("parameters", summary["parameters_note"]),
        ]  # fmt: skip
        relative = False
    else:
        p, trajectory, solver = summary["prediction"], summary["trajectory"], summary["solver"]
        rows += [
            (f"criterion ({c['name']}) at {c['collocation_points']} collocation points: "
             "log det F, initial -> designed", _arrow(c["initial_log_det"], c["log_det"])),
            ("condition number at the collocation points, initial -> designed",
             _arrow(c["initial_condition_number"], c["condition_number"])),
            (f"written trajectory ({p['samples']} samples): log det F, initial -> designed",
             _arrow(p["initial_log_det"], p["log_det"])),
            ("written trajectory: condition number, initial -> designed",
             _arrow(p["initial_condition_number"], p["condition_number"])),
            ("median predicted relative std [%], initial -> designed",
             _arrow(p["initial_median_relative_std_percent"], p["median_relative_std_percent"])),
            ("trajectory", f"period {_text(trajectory['period_s'])} s, "
             f"{trajectory['harmonics']} harmonics, {trajectory['periods']} period(s), "
             f"{_text(trajectory['sample_rate_hz'])} Hz, {trajectory['samples']} samples"),
            ("torque noise std [N m]",
             ", ".join(_text(v) for v in summary["noise"]["torque_std_N_m"])),
            ("IPOPT", f"{solver['status']}, {solver['iterations']} iterations, "
             f"{_text(solver['seconds'])} s"),
        ]  # fmt: skip
        for quantity, ratios in summary["limits"]["peak_fraction_on_fine_grid"].items():
            rows.append((f"peak fraction of the {quantity} limits", max(ratios)))
        relative = True
    for row in summary["parameters"]:
        if relative and row["predicted_relative_std_percent"] is not None:
            label = "predicted relative std [%]"
            values = row["initial_relative_std_percent"], row["predicted_relative_std_percent"]
        else:
            label = "predicted std"
            values = row["initial_std"], row["predicted_std"]
        text = _arrow(*values)
        if "relative_std_note" in row and (relative or values[1] is None):  # else: no nominal
            text += f" ({row['relative_std_note']})"
        rows.append((f"{row['name']}: {label}, initial -> designed", text))
    rows.append(("seconds", summary["seconds"]))
    return rows


def _text(value: Any) -> str:
    """A figure as the page shows it (6 significant digits; None: not finite)."""
    return "not finite" if value is None else f"{value:.6g}"


def _arrow(before: Any, after: Any) -> str:
    return f"{_text(before)} -> {_text(after)}"


def _write_coefficients(path: Path, result: ExcitationResult) -> Path:
    trajectory = result.design.trajectory
    L = trajectory.harmonics
    header = (
        f"# q_i(t) = c0 + sum_l a_l sin(l w t) + b_l cos(l w t), w = 2 pi / {trajectory.period!r}"
        f" s, {L} harmonics\n"
        "joint,c0," + ",".join(f"a{l}" for l in range(1, L + 1))
        + "," + ",".join(f"b{l}" for l in range(1, L + 1)) + "\n"
    )  # fmt: skip
    lines = [
        name + "," + ",".join(repr(float(v)) for v in row)
        for name, row in zip(result.chain.joint_names, trajectory.coefficients, strict=True)
    ]
    return atomic_write_text(path, header + "\n".join(lines) + "\n")


def animation_html(result: ExcitationResult, model: str) -> str:
    """The meshcat animation of the trajectory (or of the postures, one per second on screen)
    as one self-contained HTML document."""

    robot = robot_by_name(model)
    t, q = result.t, result.q
    if result.kind == "kinematic":
        t = np.arange(q.shape[0], dtype=float)  # one posture per second on screen
    elif t.size > 1:
        step = max(1, round((t[1] - t[0]) ** -1 / 30.0))  # about 30 frames per second
        t, q = t[::step], q[::step]
    return viewer.static_html(robot, t, configurations(robot, result.chain.joint_names, q))


def configurations(robot, joint_names: tuple[str, ...], q: Array) -> Array:
    """Pinocchio configurations (K, nq) of the robot's model for joint values q (K, n)."""
    import pinocchio as pin

    model = robot.model
    out = np.tile(pin.neutral(model), (q.shape[0], 1))
    for j, name in enumerate(joint_names):
        if not model.existJointName(name):
            continue
        joint = model.joints[model.getJointId(name)]
        if joint.nq == 1:
            out[:, joint.idx_q] = q[:, j]
        elif joint.nq == 2:  # continuous joint: (cos, sin)
            out[:, joint.idx_q] = np.cos(q[:, j])
            out[:, joint.idx_q + 1] = np.sin(q[:, j])
    return out
