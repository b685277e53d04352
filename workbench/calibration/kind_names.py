"""Names of the calibration kinds, for the command line.

:mod:`workbench.calibration.kinds` registers one adapter per name; the
commands take their ``--kind`` choices from here so that building the
parser imports no solver (``workbench --help`` and the other commands start
fast).
"""

KIND_NAMES = ("kinematic", "twist", "dynamic")
