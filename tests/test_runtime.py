"""The process runtime: BLAS threads next to the kernel thread pool, compile-free runs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str) -> list[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(name, None)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.split()


@pytest.mark.skipif(
    len(os.sched_getaffinity(0)) < 2 if hasattr(os, "sched_getaffinity") else True,
    reason="one core: BLAS is single-threaded anyway",
)
def test_blas_runs_on_one_thread_while_the_kernel_pool_takes_every_core():
    """threadpoolctl (not the project) reports numpy's BLAS threads in a fresh process."""
    out = _run(
        """
        import numpy
        from threadpoolctl import threadpool_info

        def blas():
            return max(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")

        before = blas()
        from workbench import runtime
        shared = blas()
        runtime.set_num_threads(1)
        alone = blas()
        runtime.set_num_threads(runtime.available_cores())
        print(before, shared, alone, blas())
        """
    )
    before, shared, alone, again = map(int, out)
    assert before > 1
    assert (shared, alone, again) == (1, before, 1)


def test_no_kernel_compiles_after_warm_up_on_another_robot():
    """After ``warm_up`` (tiny models), calibrating a 6-joint robot adds no kernel signature.

    A new signature is a compilation (or a disk-cache load) the warm-up did not
    do; the logs are given with strided and read-only columns, as table
    readers produce them.
    """
    out = _run(
        """
        import sys, warnings
        from dataclasses import replace
        import numpy as np
        from numba.core.registry import CPUDispatcher
        from workbench import models
        from workbench.calibration.problems.problem import Options
        from workbench.calibration.cross_validation import calibrate
        from workbench.calibration.simulation.simulate import simulate_log
        from workbench.calibration.selection.validation import Folds
        from workbench.dynamics.regressor import regressor_columns, torque_regressor
        from workbench.warm_up import warm_up

        def signatures():
            return {
                (name, str(sig))
                for name, module in list(sys.modules.items()) if name.startswith("workbench")
                for obj in list(vars(module).values()) if isinstance(obj, CPUDispatcher)
                for sig in obj.signatures
            }

        def strided(x):
            y = np.asfortranarray(x)
            y.flags.writeable = False
            return y

        warm_up()
        before = signatures()
        chain = models.load("ur5")
        warnings.simplefilter("ignore")
        for kind in ("kinematic", "twist", "dynamic"):
            log, _ = simulate_log(chain, kind=kind, samples=120, orientation=True, noise=1e-3)
            log = replace(log, q=strided(log.q), dq=None if log.dq is None else strided(log.dq))
            calibrate(chain, kind, log, Folds(2), Options(physical=kind == "dynamic"))
        q = strided(np.ones((300, 6)))
        torque_regressor(chain, q, q[:, ::-1], q)
        regressor_columns(chain, q, q[:, ::-1], q, np.arange(10), "joint")
        new = sorted(signatures() - before)
        print(len(before), len(new))
        for name, sig in new:
            print(name, sig.replace(" ", ""))
        """
    )
    before, new, *names = out
    assert int(before) > 10  # the warm-up compiled the project's kernels
    assert int(new) == 0, names


def test_a_reach_solve_compiles_nothing_after_its_model_functions_loaded(tmp_path):
    """``solve`` loads its model's kernels before timing: IPOPT's evaluations add no signature.

    The co-design problem (design variables: torque regressor and mesh kernels
    too) with a few knots, in a fresh process.
    """
    source = ROOT / "problems" / "fivebar_codesign.toml"
    problem = tmp_path / "codesign.toml"
    text = source.read_text().replace("knots = 100", "knots = 6").replace("../models", "models")
    problem.write_text(text.replace('"models/', f'"{ROOT}/models/'))
    out = _run(
        f"""
        import sys
        from numba.core.registry import CPUDispatcher
        from workbench.ocp import reach
        from workbench.ocp.problem import ReachProblem

        def signatures():
            return {{
                (name, str(sig))
                for name, module in list(sys.modules.items()) if name.startswith("workbench")
                for obj in list(vars(module).values()) if isinstance(obj, CPUDispatcher)
                for sig in obj.signatures
            }}

        nlpsol, seen = reach.ca.nlpsol, []

        def counted(*args, **kwargs):
            solver = nlpsol(*args, **kwargs)

            def call(**inputs):
                before = signatures()
                out = solver(**inputs)
                seen.append(sorted(signatures() - before))
                return out

            call.stats = solver.stats
            return call

        reach.ca.nlpsol = counted
        result = reach.solve(ReachProblem.from_toml("{problem}"), progress=False)
        print(result.status, len(seen), len(seen[0]), *seen[0])
        """
    )
    status, solves, new, *names = out
    assert (status, solves) == ("solved", "1")
    assert int(new) == 0, names


def test_read_only_inputs_do_not_compile_the_closure_kernels_again():
    """Read-only joint values and directions (CasADi's buffers, ``np.broadcast_to``) reach the
    closure kernels as the same numba type as writeable ones: one signature per kernel."""
    out = _run(
        """
        import numpy as np
        from workbench.closed_chains import load
        from workbench.closed_chains import loop_kernels
        from workbench.closed_chains.kinematics import Closures, joint_directions, vectors

        model = load("fivebar")
        for writeable in (True, False):
            q = np.repeat(model.home[None], 3, axis=0)
            q.flags.writeable = writeable
            closures = Closures(model, q)
            closures.jacobian()
            closures.second(vectors(q), vectors(q))
            closures.third(vectors(q), joint_directions(3, model.n))
        kernels = (
            loop_kernels._pose_kernel, loop_kernels._first_kernel,
            loop_kernels._second_kernel, loop_kernels._third_kernel,
        )
        print(*[len(kernel.signatures) for kernel in kernels])
        """
    )
    assert out == ["1", "1", "1", "1"]


def test_a_kernel_compiled_beside_is_loaded_from_the_cache_not_compiled_again(tmp_path):
    """On a first run (empty numba cache) ``compile_beside`` compiles a kernel in a second
    process; ``run_batched`` waits for it and this process loads the kernel from numba's disk
    cache (numba fires no compile event for it), and no second process is left."""
    (tmp_path / "kernel_module.py").write_text(
        textwrap.dedent(
            """
            import numba as nb
            import numpy as np

            @nb.njit(cache=True, nogil=True)
            def kernel(out, start, stop):
                for i in range(start, stop):
                    out[i] = 2.0 * i

            if __name__ == "__main__":
                kernel(np.zeros(3), 0, 3)
            """
        )
    )
    cache = tmp_path / "numba_cache"
    out = _run(
        f"""
        import os, sys
        os.environ["NUMBA_CACHE_DIR"] = "{cache}"
        sys.path.insert(0, "{tmp_path}")
        import numpy as np
        from numba.core import event
        from workbench import runtime
        import kernel_module

        compiled = []

        class Listener(event.Listener):
            def on_start(self, e):
                compiled.append(e.data["dispatcher"].py_func.__name__)

            def on_end(self, e):
                pass

        event.register("numba:compile", Listener())
        print(runtime.cache_is_empty())
        runtime.compile_beside(("kernel_module.kernel",), ("{tmp_path / "kernel_module.py"}",))
        process = runtime._BESIDE["kernel_module.kernel"]
        out = np.zeros(5)
        runtime.run_batched(kernel_module.kernel, 5, out)
        print(process.poll(), "kernel" in compiled, out.sum())
        """
    )
    assert out == ["True", "0", "False", "20.0"]
