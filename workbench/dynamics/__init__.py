"""Dynamics of kinematic trees in product-of-exponentials form, one module per algorithm.

* :mod:`.inverse_dynamics`: batched recursive Newton-Euler (Kwon, eq. 1-5);
* :mod:`.derivatives`: d tau / d [eta, q, dq, ddq] (Kwon, Algorithm 1) and
  forward-dynamics partials;
* :mod:`.time_derivatives`: tau, tau-dot, tau-ddot along a trajectory
  (Mueller and Kumar);
* :mod:`.matrices`: M, C, g and task-space dynamics (Garofalo et al.);
* :mod:`.regressor`: the joint-torque regressor, linear in inertial parameters;
* :mod:`.kinematics`: forward kinematics and frame Jacobians in eta;
* :mod:`.kernels`: the compiled per-sample building blocks.

The functions users call are re-exported by :mod:`workbench` (``wb.inverse_dynamics``,
``wb.twist_derivatives``, ...); this package exports nothing itself, so that a
submodule and a function of the same name never shadow each other.
"""
