"""One self-contained HTML page per run: a summary table, the plots and an animation.

:func:`report_page` builds the page and :func:`write_report_page` writes it
atomically; the page needs no other file and no network: PNG plots are
inlined as base64 ``data:`` URLs and a meshcat animation (the text of
:func:`workbench.viz.viewer.static_html`, itself self-contained) sits in an
``<iframe srcdoc>``, so that its scripts run in their own document. Every
text is HTML-escaped. Example::

    write_report_page(
        stage / "report.html",
        "dynamic calibration of staubli_tx40",
        rows=[("held-out relative RMS", "0.114 -> 0.0829"), ("samples", 12000)],
        images=[stage / "residuals.png", stage / "heldout_torques.png"],
        warnings=["..."],
        animation=None,  # or the HTML of a meshcat scene
    )
"""

from __future__ import annotations

import base64
import html
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from workbench.errors import WorkbenchError
from workbench.io import atomic_write_text

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1040px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.1em; margin-top: 2em; }
table { border-collapse: collapse; } td, th { padding: 0.25em 0.8em; text-align: left; }
tr:nth-child(even) { background: #f3f3f3; } th { font-weight: 600; }
.warning { background: #fff4d6; border-left: 4px solid #e0a000; padding: 0.4em 0.8em; }
figure { margin: 1em 0; } img { max-width: 100%; border: 1px solid #ddd; }
iframe { width: 100%; height: 600px; border: 1px solid #ddd; }
"""


def report_page(
    title: str,
    rows: Iterable[tuple[str, Any]],
    images: Sequence[str | os.PathLike] = (),
    *,
    warnings: Sequence[str] = (),
    animation: str | None = None,
) -> str:
    """The page: ``title``, ``warnings`` (highlighted), the ``rows`` (label, value) as a
    table, each PNG of ``images`` inline with its file name as caption, and
    ``animation`` (a self-contained HTML document) embedded at the end."""
    parts = [f"<h1>{_text(title)}</h1>"]
    parts += [f'<p class="warning">{_text(w)}</p>' for w in warnings]
    table = "".join(f"<tr><th>{_text(k)}</th><td>{_text(v)}</td></tr>" for k, v in rows)
    parts.append(f"<h2>Summary</h2><table>{table}</table>")
    if images:
        parts.append("<h2>Plots</h2>")
        parts += [_figure(Path(image)) for image in images]
    if animation is not None:
        parts.append("<h2>Animation</h2>")
        parts.append(f'<iframe title="animation" srcdoc="{html.escape(animation)}"></iframe>')
    body = "\n".join(parts)
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_text(title)}</title><style>{_STYLE}</style></head>\n"
        f"<body>\n{body}\n</body></html>\n"
    )


def write_report_page(
    path: str | os.PathLike,
    title: str,
    rows: Iterable[tuple[str, Any]],
    images: Sequence[str | os.PathLike] = (),
    *,
    warnings: Sequence[str] = (),
    animation: str | None = None,
) -> Path:
    """Write :func:`report_page` to ``path`` atomically; return the path."""
    page = report_page(title, rows, images, warnings=warnings, animation=animation)
    return atomic_write_text(path, page)


def _figure(image: Path) -> str:
    """An inline PNG with its file name as caption."""
    try:
        data = image.read_bytes()
    except OSError as exc:
        raise WorkbenchError(f"cannot read plot {image}: {exc.strerror or exc}") from None
    if not data.startswith(b"\x89PNG"):
        raise WorkbenchError(f"{image} is not a PNG image")
    url = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
    name = _text(image.name)
    return f'<figure><img src="{url}" alt="{name}"><figcaption>{name}</figcaption></figure>'


def _text(value: Any) -> str:
    """``value`` as escaped HTML text (floats with 6 significant digits)."""
    if isinstance(value, float):
        value = f"{value:.6g}"
    return html.escape(str(value))
