"""Names the command line offers as choices: calibration kinds and losses (the torque-model
terms: :mod:`workbench.identification.term_names`).

:mod:`workbench.calibration.problems.kinds` registers one adapter per kind name and
:mod:`workbench.calibration.fitting.solver` the losses; they take the names from
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
LOSSES = ("linear", "huber", "soft_l1")  # residual losses of the least squares
