"""Write the MUKCa sockets as logs this project reads: a CSV and a description per tool position.

MUKCa stores ``data/<robot>/<tool position>/hole_{0,1}.csv`` without a header
(one configuration per row, radians, joints from base to flange). This script
writes ``<robot>/<tool position>.csv`` (a column ``socket``, 0 or 1, then one
column per joint) and ``<robot>/<tool position>.toml`` (the fixtures: the ball
at one point per socket, the sockets 0.05 m apart). The shipped files are the
output of ``python make_logs.py MUKCA/data`` run in this folder; other data sets
of MUKCa's repository (``panda_2``, ``dinova_2``, ...) go elsewhere with
``python make_logs.py MUKCA/data --out DIR ROBOT ...`` (the joints are those of
the robot's kind, its name's prefix: ``panda``, ``kuka``, ``dinova``).
"""

import argparse
from pathlib import Path

import numpy as np

ROBOTS = ("panda_1", "kuka_14", "dinova_1")  # the data sets shipped here
JOINTS = {  # the arm joints from base to flange, by the data set's name prefix
    "panda": [f"panda_joint{i}" for i in range(1, 8)],
    "kuka": [f"joint_a{i}" for i in range(1, 8)],
    "dinova": [f"joint_{i}" for i in range(1, 7)],
}

DESCRIPTION = """\
# {robot}, tool position '{position}': the ball on the flange rests in socket 0, then in
# socket 1 of a tool whose sockets are 50 mm apart (MUKCa data, MIT licence: see README.md)
[positions]
file = "{position}.csv"
unit = "rad"
[positions.columns]
{columns}
[[markers]]
name = "ball"
frame = "ball_link"
[[fixtures]]
name = "socket_0"
type = "point"
marker = "ball"
column = "socket"
value = 0
[[fixtures]]
name = "socket_1"
type = "point"
marker = "ball"
column = "socket"
value = 1
[[distances]]
between = ["socket_0", "socket_1"]
value = 0.05
unit = "m"
"""


def main(data: Path, out: Path, robots: list[str]) -> None:
    for robot in robots:
        joints = JOINTS[robot.split("_")[0]]
        (out / robot).mkdir(parents=True, exist_ok=True)
        for folder in sorted((data / robot).iterdir()):
            rows = [
                np.hstack([np.full((len(q), 1), s), q])
                for s in (0, 1)
                for q in [np.loadtxt(folder / f"hole_{s}.csv", delimiter=",", ndmin=2)]
            ]
            header = ",".join(["socket", *joints])
            np.savetxt(
                out / robot / f"{folder.name}.csv", np.vstack(rows), delimiter=",",
                header=header, comments="", fmt=["%d", *["%.17g"] * len(joints)],
            )  # fmt: skip
            columns = "\n".join(f'{j} = "{j}"' for j in joints)
            text = DESCRIPTION.format(robot=robot, position=folder.name, columns=columns)
            (out / robot / f"{folder.name}.toml").write_text(text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", type=Path, help="MUKCa's data/ folder")
    parser.add_argument("robots", nargs="*", default=list(ROBOTS), help="data sets to write")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent)
    arguments = parser.parse_args()
    main(arguments.data, arguments.out, arguments.robots)
