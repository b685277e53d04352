"""The problems of the calibration kinds: one contract, one module per kind.

- ``problem``: the contract ``CalibrationProblem`` over validation blocks, ``Residuals``,
  ``Options``
- ``kinematic_problem``, ``twist_problem``, ``dynamic_problem``: the kinds' problems
  (dynamic: logs in memory)
- ``regressor_blocks``: the torque equations with the regressor computed block by block,
  never whole
- ``accumulated_dynamic``: large logs: blocks of accumulated factors
- ``torque_problem``: what the torque problems share: drives, figures from residual sums
- ``parameter_figures``: relative standard deviations, eta entries
- ``kinds``: the registry: each kind's problems and the options it reads
- ``kind_names``: the kinds' names and descriptions and the losses, for the command line
"""
