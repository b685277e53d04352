"""Compile, or load from numba's disk cache, every compiled kernel of the project.

    python -m workbench.warm_up

The first call of each kernel in a process costs its compilation (up to a
minute on a new installation) or its cache load (about a second): call
:func:`warm_up` before timing anything, or run this module once after
``pip install``. Tiny models exercise every kernel: a revolute-prismatic
chain (dynamics, and a kinematic, twist and dynamic calibration on short
simulated logs), the planar five-bar (closed chains) and a tetrahedron
(mesh inertia). Kernels are compiled for one type per argument (the entry
points hand them C-contiguous float arrays), so the signatures compiled
here are those of every robot and log.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

from workbench import inertia
from workbench.chain import PRISMATIC, REVOLUTE, Chain
from workbench.dynamics.derivatives import rnea_derivatives, twist_derivatives

# the kernels :func:`derivatives` compiles (``python -m workbench.warm_up --derivatives``)
DERIVATIVES = ("workbench.dynamics.derivatives._derivatives_kernel",)


def warm_up(closed_chains: bool = True) -> None:
    """Run every compiled kernel once on a tiny model (module docstring)."""
    # imported here: `--derivatives` (a second process on a first run) needs none of them
    from workbench.calibration.cross_validation import calibrate
    from workbench.calibration.problems.problem import Options
    from workbench.calibration.selection.validation import Folds
    from workbench.calibration.simulation.simulate import simulate_log
    from workbench.closed_chains import load
    from workbench.closed_chains.derivatives import closed_chain_derivatives
    from workbench.closed_chains.kinematics import accelerations, independent_rows
    from workbench.dynamics.inverse_dynamics import inverse_dynamics
    from workbench.dynamics.regressor import torque_regressor
    from workbench.dynamics.time_derivatives import time_derivatives
    from workbench.models.mesh import mass_properties
    from workbench.ocp import sx_compiler
    from workbench.ocp.model_functions import model_callbacks

    if closed_chains:
        # the default reach's exact second derivatives, compiled to C (workbench.ocp.sx_compiler)
        # by a C compiler in the background while numba compiles the kernels below
        fivebar = load("fivebar")
        model_callbacks(fivebar, 2, independent_rows(fivebar, fivebar.home))
    chain = tiny_chain()
    q = np.zeros((1, chain.n))
    f_tool = np.zeros((1, 6))
    for f in (None, f_tool):
        inverse_dynamics(chain, q, q, q, f)
    torque_regressor(chain, q, q, q)
    time_derivatives(chain, q, q, q, q, q)
    vertices = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
    faces = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
    mass_properties(vertices, faces, derivatives=True)
    if closed_chains:
        model = load("planar_fivebar")
        home = model.home[None]
        accelerations(model, home, 0 * home, np.zeros((1, len(model.active))))
    # the calibrations and derivatives last: a second process may be compiling the
    # derivatives' kernel they call (__main__)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # two joints identify little: the kernels are the point
        for kind in ("kinematic", "twist", "dynamic"):
            log, _ = simulate_log(chain, kind=kind, samples=40, orientation=True, noise=1e-3)
            calibrate(chain, kind, log, Folds(2), Options(physical=kind == "dynamic"))
    derivatives()
    if closed_chains:
        closed_chain_derivatives(model, home, 0 * home, 0 * home)
    sx_compiler.wait()


def derivatives() -> None:
    """Compile (or load) the kernels of :data:`DERIVATIVES`: the inverse dynamics' twist
    and state derivatives, the largest compilation of the project (a second process
    compiles it on a first run: :func:`workbench.runtime.compile_beside`)."""
    chain = tiny_chain()
    q = np.zeros((1, chain.n))
    for f in (None, np.zeros((1, 6))):
        twist_derivatives(chain, q, q, q, f)
        rnea_derivatives(chain, q, q, q, f)


def tiny_chain() -> Chain:
    """A revolute and a prismatic joint with unit inertias: the smallest model of every kind."""
    phi = np.array([1.0, 0.1, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    return Chain(
        joint_names=("revolute", "prismatic"),
        link_names=("link_1", "link_2"),
        parents=np.array([-1, 0]),
        joint_kinds=(REVOLUTE, PRISMATIC),
        axes=np.eye(3)[[2, 0]],
        joint_frames=np.stack([np.eye(4), np.eye(4)]),
        inertias=inertia.matrix_from_phi(np.stack([phi, phi])),
        tool_name="tool",
        tool_parent=1,
        tool_frame=np.eye(4),
    )


if __name__ == "__main__":
    if sys.argv[1:] == ["--derivatives"]:
        derivatives()
    else:
        from workbench import runtime

        runtime.compile_beside(DERIVATIVES, ("-m", "workbench.warm_up", "--derivatives"))
        warm_up()
        print("workbench: the compiled kernels are ready")
