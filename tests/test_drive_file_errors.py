"""Mistakes in a drive file are WorkbenchErrors naming the file (and the key where one is at
fault), as every reader's are; before, the term and transmission checks named neither."""

import pytest

from workbench.errors import WorkbenchError
from workbench.identification.drives import read_drive_file


@pytest.mark.parametrize(
    "n, text, message",
    [
        (
            2,
            'terms = ["frction"]\n[values]\n',
            r": terms: unknown 'frction'; choose from 'friction'",
        ),
        (
            3,
            'terms = ["coupled_motors"]\ntransmission = [[1, 0, 0], [0, 1, 0], [1, 1, 0]]\n',
            r": transmission row 3 couples joints but its own entry R\[3, 3\] is 0",
        ),
        (
            2,
            'terms = ["stribeck"]\nstribeck_speed = [0.1, -0.1]\n',
            r": Stribeck speeds \[0.1, -0.1\]: expected 2 positive values",
        ),
    ],
)
def test_drive_file_errors_name_the_file(tmp_path, n, text, message):
    path = tmp_path / "robot.drives.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(WorkbenchError, match=f"^{path}{message}"):
        read_drive_file(path, n)


def test_a_singular_transmission_is_refused_naming_it():
    """A motor-from-joint matrix that does not turn every joint (rank below n: here both motors
    follow joint 1 and none joint 2) is refused; an invertible coupled one is kept."""
    import numpy as np

    from workbench.identification.drives import Drives

    with pytest.raises(
        WorkbenchError, match=r"transmission matrix \[\[1., 0.\],\s*\[1., 0.\]\] is not invertible"
    ):
        Drives(2, ("friction", "coupled_motors"), np.array([[1.0, 0.0], [1.0, 0.0]]))
    kept = Drives(2, ("friction", "coupled_motors"), np.array([[1.0, 0.0], [1.0, 1.0]]))
    assert kept.transmission[1, 0] == 1.0
