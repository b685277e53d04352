"""Checking a recording and a fit against the model.

- ``effort_units``: logged efforts against the nominal model's torques (raw units, gains,
  signs)
- ``fit_plausibility``: the likely cause of an implausible fit
- ``link_plausibility``, ``geometry_plausibility``: a calibrated model's links and joint
  geometry against the nominal one
"""
