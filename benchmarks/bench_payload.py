"""Payload identification (workbench payload): designed against random motion, Monte Carlo.

The iiwa carries 1.5 kg on link 7 (COM (0.02, -0.01, 0.08) m in the link frame,
principal moments 4, 5, 3 g m^2 about the COM). Joints 5-7 move for 10 s,
joints 1-4 hold (0.3, 0.6, 0, -1.2). The motion is the D-optimal design of
``workbench payload excite`` (torque noise for the design: 1 % of the effort
limits) and, beside it, the random Fourier motion of the same length, harmonics
and limits that the design starts from. Each is logged ``--draws`` times at
``--rate`` Hz as a robot logs it (``workbench.calibration.simulation.simulate.payload_log``:
19-bit encoders from a random zero, torque noise 0.5 % of each joint's torque
RMS plus 0.05 N m), written as a table of t, q and tau, read back (dq and ddq by
Savitzky-Golay over 0.1 s: ``--savgol-window``, default 0.1 s of samples plus
one, 11 at 100 Hz, as ``workbench payload identify``) and identified. Reported per
motion: RMS and largest mass error, RMS and largest COM error, the Monte Carlo
std over the predicted one (range over the 10 parameters of phi, and for the
mass and the COM), the time of one identification; and the design's time.

Run from the repository root: ``python benchmarks/bench_payload.py [--draws 50] [--rate 100]``.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

import workbench as wb
from workbench import inertia
from workbench.calibration.fitting.payload import com_form, identify_payload
from workbench.calibration.simulation.simulate import payload_log
from workbench.excitation.payload import design_payload_excitation
from workbench.excitation.problem import LimitSettings
from workbench.recordings.log_files import read_log, write_log

PHI = inertia.phi_from_com(1.5, np.array([0.02, -0.01, 0.08]), np.diag([0.004, 0.005, 0.003]))
POSTURE = np.array([0.3, 0.6, 0.0, -1.2, 0.0, 0.5, 0.0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=50)
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--savgol-window", type=int)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    window = args.savgol_window or 2 * round(0.05 * args.rate) + 1
    warnings.simplefilter("ignore", wb.WorkbenchWarning)  # the held joints' constant q
    chain = wb.models.load("iiwa")
    limits = LimitSettings().limits(chain)
    clock = time.perf_counter()
    design = design_payload_excitation(
        chain, "iiwa_link_7", ["5", "6", "7"], POSTURE, limits, 0.01 * chain.effort_limit,
        sample_rate=args.rate,
    )  # fmt: skip
    results = {
        "design_seconds": time.perf_counter() - clock,
        "rate_hz": args.rate,
        "savgol_window": window,
    }
    psi_true = com_form(PHI)
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.npz"
        for label, states in (
            ("designed", (design.t, design.q, design.dq, design.ddq)),
            ("random", (design.t, *design.random_states)),
        ):
            fits, seconds = [], 0.0
            for _ in range(args.draws):
                write_log(path, payload_log(chain, 6, PHI, *states, rng))
                start = time.perf_counter()
                log = read_log(path, chain, require=("tau",), savgol_window=window)
                fits.append(identify_payload(chain, log, "iiwa_link_7"))
                seconds += time.perf_counter() - start
            psi = np.array([f.com_form for f in fits])
            phi = np.array([f.phi for f in fits])
            mass_error = np.abs(psi[:, 0] - psi_true[0])
            com_error = np.linalg.norm(psi[:, 1:4] - psi_true[1:4], axis=1)
            ratio = np.sqrt(np.mean((phi - PHI) ** 2, 0)) / np.mean([f.std for f in fits], 0)
            ratio_psi = np.sqrt(np.mean((psi - psi_true) ** 2, 0)) / np.mean(
                [f.com_std for f in fits], 0
            )
            results[label] = {
                "log_det": (design.prediction if label == "designed" else design.random).log_det,
                "mass_error_rms_percent": 100 * float(np.sqrt(np.mean(mass_error**2))) / 1.5,
                "mass_error_max_percent": 100 * float(mass_error.max()) / 1.5,
                "com_error_rms_mm": 1e3 * float(np.sqrt(np.mean(com_error**2))),
                "com_error_max_mm": 1e3 * float(com_error.max()),
                "mc_over_predicted_std_phi": [float(ratio.min()), float(ratio.max())],
                "mc_over_predicted_std_mass_com": ratio_psi[:4].tolist(),
                "phi_rms_error": np.sqrt(np.mean((phi - PHI) ** 2, 0)).tolist(),
                "constrained": int(sum(f.constrained for f in fits)),
                "seconds_per_identification": seconds / args.draws,
            }
    d, r = (
        np.array(results["designed"]["phi_rms_error"]),
        np.array(results["random"]["phi_rms_error"]),
    )
    results["random_over_designed_error_geometric_mean"] = float(np.exp(np.mean(np.log(r / d))))
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
