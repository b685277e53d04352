"""Section.strings(choices=...) and the readers that use it: an unknown name in a list of
names (drive terms of an excitation problem) is refused on reading, naming file and key;
before, `workbench excite` failed after it had started designing, naming neither."""

import pytest

from workbench import models
from workbench.config import Section
from workbench.errors import WorkbenchError
from workbench.excitation.problem import read_problem


def test_strings_with_choices_accepts_choices_and_names_the_others():
    section = Section({"terms": ["a", "c"]}, "f.toml", "model")
    assert section.strings("terms", choices=("a", "b", "c")) == ["a", "c"]
    with pytest.raises(WorkbenchError, match=r"^f.toml: \[model\] terms: unknown 'x', 'y'; "):
        Section({"terms": ["a", "x", "y"]}, "f.toml", "model").strings("terms", choices="abc")
    assert Section({}, "f.toml").strings("terms", ["a"], choices=("b",)) == ["a"]  # defaults


def test_excitation_problem_refuses_an_unknown_term(tmp_path):
    path = tmp_path / "excite.toml"
    path.write_text('[model]\nterms = ["friction", "frction"]\n', encoding="utf-8")
    with pytest.raises(WorkbenchError, match=rf"^{path}: \[model\] terms: unknown 'frction'"):
        read_problem(path, models.load("planar_2r"))
    path.write_text('[model]\nterms = ["friction", "offset"]\n', encoding="utf-8")
    assert read_problem(path, models.load("planar_2r")).model.terms == ("friction", "offset")
