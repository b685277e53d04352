"""The five-bar design file (models/fivebar/design.toml) is read through config.Section:
every value typed, every mistake a WorkbenchError naming the file and the key."""

import math
import tomllib

import pytest

from workbench.errors import WorkbenchError
from workbench.models.fivebar_design import FiveBarDesign
from workbench.resources import shipped

SHIPPED = shipped("models") / "fivebar" / "design.toml"


def test_shipped_design_file_reads_every_value_as_written():
    design = FiveBarDesign.from_toml(SHIPPED)
    raw = tomllib.loads(SHIPPED.read_text(encoding="utf-8"))
    seen = set()
    for table in raw.values():
        for key, value in table.items():
            name = key.removesuffix("_deg")
            expected = math.radians(value) if key.endswith("_deg") else value
            assert getattr(design, name) == pytest.approx(expected, rel=1e-15), key
            seen.add(name)
    assert seen == set(FiveBarDesign.__dataclass_fields__)  # the shipped file sets them all
    assert isinstance(design.arc_segments, int)


@pytest.mark.parametrize(
    "text, key",
    [
        ('[material]\ndensity = "2700"\n', "density"),  # was accepted as a string
        ("[material]\ndensity = true\n", "density"),  # was accepted as a boolean
        ('[geometry]\nbase_angle_deg = "90"\n', "base_angle_deg"),  # was a TypeError
        ("[geometry]\narc_segments = 4.5\n", "arc_segments"),  # was a TypeError
        ("[geometry]\narc_segments = 0\n", "arc_segments"),
        ("[geometry]\nbase_angel_deg = 90.0\n", "base_angel_deg"),
        ("density = 2700.0\n", "density"),  # a value outside any table
    ],
)
def test_bad_design_values_name_file_and_key(tmp_path, text, key):
    path = tmp_path / "design.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(WorkbenchError, match=rf"{path}: .*{key}"):
        FiveBarDesign.from_toml(path)


def test_whole_number_float_is_an_integer(tmp_path):
    path = tmp_path / "design.toml"
    path.write_text("[geometry]\narc_segments = 24.0\n", encoding="utf-8")
    design = FiveBarDesign.from_toml(path)
    assert design.arc_segments == 24 and isinstance(design.arc_segments, int)
