"""Write the MUKCa sockets as logs this project reads: a CSV and a description per tool position.

MUKCa stores ``data/<robot>/<tool position>/hole_{0,1}.csv`` without a header
(one configuration per row, radians, joints from base to flange). This script
writes ``<robot>/<tool position>.csv`` (a column ``socket``, 0 or 1, then one
column per joint) and ``<robot>/<tool position>.toml`` (the fixtures: the ball
at one point per socket, the sockets 0.05 m apart). Run it from this folder
with the folder of MUKCa's ``data/`` as argument; the shipped files are its output.
"""

import sys
from pathlib import Path

import numpy as np

ROBOTS = {
    "panda_1": ("panda.urdf", [f"panda_joint{i}" for i in range(1, 8)]),
    "kuka_14": ("iiwa14.urdf", [f"joint_a{i}" for i in range(1, 8)]),
    "dinova_1": ("gen3lite.urdf", [f"joint_{i}" for i in range(1, 7)]),
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


def main(data: Path) -> None:
    here = Path(__file__).resolve().parent
    for robot, (_, joints) in ROBOTS.items():
        (here / robot).mkdir(exist_ok=True)
        for folder in sorted((data / robot).iterdir()):
            rows = [
                np.hstack([np.full((len(q), 1), s), q])
                for s in (0, 1)
                for q in [np.loadtxt(folder / f"hole_{s}.csv", delimiter=",", ndmin=2)]
            ]
            header = ",".join(["socket", *joints])
            np.savetxt(
                here / robot / f"{folder.name}.csv", np.vstack(rows), delimiter=",",
                header=header, comments="", fmt=["%d", *["%.17g"] * len(joints)],
            )  # fmt: skip
            columns = "\n".join(f'{j} = "{j}"' for j in joints)
            text = DESCRIPTION.format(robot=robot, position=folder.name, columns=columns)
            (here / robot / f"{folder.name}.toml").write_text(text)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
