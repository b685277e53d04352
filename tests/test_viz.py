"""workbench.viz: plots as PNG, the meshcat scene as offline HTML and live, `workbench view`."""

from __future__ import annotations

import base64
import importlib.util
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from workbench.cli import main
from workbench.errors import WorkbenchError
from workbench.viz import playback, plots, scene, viewer

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--no-first-run",
    "--window-size=800,600",
    "--virtual-time-budget=5000",
)


@pytest.fixture(scope="module")
def fivebar_npz(tmp_path_factory) -> Path:
    """A short closed-loop five-bar motion: motors ramp, passive joints from the closure."""
    from workbench.closed_chains import load
    from workbench.closed_chains.kinematics import solve_passive

    q = solve_passive(load("fivebar"), np.linspace([0.0, 0.0], [0.5, -0.4], 6))
    path = tmp_path_factory.mktemp("result") / "trajectory.npz"
    np.savez(path, t=np.linspace(0.0, 1.0, 6), q=q)
    return path


@pytest.fixture(scope="module")
def shown(fivebar_npz) -> playback.Playback:
    return playback.load_playback(fivebar_npz.parent)


# ------------------------------------------------------------------- plots
def _check_png(path: Path) -> None:
    image = imread(path)
    assert image.shape[:2] == (700, 1000)
    assert image[..., :3].std() > 0.01


def test_plots_write_pngs_of_fixed_size(tmp_path):
    rng = np.random.default_rng(0)
    t = np.linspace(0.0, 1.0, 50)
    q = np.column_stack([np.sin(t), np.cos(t), t])
    tau = rng.normal(size=(50, 2))
    names = ["joint_1", "joint_2", "joint_3"]
    written = [
        plots.plot_joint_trajectories(
            tmp_path / "q.png", t, q, names, limits=(-np.ones(3), np.full(3, np.inf))
        ),
        plots.plot_torques(tmp_path / "tau.png", t, tau, ["m1", "m2"], limits=[2.0, 2.0]),
        plots.plot_power_energy(tmp_path / "power.png", t, tau, rng.normal(size=(50, 2))),
        plots.plot_design(tmp_path / "design.png", names, [1.0, 2.0, 3.0], [1.5, 1.8, 2.9]),
        plots.plot_residuals(
            tmp_path / "res.png",
            rng.normal(size=(40, 2)),
            0.1 * rng.normal(size=(40, 2)),
            ["x", "y"],
            unit="mm",
        ),
    ]
    for path in written:
        _check_png(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in written)


def test_plots_reject_bad_arrays(tmp_path):
    t = np.linspace(0.0, 1.0, 5)
    with pytest.raises(WorkbenchError, match="q has shape"):
        plots.plot_joint_trajectories(tmp_path / "a.png", t, np.zeros((5, 2)), ["a", "b", "c"])
    with pytest.raises(WorkbenchError, match="4 samples but t has 5"):
        plots.plot_torques(tmp_path / "b.png", t, np.zeros((4, 2)), ["a", "b"])
    tau = np.zeros((5, 2))
    tau[1, 0] = np.nan
    with pytest.raises(WorkbenchError, match="tau contains nan at sample 1, column 0"):
        plots.plot_power_energy(tmp_path / "c.png", t, tau, np.zeros((5, 2)))
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------ scene, HTML
def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if found := shutil.which(name):
            return found
    pytest.skip("no chromium executable found (Debian: apt-get install chromium)")


def _screenshot(html: Path) -> np.ndarray:
    png = html.with_suffix(".png")
    subprocess.run(
        [_chromium(), *CHROMIUM_FLAGS, f"--screenshot={png}", html.as_uri()],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return imread(png)[..., :3]


def test_html_is_offline_and_draws_the_robot(tmp_path, shown):
    html = viewer.write_html(tmp_path / "robot.html", shown.robot, shown.t, shown.q)
    text = html.read_text(encoding="utf-8")
    assert not re.search(r"<script[^>]*\bsrc=", text)
    assert not re.search(r"https?://", text[text.index("var viewer") :])
    # the same camera without robot and tool path
    with viewer.local_visualizer() as vis:
        points = np.vstack([shown.robot.tool_positions(shown.q), np.zeros((1, 3))])
        scene.aim_camera(vis, points)
        empty = tmp_path / "empty.html"
        empty.write_text(vis.static_html(), encoding="utf-8")
    robot, background = _screenshot(html), _screenshot(empty)
    assert robot.shape == background.shape == (600, 800, 3)
    assert background.std() > 0.01  # WebGL rendered the background and grid
    changed = (np.abs(robot - background).max(axis=2) > 0.1).mean()
    assert changed > 0.01, f"only {changed:.4%} of the pixels show the robot"


def test_live_server_serves_the_scene(shown):
    vis = viewer.serve(shown.robot, shown.t, shown.q)
    try:
        with urllib.request.urlopen(vis.url(), timeout=10) as response:
            assert response.status == 200
        main_js = Path(viewer.meshcat.__file__).parent / "viewer" / "dist" / "main.min.js"
        # the server holds the meshes: its export is much larger than the bare viewer
        assert len(vis.static_html()) > main_js.stat().st_size + 100_000
    finally:
        viewer.close(vis)
    assert vis.window.server_proc.poll() is not None


def _scene_commands(html: str) -> list:
    """The page's drawing commands, decoded, with meshcat's random uuids replaced."""
    blobs = re.findall(r"octet-binary;base64,([A-Za-z0-9+/=]+)", html)
    uuid = re.compile(rb"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
    return [uuid.sub(b"uuid", base64.b64decode(blob)) for blob in blobs]


def test_static_html_without_a_server_is_the_servers_page(shown):
    """The in-process export equals what a meshcat server exports for the same scene."""
    with viewer.local_visualizer() as vis:
        scene.show_trajectory(vis, shown.robot, shown.t, shown.q)
        served = vis.static_html()
    local = viewer.static_html(shown.robot, shown.t, shown.q)
    blob = re.compile(r"octet-binary;base64,[A-Za-z0-9+/=]+")
    assert blob.sub("", local) == blob.sub("", served)  # the page and meshcat's JavaScript
    commands = _scene_commands(served)
    assert len(commands) > 5 and _scene_commands(local) == commands


def test_unreachable_server_is_an_error(monkeypatch, shown):
    monkeypatch.setattr(viewer, "CONNECT_TIMEOUT_MS", 200)
    with pytest.raises(WorkbenchError, match=r"no meshcat server answers at tcp://127\.0\.0\.1:9"):
        viewer.serve(shown.robot, shown.t, shown.q, zmq_url="tcp://127.0.0.1:9")


def test_animation_has_a_keyframe_per_sample(shown):
    frames = shown.robot.mesh_placements(shown.q)
    assert len(frames) == len(shown.t)
    assert all(name.startswith(f"{scene.ROOT}/visuals/") for name in frames[0])
    # both motors turn, so every link and its meshes move
    assert all(not np.allclose(frames[0][n], frames[-1][n]) for n in frames[0])


# ------------------------------------------------------------ bad inputs
@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"t": np.arange(3.0)}, "missing array"),
        ({"t": np.arange(3.0), "q": np.zeros((3, 4))}, r"\(3, 4\); spherical_fivebar expects"),
        ({"t": np.arange(3.0), "q": np.full((3, 5), np.nan)}, "NaN"),
        ({"t": np.zeros(3), "q": np.zeros((3, 5))}, "not strictly increasing"),
        ({"t": np.arange(4.0), "q": np.zeros((3, 5))}, r"q has shape \(3, 5\); expected \(4, 5\)"),
    ],
)
def test_bad_trajectories_raise(tmp_path, capsys, arrays, message):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(WorkbenchError, match=message):
        playback.load_playback(path)
    assert main(["view", str(path), "--html", str(tmp_path / "x.html")]) == 2
    assert str(path) in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_bad_paths_and_models(tmp_path, fivebar_npz):
    with pytest.raises(WorkbenchError, match="trajectory file not found"):
        playback.load_playback(tmp_path)
    (tmp_path / "junk.npz").write_text("not a zip")
    with pytest.raises(WorkbenchError, match=r"not a readable \.npz"):
        playback.load_playback(tmp_path / "junk.npz")
    with pytest.raises(WorkbenchError, match="unknown model 'nope'"):
        playback.load_playback(fivebar_npz, "nope")
    with pytest.raises(WorkbenchError, match=r"expected \(6, 2\)"):
        playback.load_playback(fivebar_npz, "planar_2r")
    assert main(["view", str(tmp_path / "missing")]) == 2


def test_other_models_by_name(tmp_path):
    path = tmp_path / "traj.npz"
    np.savez(path, t=np.linspace(0.0, 1.0, 4), q=np.linspace(np.zeros(2), np.ones(2), 4))
    shown = playback.load_playback(path, "planar_2r")
    assert shown.q.shape == (4, 2)
    assert shown.robot.tool_positions(shown.q).shape == (4, 3)


@pytest.mark.skipif(
    importlib.util.find_spec("viser") is not None,
    reason="with viser installed pinocchio's viser viewer needs trimesh",
)
def test_the_meshcat_viewer_is_imported_without_trimesh_which_stays_importable():
    code = (
        "import sys\n"
        "from workbench.viz.scene import _meshcat_visualizer\n"
        "viewer = _meshcat_visualizer()\n"
        "print(viewer.__name__, 'trimesh' in sys.modules)\n"
        "import trimesh\n"
        "print(trimesh.Trimesh.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[1],
    )  # fmt: skip
    assert done.stdout.split() == ["MeshcatVisualizer", "False", "Trimesh"]
