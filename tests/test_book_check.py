"""The Chromium page check (scripts/screenshots.py) fails on a page that lost its figures, naming page and cell."""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test opens its page in Chromium

ROOT = Path(__file__).resolve().parents[1]


def _load_check():
    spec = importlib.util.spec_from_file_location("book_screenshots", ROOT / "scripts" / "screenshots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _png(width=40, height=30) -> str:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (200, 30, 30)).save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode()


def _notebook(figure_outputs: list[bool]) -> dict:
    cells = [{"cell_type": "markdown", "metadata": {}, "source": "# A page"}]
    for has in figure_outputs:
        outputs = (
            [{"output_type": "display_data", "metadata": {}, "data": {"image/png": _png(), "text/plain": "<Figure>"}}]
            if has
            else []
        )
        cells.append(
            {
                "cell_type": "code",
                "metadata": {"tags": []},
                "outputs": outputs,
                "execution_count": 1,
                "source": "fig, ax = plt.subplots()\nplt.show()",
            }
        )
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _page(cells_with_img: list[bool]) -> str:
    text = "A page of the book with enough text to count as an article. " * 3
    cells = "".join(
        '<div class="cell docutils container"><div class="cell_input">code</div><div class="cell_output">'
        + (f'<img src="data:image/png;base64,{_png()}" alt="figure">' if has else "")
        + "</div></div>"
        for has in cells_with_img
    )
    return f"<!doctype html><html><body><article><h1>A page</h1><p>{text}</p>{cells}</article></body></html>"


def _book(tmp_path: Path, notebook_figures: list[bool], page_figures: list[bool]):
    html = tmp_path / "html" / "book" / "executed"
    html.mkdir(parents=True)
    (html / "fig.html").write_text(_page(page_figures))
    executed = tmp_path / "executed"
    executed.mkdir()
    (executed / "fig.ipynb").write_text(json.dumps(_notebook(notebook_figures)))
    toc = tmp_path / "_toc.yml"
    toc.write_text("format: jb-book\nroot: book/executed/fig\n")
    return tmp_path / "html", toc, executed


needs_chromium = pytest.mark.skipif(
    importlib.util.find_spec("playwright") is None
    or not any(shutil.which(n) for n in ("chromium", "chromium-browser")),
    reason="needs Chromium (apt-get install chromium) and playwright (make install)",
)


@needs_chromium
def test_a_page_showing_every_figure_passes(tmp_path):
    check = _load_check()
    html, toc, executed = _book(tmp_path, [True, True], [True, True])
    problems, counts = check.check_book(html, tmp_path / "shots", toc, executed)
    assert problems == []
    assert counts == [
        {"page": "book/executed/fig.html", "decoded": 2, "notebook_pictures": 2, "height": counts[0]["height"]}
    ]
    assert (tmp_path / "shots" / "book__executed__fig.png").is_file()


@needs_chromium
def test_a_page_that_lost_a_figure_fails_naming_page_and_cell(tmp_path):
    check = _load_check()
    html, toc, executed = _book(tmp_path, [True, True], [True, False])
    problems, _ = check.check_book(html, tmp_path / "shots", toc, executed)
    assert len(problems) == 1
    assert problems[0].startswith("book/executed/fig.html: cell 2 (fig, ax = plt.subplots()) holds 1 picture(s)")
    assert "the page shows 0 decoded" in problems[0]


@needs_chromium
def test_a_notebook_whose_figures_were_never_drawn_fails(tmp_path):
    """The MPLBACKEND=Agg failure: neither notebook nor page has the figure, so counts agree, yet it must fail."""
    check = _load_check()
    html, toc, executed = _book(tmp_path, [False], [False])
    problems, _ = check.check_book(html, tmp_path / "shots", toc, executed)
    assert problems == [
        "book/executed/fig.html: the executed notebook draws a figure but holds none in "
        "cell 1: fig, ax = plt.subplots()"
    ]


@needs_chromium
def test_a_picture_that_does_not_decode_fails(tmp_path):
    check = _load_check()
    html, toc, executed = _book(tmp_path, [True], [True])
    page = html / "book" / "executed" / "fig.html"
    page.write_text(page.read_text().replace("data:image/png;base64,", "data:image/png;base64,AAAA"))
    problems, _ = check.check_book(html, tmp_path / "shots", toc, executed)
    assert any("did not decode" in p for p in problems)
    assert any("cell 1" in p and "the page shows 0 decoded" in p for p in problems)


def _table_page(table: str) -> str:
    text = "A page of the book with enough text to count as an article. " * 3
    return (
        f"<!doctype html><html><body style='width:600px'><article><h1>A page</h1><p>{text}</p>{table}"
        "</article></body></html>"
    )


@needs_chromium
@pytest.mark.parametrize(
    "table, problem",
    [
        # a header in a column too narrow for its word, broken anywhere: letter by letter
        (
            '<table><thead><tr><th style="width:20px;overflow-wrap:anywhere">partition</th><th>b</th></tr></thead>'
            "<tbody><tr><td>x</td><td>y</td></tr></tbody></table>",
            'a word is broken across lines in the cell "partition',
        ),
        # pandas' default index: 0, 1, 2 in the first column, no header for it
        (
            "<table><thead><tr><th></th><th>a</th></tr></thead><tbody><tr><th>0</th><td>1</td></tr><tr><th>1</th>"
            "<td>2</td></tr><tr><th>2</th><td>3</td></tr></tbody></table>",
            "shows a bare pandas index",
        ),
        # wider than the text column (here inside a scroll box, which hides it from the box's width)
        (
            '<div style="overflow-x:auto;max-width:100%"><table style="display:block;overflow-x:auto;max-width:100%">'
            '<tr><td style="min-width:2000px">wide</td></tr></table></div>',
            "px wide, the text column",
        ),
    ],
)
def test_an_unreadable_table_fails_naming_page_and_table(tmp_path, table, problem):
    check = _load_check()
    html, toc, executed = _book(tmp_path, [], [])
    (html / "book" / "executed" / "fig.html").write_text(_table_page(table))
    problems, _ = check.check_book(html, tmp_path / "shots", toc, executed)
    assert len(problems) == 1 and problems[0].startswith("book/executed/fig.html: table 1 (")
    assert problem in problems[0]


@needs_chromium
def test_a_table_that_wraps_between_words_passes(tmp_path):
    """What repro.notebook.frame_html writes: the index hidden, names that break at their underscores."""
    import pandas as pd

    from repro.notebook import frame_html

    check = _load_check()
    html, toc, executed = _book(tmp_path, [], [])
    frame = pd.DataFrame({"rounds_above_threshold": [0.5, 0.25], "mean": [1.0, 2.0]})
    css = "<style>th { width: 90px; overflow-wrap: normal; word-break: normal }</style>"
    (html / "book" / "executed" / "fig.html").write_text(_table_page(css + frame_html(frame)))
    problems, _ = check.check_book(html, tmp_path / "shots", toc, executed)
    assert problems == []
