"""Result files drawn by the drawing worker are the files drawn in the process itself."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from workbench.viz import drawing

ROOT = Path(__file__).resolve().parents[1]

DRAW = """
import sys
from pathlib import Path
import numpy as np
from workbench.viz import drawing

out = Path(sys.argv[1])
t = np.linspace(0.0, 1.0, 20)
tau = np.column_stack([np.sin(t), np.cos(t)])
def draw():
    return drawing.draw("motor_torques.png", "workbench.viz.plots:plot_torques", t, tau,
                        ["tau1", "tau4"], limits=np.array([2.0, 3.0]))
with drawing.worker("workbench.viz.plots"):
    there = draw()
    assert there.pending is not None
    there.write(out / "worker")
    assert "matplotlib" not in sys.modules  # imported by the worker only
draw().write(out / "here")
"""


def test_the_worker_draws_the_same_file_and_this_process_imports_no_matplotlib(tmp_path):
    for name in ("here", "worker"):
        (tmp_path / name).mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run([sys.executable, "-c", DRAW, str(tmp_path)], env=env, check=True)
    here, worker = (tmp_path / name / "motor_torques.png" for name in ("here", "worker"))
    assert here.read_bytes().startswith(b"\x89PNG")
    assert worker.read_bytes() == here.read_bytes()


def test_no_worker_is_forked_beside_other_threads(tmp_path):
    """A process with another thread draws in the process itself (no fork)."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        with drawing.worker("workbench.viz.plots"):
            t, ones = np.linspace(0.0, 1.0, 5), np.ones((5, 1))
            d = drawing.draw("power.png", "workbench.viz.plots:plot_power_energy", t, ones, ones)
            assert d.pending is None
            path = d.write(tmp_path)
    finally:
        stop.set()
        other.join()
    assert path.read_bytes().startswith(b"\x89PNG")


WAIT_WITH_A_WORKER = """
import time
from workbench.io import raise_on_sigterm
from workbench.viz import drawing

raise_on_sigterm()
try:
    with drawing.worker("workbench.viz.plots"):
        drawing._worker.submit(int).result()  # the worker runs
        print("ready", flush=True)
        time.sleep(600)
except KeyboardInterrupt as exc:
    print(type(exc).__name__, flush=True)
"""


def test_sigterm_to_the_process_group_ends_the_worker_without_a_traceback():
    """``timeout`` and job schedulers signal the whole group: the forked worker inherited the
    command's SIGTERM handler and printed a ``Terminated`` traceback."""
    import signal

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-c", WAIT_WITH_A_WORKER], env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    assert proc.stdout.readline().strip() == "ready"
    os.killpg(proc.pid, signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert out.strip() == "Terminated"
    assert "Traceback" not in err, err


SLEEP_IN_WORKER_BLOCK = """
import sys, time
from workbench.viz import drawing
with drawing.worker():
    print("ready", flush=True)
    time.sleep(120)
"""


def test_the_worker_ends_when_the_command_is_killed():
    """SIGKILL to the command (no handler runs): its drawing worker does not stay behind."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = subprocess.Popen([sys.executable, "-c", SLEEP_IN_WORKER_BLOCK], env=env,
                               stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert command.stdout.readline().strip() == "ready"
        children = subprocess.run(["pgrep", "-P", str(command.pid)], capture_output=True,
                                  text=True).stdout.split()  # fmt: skip
        assert len(children) == 1, children
        worker = int(children[0])
    finally:
        command.kill()
        command.wait()
    for _ in range(100):  # at most 10 s
        if not Path(f"/proc/{worker}").exists() or "Z" in _state(worker):
            break
        time.sleep(0.1)
    else:
        os.kill(worker, 9)
        raise AssertionError("the drawing worker outlived its killed command")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
