"""Show a robot model: joints, joint twists (omega, v) in the base frame at q = 0,
link masses, limits and the tool frame.

MODEL is a shipped model name (iiwa, planar_2r, staubli_tx40, ur10e), an
example-robot-data name (ur5, ur10_cb3, panda_arm, talos_upper_body, ...), a path to a
URDF file, or a closed chain (fivebar, planar_fivebar, fourbar, delta, or a
closure file, or a folder DIR of example-parallel-robots or its DIR/robot.yaml): then
its spanning tree, its motors (in the order of the closure file's actuated joints or
the yaml's name_mot), the mobility (tree velocities minus the closures' rank at the
closed configuration), idle joints and its closures; a results folder
of workbench calibrate: its calibrated.urdf (calibrated.toml for a closed chain). A named model's
first line says what it is. Without MODEL: every model name and what it is.

A ROS bag instead (a ROS 1 .bag file, a ROS 2 bag folder, or a bare .db3 or
.mcap file): one line per topic with its message type, message count and
rate (1 / median period of the receive times, Hz).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from workbench.errors import WorkbenchError

HELP = "show a robot model (joints, twists, masses, tool frame) or a ROS bag's topics"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "model", nargs="?", metavar="MODEL",
        help="model name or URDF path, or a ROS bag (none: list the model names)",
    )  # fmt: skip
    parser.add_argument("--tool", metavar="FRAME", help="tool frame (default: the last frame)")


def run(args: argparse.Namespace) -> int:
    from workbench import closed_chains, models
    from workbench.closed_chains.kinematics import mobility
    from workbench.recordings import bags

    if args.model is None:
        return _names()
    if bags.is_bag(args.model):
        return _bag(args.model, bags.topics(args.model))
    source = Path(args.model)
    folder = closed_chains.is_robot_folder(source)
    closed_chains.warn_open_tree(source)
    if source.is_dir() and not folder:  # a results folder, read as workbench export reads it
        closure, urdf = source / "calibrated.toml", source / "calibrated.urdf"
        if not urdf.is_file():
            raise WorkbenchError(
                f"{source} is a directory, not a regular file (nor a results folder of "
                "workbench calibrate: no calibrated.urdf in it)"
            )
        args.model = str(closure if closure.is_file() else urdf)
    if args.model in models.MODELS:
        print(f"{args.model}: {models.MODELS[args.model].description}")

    closed = None
    if closed_chains.is_closed_chain(args.model):
        closed = closed_chains.load(args.model, tool=args.tool if folder else None)
        chain = closed.tree
    else:
        chain = models.load(args.model, tool_frame=args.tool)
    np.set_printoptions(precision=4, suppress=True)
    label = chain.name
    if args.model in models.MODELS and chain.name != args.model:
        label = f"{args.model} (URDF robot '{chain.name}')"
    print(
        f"{label}: {chain.n} joints, base '{chain.base_name}', "
        f"total mass {chain.phi[:, 0].sum():.4f} kg, gravity {chain.gravity}"
    )
    header = (
        f"{'#':>3} {'joint':<22} {'kind':<9} {'parent joint':<18} "
        f"{'omega':<26} {'v':<26} {'mass':>8}"
    )
    print(header)
    print("-" * len(header))
    for i in range(chain.n):
        parent = chain.base_name if chain.parents[i] < 0 else chain.joint_names[chain.parents[i]]
        w, v = chain.twists[i, :3], chain.twists[i, 3:]
        print(
            f"{i:>3} {chain.joint_names[i]:<22} {chain.joint_kinds[i]:<9} {parent:<18} "
            f"{_vec(w):<26} {_vec(v):<26} {chain.phi[i, 0]:>8.4f}"
        )
    print()
    print(f"{'joint':<22} {'lower':>9} {'upper':>9} {'velocity':>9} {'effort':>9}")
    for i in range(chain.n):
        print(
            f"{chain.joint_names[i]:<22} {chain.lower[i]:>9.4f} {chain.upper[i]:>9.4f} "
            f"{chain.velocity_limit[i]:>9.4f} {chain.effort_limit[i]:>9.4f}"
        )
    print()
    parent = "base" if chain.tool_parent < 0 else chain.link_names[chain.tool_parent]
    print(f"tool frame '{chain.tool_name}' on link '{parent}', at q = 0:")
    print(f"  position {_vec(chain.tool_frame[:3, 3])}")
    print("  rotation " + "\n           ".join(_vec(r) for r in chain.tool_frame[:3, :3]))
    if closed is not None:
        print()
        print(f"closed chain ({closed.source}): motors {', '.join(closed.actuated)}, task "
              f"'{closed.task}'")  # fmt: skip
        idle = ", ".join(closed.idle) or "none"
        print(f"  mobility {mobility(closed)} with {len(closed.actuated)} actuated joints; "
              f"idle joints (free idle motions, zero force): {idle}")  # fmt: skip
        for closure in closed.closures:
            a, b = closure.frames
            print(f"  closure '{closure.name}': {closure.kind} ({closure.rows} rows) {a} -> {b}")
        print(f"  home {_vec(closed.home)}")
    return 0


def _names() -> int:
    """One line per model name: what it is; then the closed chains."""
    from workbench import closed_chains, models

    width = max(map(len, [*models.MODELS, *closed_chains.SHIPPED]))
    for name, spec in models.MODELS.items():
        print(f"{name:<{width}}  {spec.description}")
    for name, path in closed_chains.SHIPPED.items():
        print(f"{name:<{width}}  closed chain (models/{path})")
    return 0


def _bag(path: str, topics: list) -> int:
    """One line per topic of a bag (``bags.topics``): name, type, count, rate; the joints of
    its JointState topics and those that move."""
    from workbench.recordings import bags
    from workbench.recordings.recording import still_joints

    count = sum(topic.count for topic in topics)
    recorded = [topic for topic in topics if topic.count]
    if recorded:
        span = max(t.end for t in recorded) - min(t.start for t in recorded)
        print(f"{path}: {len(topics)} topics, {count} messages over {span:.3f} s")
    else:
        print(f"{path}: {len(topics)} topics, no messages")
    name = max([5, *(len(topic.name) for topic in topics)])
    kind = max([4, *(len(topic.msgtype) for topic in topics)])
    print(f"{'topic':<{name}}  {'type':<{kind}}  {'count':>8}  {'rate (Hz)':>10}")
    for topic in topics:
        rate = f"{topic.rate_hz:>10.3f}"
        print(f"{topic.name:<{name}}  {topic.msgtype:<{kind}}  {topic.count:>8}  {rate}")
    for topic in topics:  # the names a log description's [model] joints and columns take
        if topic.msgtype == bags.JOINT_STATE and topic.count:
            states = bags.read_joint_states(path, topic.name)
            moving = [n for n in states.names if n not in still_joints(states)]
            print(f"{topic.name} joints: {', '.join(states.names)}")
            print(f"{topic.name} joints that move: {', '.join(moving) or 'none'}")
    return 0


def _vec(x: np.ndarray) -> str:
    return "(" + ", ".join(f"{v: .4f}" for v in x) + ")"
