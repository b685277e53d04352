"""``report.html`` of every experiment design (issue 28): `workbench excite` of each kind and
`workbench payload excite` write one self-contained page whose figures are summary.json's.

The figures are read back from the page's table (the page's own text, parsed
by the standard library's HTML parser) and compared with the numbers in
summary.json, which the command wrote independently; the page's PNGs are the
plot files byte for byte.
"""

from __future__ import annotations

import base64
import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import problem_copy
from workbench.cli import main

ROOT = Path(__file__).resolve().parents[1]
PRINTED = 5e-6  # relative rounding of a figure shown with 6 significant digits


class _Page(HTMLParser):
    """The summary table's rows (label -> text), the images' sources and the iframe documents."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, str] = {}
        self.images: list[str] = []
        self.frames: list[str] = []
        self.references: list[str] = []  # every src, href and data attribute of any element
        self._cell: list[str] | None = None
        self._row: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.references += [v or "" for k, v in attrs.items() if k in ("src", "href", "data")]
        if tag in ("th", "td"):
            self._cell = []
        elif tag == "img":
            self.images.append(attrs["src"])
        elif tag == "iframe":
            self.frames.append(attrs["srcdoc"])

    def handle_endtag(self, tag):
        if tag in ("th", "td"):
            self._row.append("".join(self._cell))
            self._cell = None
        elif tag == "tr":
            self.rows[self._row[0]] = self._row[1]
            self._row = []

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def read_page(folder: Path) -> _Page:
    """The parsed report.html of ``folder``, after checking that it needs no other file."""
    text = (folder / "report.html").read_text(encoding="utf-8")
    page = _Page()
    page.feed(text)
    for frame in page.frames:  # the animation's document (unescaped by the parser)
        inner = _Page()
        inner.feed(frame)
        assert not inner.frames and inner.references == [], inner.references
    assert all(reference.startswith("data:") for reference in page.references)
    assert not re.search(r"@import|url\(\s*['\"]?(?:https?:|//)", text)
    return page


def numbers(text: str) -> list[float]:
    return [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?(?:e[+-]?\d+)?|inf", text)]


def assert_shown(page: _Page, label: str, *expected: float) -> None:
    """The row ``label`` shows ``expected`` (and, before any note in parentheses, nothing else
    numeric) to 6 digits."""
    shown = numbers(page.rows[label].split(" (", 1)[0])
    np.testing.assert_allclose(shown, expected, rtol=PRINTED, atol=0)


def assert_plots_inline(page: _Page, folder: Path, names: list[str]) -> None:
    inline = [base64.b64decode(src.split(",", 1)[1]) for src in page.images]
    assert inline == [(folder / name).read_bytes() for name in names]


@pytest.mark.parametrize(
    ("kind", "file"), [("dynamic", "excite_dynamic.toml"), ("twist", "excite_twist.toml")]
)
def test_trajectory_design_report(tmp_path, kind, file):
    problem = problem_copy(tmp_path, file, max_iterations="5", collocation="40")
    out = tmp_path / "out"
    argv = ["excite", "--model", "planar_2r", "--kind", kind, "--out", str(out), str(problem)]
    assert main(argv) in (0, 1)  # 1: stopped at the iteration limit, with a warning
    summary = json.loads((out / "summary.json").read_text())
    page = read_page(out)
    c, p = summary["criterion"], summary["prediction"]
    assert_shown(page, "criterion (logdet) at 40 collocation points: log det F, initial -> "
                 "designed", c["initial_log_det"], c["log_det"])  # fmt: skip
    assert_shown(page, "condition number at the collocation points, initial -> designed",
                 c["initial_condition_number"], c["condition_number"])  # fmt: skip
    label = f"written trajectory ({p['samples']} samples): log det F, initial -> designed"
    assert_shown(page, label, p["initial_log_det"], p["log_det"])
    assert_shown(page, "written trajectory: condition number, initial -> designed",
                 p["initial_condition_number"], p["condition_number"])  # fmt: skip
    for quantity, ratios in summary["limits"]["peak_fraction_on_fine_grid"].items():
        assert_shown(page, f"peak fraction of the {quantity} limits", max(ratios))
    for row in summary["parameters"]:
        if row["predicted_relative_std_percent"] is None:  # nominal 0: the absolute std
            label, expected = "predicted std", (row["initial_std"], row["predicted_std"])
            assert row["relative_std_note"] in page.rows[f"{row['name']}: {label}, initial -> "
                                                         "designed"]  # fmt: skip
        else:
            label = "predicted relative std [%]"
            expected = (row["initial_relative_std_percent"], row["predicted_relative_std_percent"])
        assert_shown(page, f"{row['name']}: {label}, initial -> designed", *expected)
    for warning in summary["warnings"]:
        assert html.escape(warning) in (out / "report.html").read_text()
    plots = ["limits.png", "positions.png", "velocities.png", "accelerations.png", "torques.png"]
    assert_plots_inline(page, out, [*plots, "precision.png"])
    assert page.frames == [(out / "animation.html").read_text(encoding="utf-8")]


def test_posture_design_report(tmp_path):
    problem = tmp_path / "postures.toml"
    problem.write_text("[postures]\ncount = 6\ncandidates = 60\n[output]\nanimation = false\n")
    out = tmp_path / "out"
    argv = ["excite", "--model", "planar_2r", "--kind", "kinematic", "--out", str(out)]
    assert main([*argv, str(problem)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    page = read_page(out)
    c = summary["criterion"]
    assert_shown(page, "postures selected / candidates", 6, 60)
    assert_shown(page, "log det F, selected", c["log_det"])
    assert_shown(page, "log det F, random selection", c["random_selection_log_det"])
    assert_shown(page, "upper bound on log det F", c["upper_bound"])
    assert_shown(page, "D-efficiency, lower bound", c["d_efficiency_lower_bound"])
    for row in summary["parameters"]:
        label = f"{row['name']}: predicted std, initial -> designed"
        assert_shown(page, label, row["initial_std"], row["predicted_std"])
    assert_plots_inline(page, out, ["postures.png", "precision.png"])
    assert page.frames == [] and not (out / "animation.html").exists()


def test_payload_design_report(tmp_path, capsys):
    problem = problem_copy(tmp_path, "excite_dynamic.toml", max_iterations="5", collocation="40")
    out = tmp_path / "out"
    argv = ["payload", "excite", "--model", "iiwa", "--joints", "5,6,7", "--duration", "4",
            "--posture", "0,0.6,0,-1.2,0,0.8,0", "--problem", str(problem),
            "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    assert capsys.readouterr().err.splitlines() == [  # what it does, before it does it
        "workbench payload: designing the motion of joints 5, 6, 7 for a payload on iiwa_link_7 "
        "of iiwa (4 s, IPOPT, up to 5 iterations per start)..."
    ]
    summary = json.loads((out / "summary.json").read_text())
    page = read_page(out)
    log_det, std = summary["log_det"], summary["predicted_std"]
    shown = numbers(page.rows["log det F: designed / random"])
    np.testing.assert_allclose(shown, [log_det["designed"], log_det["random"]], rtol=5e-4)
    shown = numbers(page.rows["mass std: designed / random"])
    np.testing.assert_allclose(shown, [std["designed"]["mass"], std["random"]["mass"]], rtol=5e-3)
    assert_plots_inline(page, out, ["limits.png", "precision.png"])
