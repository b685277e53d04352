"""The identification model: joint torques linear in standard parameters, their base
parameters, the drive terms, physical consistency and the weighted least squares.

What calibration, experiment design and payload identification share; it knows
models, not recordings.

- ``torque_model``: the torque model ``W x`` in standard parameters and its base parameters
- ``drives``: drive terms (friction, rotor inertia, offsets, coupled motors, Stribeck, ...)
  and drive files
- ``term_names``: the names of the torque-model terms, for descriptions and the command line
- ``consistency``: the physically consistent model closest to an estimate
- ``least_squares``: Gautier's weighted least squares of base parameters, as in-memory and
  accumulated fits share it
"""

from __future__ import annotations

from workbench.exports import exports

_NAMES = {
    "TorqueModel": "torque_model",
    "BaseParameters": "torque_model",
    "base_parameters": "torque_model",
    "Drives": "drives",
    "read_drive_file": "drives",
    "drive_file_text": "drives",
    "TERMS": "term_names",
    "consistent_fit": "consistency",
    "is_consistent": "consistency",
}

__all__, __getattr__ = exports(__name__, _NAMES)
