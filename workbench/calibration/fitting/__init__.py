"""Fitting: the solvers behind the calibration kinds.

- ``kinematic``, ``kinematic_kernels``: the Levenberg-Marquardt problem of measured poses
  (markers, device frame, gauge) and its compiled normal equations
- ``twist``: joint twists from joint torques (d tau / d eta)
- ``dynamic``: Gautier's weighted least squares of the torque equations of a log in memory
- ``drive_shapes``: Stribeck speeds, the sensor delay and load torques by outer searches
- ``sensor_delay``: the fractional delay of the torques behind the positions
- ``normal_equations``: large logs: per-joint factors accumulated by a Dask map-reduce, and
  their fit
- ``drive_gains``: drive gains (raw efforts to torques) against the nominal model
- ``payload``: a payload's ten parameters, physically consistent
- ``closed_chain``: closed chains: logs of the motors with the passive joints solved, and
  their twist fit
- ``solver``: Levenberg-Marquardt on a manifold of models in an identifiable subspace, with
  IRLS for robust losses
"""
