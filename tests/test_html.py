"""The HTML page: one self-contained file with the report's tables and pictures; rendered in a
real headless browser (Debian's Chromium, skipped where it is absent), it loads without an
error, every picture decodes, and a screenshot is taken (kept beside the page)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote

import pytest

from matrix.report import gallery
from matrix.report.files import write_report
from matrix.report.html import svg_data_url
from tests.test_pictures import CELLS, INFO, failing_cell, passing_cell

BROWSER = shutil.which("chromium") or shutil.which("chromium-browser")
needs_browser = pytest.mark.skipif(
    BROWSER is None, reason="no Chromium (Debian: apt-get install chromium)"
)
# Headless, offline and quiet: no sandbox (root in a container), no GPU, nothing fetched.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
# Appended to a copy of the page (the page itself has no script): once everything loaded,
# what decoded and what did not.
CHECK = """<script>
window.addEventListener("load", () => {
  const images = [...document.images];
  const broken = images.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.alt);
  const tables = document.querySelectorAll("table").length;
  document.body.setAttribute("data-check", JSON.stringify({images: images.length, broken, tables}));
});
</script>"""
MODEL_CELLS = [
    *CELLS,
    failing_cell("m[run=x]", model="m", column=None),
    passing_cell("m[run=y]"),
]


def page(tmp_path: Path) -> Path:
    path = tmp_path / "vllm-0.33.0.html"
    write_report(path, MODEL_CELLS, INFO)
    return path


def test_the_page_holds_everything_itself(tmp_path: Path) -> None:
    text = page(tmp_path).read_text()
    assert text.startswith("<!DOCTYPE html>")
    for title in ("Summary (the upstream PR", "Findings", "Worst severity per variant", "Models"):
        assert title in text
    assert '<details id="cases-x-variants"><summary>Cases x variants<a class="anchor"' in text
    assert "<script" not in text and "<link" not in text
    assert not re.search(r"src=[\"'](?!data:)", text)  # every picture embedded
    if gallery.available():
        assert text.count("data:image/svg+xml,") == len(gallery.planned(MODEL_CELLS))
    # The case table's cells coloured as the heat map colours them.
    assert '<td class="s-unpromotable">stall: unpromotable</td>' in text
    assert f"td.s-unpromotable {{ background: {gallery.SHADES['unpromotable']};" in text


def test_a_picture_is_embedded_as_it_is_drawn() -> None:
    """The data URL, read back as a browser reads the attribute, is the SVG itself."""
    svg = "<svg>&amp; 'a' \"b\" 100% #c\n</svg>"
    attribute = f"<img src='{svg_data_url(svg)}'>"
    value = html.unescape(re.search(r"src='([^']*)'", attribute).group(1))  # type: ignore[union-attr]
    assert unquote(value.removeprefix("data:image/svg+xml,")) == svg


def browse(*arguments: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    profile = Path(arguments[0]).with_suffix(".profile")  # a new, empty one per run
    command = [BROWSER or "chromium", *FLAGS, f"--user-data-dir={profile}", *arguments[1:]]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


@needs_browser
def test_the_page_loads_in_a_browser(tmp_path: Path) -> None:
    path = page(tmp_path)
    checked = tmp_path / "checked.html"
    checked.write_text(path.read_text().replace("</body>", CHECK + "</body>"))
    run = browse(
        str(checked),
        "--virtual-time-budget=10000",
        "--enable-logging=stderr",
        "--v=0",
        "--dump-dom",
        checked.as_uri(),
    )
    found = re.search(r'data-check="([^"]*)"', run.stdout)
    assert found, f"the page did not finish loading: {run.stderr[-2000:]}"
    check = json.loads(html.unescape(found.group(1)))
    assert check["broken"] == []
    assert check["tables"] >= 6
    if gallery.available():
        assert check["images"] == len(gallery.planned(MODEL_CELLS)) > 0
    errors = [line for line in run.stderr.splitlines() if ":CONSOLE" in line]
    assert errors == []
    screenshot = tmp_path / "vllm-0.33.0.png"
    browse(
        str(screenshot),
        "--window-size=1280,2200",
        f"--screenshot={screenshot}",
        path.as_uri(),
    )
    assert screenshot.read_bytes().startswith(b"\x89PNG")
    assert screenshot.stat().st_size > 20_000  # a page, not a blank


def test_the_contents_link_every_part_and_each_case_row_has_an_anchor(tmp_path: Path) -> None:
    """A table of contents before the parts, a link to each part's id (unique; a count in
    the title left out, so a link stays good run after run), each heading linking to itself,
    and each row of the case table an id its own link names."""
    text = page(tmp_path).read_text()
    nav = re.search(r'<nav id="contents">(.*?)</nav>', text)
    assert nav and text.index("<nav") < text.index("<h2")
    linked = re.findall(r'href="#([^"]+)"', nav.group(1))
    ids = re.findall(r'<(?:h2|details) id="([^"]+)"', text)
    assert linked == ids and len(set(ids)) == len(ids) > 5
    assert "cases-x-variants" in ids and "failing-cells" in ids
    for anchor in ids:  # each heading links to itself
        assert f'id="{anchor}">' in text and f'href="#{anchor}">#</a>' in text
    rows = re.findall(r'<tr id="([^"]+)"><td><a class="anchor" href="#([^"]+)">#</a>', text)
    cases = {cell.case for cell in MODEL_CELLS}
    assert {html.unescape(row) for row, _ in rows} == {f"case-{case}" for case in cases}
    for row, link in rows:  # a browser decodes the link's fragment to the row's id
        assert unquote(html.unescape(link)) == html.unescape(row)
