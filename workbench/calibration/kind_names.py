"""Names the command line offers as choices: calibration kinds, torque-model terms, losses.

:mod:`workbench.calibration.kinds` registers one adapter per kind name,
:mod:`workbench.calibration.drives` builds the terms and
:mod:`workbench.calibration.solver` the losses; they take the names from
here, and the commands take their choices from here, so that building the
parser imports no solver (``workbench --help`` and the other commands start
fast).
"""

DESCRIPTIONS = {  # per calibration kind, what it calibrates from what
    "kinematic": "joint twists and frames from measured poses",
    "twist": "joint twists from joint torques (d tau / d eta)",
    "dynamic": "inertial base parameters and drive terms from torques",
}
KIND_NAMES = tuple(DESCRIPTIONS)
TERMS = (  # torque-model terms
    "friction",
    "rotor_inertia",
    "offset",
    "coupled_motors",
    "stribeck",
    "load_friction",
    "temperature",
    "sensor_delay",
)
FURTHER_TERMS = ("stribeck", "load_friction", "temperature", "sensor_delay")  # screened one by one
CLASSIC_TERMS = tuple(t for t in TERMS if t not in FURTHER_TERMS)
LOSSES = ("linear", "huber", "soft_l1")  # residual losses of the least squares
