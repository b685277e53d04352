"""Simulated logs for the calibration kinds.

- ``simulate``: a log simulated from a perturbed truth, for any kind
- ``trajectories``: exciting trajectories (sums of sines) evaluated at given instants
"""
