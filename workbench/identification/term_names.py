"""Names of the torque-model terms: the ones a log description may switch on, the ones
screened one by one on the held-out folds, and the classic ones.

:mod:`workbench.identification.drives` builds the terms; a log description
(:mod:`workbench.recordings.recording`) and the command line take their choices from
here, so that building the parser imports no solver (``workbench --help`` and the other
commands start fast).
"""

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
