"""Show a trajectory of a robot in meshcat: live in the browser, or as one HTML file.

RESULT is a results directory (holding trajectory.npz) or a trajectory .npz
with arrays t (K,) in seconds and q (K, n). The default model is the
project's spherical five-bar (q: joints 1..5, the closed loop is drawn);
--model takes a shipped or example-robot-data model name or a URDF path, and
then q holds the model's Pinocchio configurations.

With --html FILE the animated scene is written to FILE (a file name, not a
directory), a self-contained page that opens offline, and the command
returns. Otherwise the scene goes to a meshcat server (a new one on
localhost, or the one at --zmq-url) and the command prints the viewer's URL
and runs until Ctrl-C or SIGTERM; a server it started stops with it.
"""

from __future__ import annotations

import argparse
import time

HELP = "show a trajectory in meshcat (live or as a self-contained HTML file)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("result", metavar="RESULT", help="results directory or trajectory .npz")
    parser.add_argument(
        "--html", metavar="FILE", help="write the scene to this self-contained HTML file"
    )
    parser.add_argument(
        "--model", metavar="MODEL", help="model name or URDF path (default: the five-bar)"
    )
    parser.add_argument(
        "--zmq-url", metavar="URL", help="existing meshcat server (default: start one)"
    )
    parser.add_argument("--tool", metavar="FRAME", help="frame whose path is drawn")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from workbench.io import check_not_input, check_output_file
    from workbench.viz import playback, viewer

    if args.html:
        check_output_file(args.html, "--html")
        model = args.model if args.model and Path(args.model).is_file() else None
        trajectory = Path(args.result) / playback.TRAJECTORY_FILE
        check_not_input(args.html, args.result, trajectory, model, option="--html")
    shown = playback.load_playback(args.result, args.model)
    if args.html:
        path = viewer.write_html(args.html, shown.robot, shown.t, shown.q, tool_frame=args.tool)
        print(f"wrote {path}")
        return 0
    vis = viewer.serve(shown.robot, shown.t, shown.q, zmq_url=args.zmq_url, tool_frame=args.tool)
    try:
        print(f"meshcat viewer at {vis.url()} (Ctrl-C to stop)", flush=True)
        while True:  # until Ctrl-C (exit 130) or SIGTERM (143)
            time.sleep(1.0)
    finally:
        viewer.close(vis)
