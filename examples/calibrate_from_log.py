"""Dynamic identification of a real robot from its recording (Staubli TX40).

    python examples/calibrate_from_log.py [--folds K]

Reads the TX40 recording through its log description
(models/staubli_tx40/identification.toml: columns, units, transmission,
filtering), identifies the base inertial parameters with friction as a
physically consistent model, and reports the held-out relative RMS of the
torques against the nominal model.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import workbench as wb
from workbench.calibration import Folds, Options, calibrate, read_log

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args(argv)
    chain = wb.models.load("staubli_tx40")
    log = read_log(ROOT / "models" / "staubli_tx40" / "identification.toml", chain)
    report = calibrate(chain, "dynamic", log, Folds(args.folds), Options(physical=True))
    held = report.summary["heldout"]
    print(f"{len(log)} samples, {held['scheme']}: held-out relative RMS "
          f"{held['nominal']['relative_rms']:.4f} (nominal) -> "
          f"{held['calibrated']['relative_rms']:.4f} (identified)")  # fmt: skip
    for name, value, rel_std in report.parameters[:6]:
        print(f"  {name:>8} = {value: .5g}  ({rel_std:.1f} % std)")


if __name__ == "__main__":
    main()
