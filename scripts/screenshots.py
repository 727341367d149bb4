"""Check the built book as a reader without network sees it, and save a full-length screenshot of every page.

Builds nothing; run it after ``jb build``. For every HTML page under ``_build/html`` it

1. fails when a page of ``_toc.yml`` has no HTML file;
2. fails when a page loads a script, style sheet, font, image or frame from an http(s) URL (offline, that
   resource is missing), and when a style sheet in ``_static`` imports one;
3. opens the page in headless Chromium (driven by Playwright) with every request off the local disk refused, after
   the page's JavaScript ran, and fails when the article has (almost) no text, when an ipywidgets view did not
   render, or when an equation was not typeset by MathJax;
4. counts the pictures that actually decoded (``<img>`` with ``naturalWidth > 0``) in every code cell of the page
   and compares them with the pictures the executed notebook (``book/executed/<page>.ipynb``) holds in that cell;
   fails, naming the page and the cell, when a cell shows fewer, when a picture on the page did not decode, and
   when the notebook itself has a cell that draws a figure but holds none (a figure lost at execution);
5. saves a full-length ``screenshots/<page>.png`` and fails when it is (almost) a single colour.

Usage: ``python scripts/screenshots.py [--html-dir _build/html] [--out screenshots]``. Needs Chromium
(``apt-get install -y chromium``) and the ``playwright`` Python package (its own browsers are not needed).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from html.parser import HTMLParser
from pathlib import Path

import yaml
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # fedlib from this checkout, also when the script runs from elsewhere
from repro.notebook import cell_images, missing_figures, shown_code_cells  # noqa: E402

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--mute-audio",
    "--no-first-run",
    "--disable-extensions",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # no host name resolves: the reader has no network
]
WIDTH = 1280  # window width; screenshots are full-length (the whole page, however tall)
SETTLE_MS = 20000  # time the page's JavaScript gets to typeset equations and render widgets
MIN_ARTICLE_CHARS = 40  # an article with less text than a title and a sentence counts as blank
MIN_INK_FRACTION = 0.005  # share of pixels that differ from the background colour
# Attributes through which a page fetches a resource at view time (links to other sites are fine).
RESOURCE_ATTRIBUTES = {
    "script": "src",
    "img": "src",
    "iframe": "src",
    "source": "src",
    "video": "src",
    "audio": "src",
    "embed": "src",
}
FETCHING_LINK_RELS = {"stylesheet", "preload", "modulepreload", "icon", "shortcut"}
REMOTE = re.compile(r"^\s*(https?:)?//", re.IGNORECASE)
CSS_REMOTE = re.compile(r"""(@import\s+(url\()?\s*['"]?|url\(\s*['"]?)(https?:)?//""", re.IGNORECASE)


class PageScan(HTMLParser):
    """Collect remote resources, widget views and the text of the article from one HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.remote: list[str] = []
        self.widget_views = 0
        self.math = 0
        self.rendered_widgets = 0
        self.typeset_math = 0
        self.article_text: list[str] = []
        self._article_depth = 0
        self._skip_depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        classes = set(a.get("class", "").split())
        url = a.get(RESOURCE_ATTRIBUTES.get(tag, ""), "")
        if tag == "link" and FETCHING_LINK_RELS & set(a.get("rel", "").lower().split()):
            url = a.get("href", "")
        if url and REMOTE.match(url):
            self.remote.append(f"<{tag}> {url}")
        if tag == "script" and a.get("type") == "application/vnd.jupyter.widget-view+json":
            self.widget_views += 1
        if "math" in classes and tag in ("span", "div"):
            self.math += 1
        if "widget-subarea" in classes:
            self.rendered_widgets += 1
        if tag == "mjx-container":
            self.typeset_math += 1
        if tag == "article" or (self._article_depth and tag not in ("br", "img", "hr", "input", "meta", "link")):
            self._article_depth += 1
        if self._article_depth and tag in ("script", "style"):
            self._skip_depth += 1

    def handle_endtag(self, tag: str) -> None:
        if self._article_depth and tag in ("script", "style") and self._skip_depth:
            self._skip_depth -= 1
        if self._article_depth and tag not in ("br", "img", "hr", "input", "meta", "link"):
            self._article_depth -= 1

    def handle_data(self, data: str) -> None:
        if self._article_depth and not self._skip_depth:
            self.article_text.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.article_text).split())


def scan(html: str) -> PageScan:
    page = PageScan()
    page.feed(html)
    return page


def toc_pages(toc_path: Path) -> list[str]:
    """Every file of a jb-book _toc.yml (root, chapters, sections), without its suffix."""
    toc = yaml.safe_load(toc_path.read_text())
    files = [toc["root"]]

    def walk(entries: list[dict]) -> None:
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections", []))

    for part in toc.get("parts", []):
        walk(part.get("chapters", []))
    walk(toc.get("chapters", []))
    return [str(Path(f).with_suffix("")) if Path(f).suffix in (".md", ".ipynb") else f for f in files]


def find_chromium() -> str:
    for name in CHROMIUM_NAMES:
        if path := shutil.which(name):
            return path
    raise SystemExit(
        f"No Chromium found (looked for {', '.join(CHROMIUM_NAMES)}); install it, e.g. apt-get install -y chromium."
    )


# Run in the page: per rendered code cell, its <img> elements and how many decoded; and the page's counts.
MEASURE = """() => {
  const article = document.querySelector("article") || document.body;
  const decoded = (img) => img.complete && img.naturalWidth > 0;
  const cells = Array.from(article.querySelectorAll("div.cell")).map((cell) => {
    const imgs = Array.from(cell.querySelectorAll(".cell_output img"));
    return {images: imgs.length, decoded: imgs.filter(decoded).length};
  });
  const all = Array.from(article.querySelectorAll("img"));
  return {
    text: (article.innerText || "").replace(/\\s+/g, " ").trim().length,
    widgets: document.querySelectorAll(".widget-subarea").length,
    math: document.querySelectorAll("mjx-container").length,
    rawTex: ((article.innerText || "").match(/\\\\[\\(\\[]/g) || []).length,
    images: all.length, decoded: all.filter(decoded).length,
    broken: all.filter((img) => !decoded(img)).map((img) => (img.getAttribute("src") || "").slice(0, 80)),
    cells: cells,
    tables: tableProblems(article),
  };
}"""

#: Tables a reader cannot read: wider than the text column, a word broken across lines inside a cell
#: (a header set letter by letter; breaks after "-", "/", "_" are breaks between words), or a bare pandas index (a first
#: column 0, 1, 2, ... with no header).
TABLES = """function tableProblems(article) {
  const column = (article.querySelector("main") || article).getBoundingClientRect().width;
  const out = [];
  const lines = (cell) => {  // the line boxes of the cell's text (not of its elements' boxes)
    const tops = new Set();
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      const range = document.createRange();
      range.selectNodeContents(node);
      Array.from(range.getClientRects()).filter((r) => r.width > 0).forEach((r) => tops.add(Math.round(r.top)));
    }
    return tops.size;
  };
  Array.from(article.querySelectorAll("table")).forEach((table, t) => {
    const where = `table ${t + 1} (` + (table.innerText || "").replace(/\\s+/g, " ").trim().slice(0, 50) + ")";
    const width = Math.max(table.getBoundingClientRect().width, table.scrollWidth);  // a scroll bar hides width
    if (width > column + 2) out.push(`${where} is ${Math.round(width)} px wide, the text column ${Math.round(column)}`);
    for (const cell of table.querySelectorAll("th, td")) {
      const words = (cell.innerText || "").trim().split(/[\\s\\-\\/–_]+/).filter((w) => w.length > 0);
      if (words.length && lines(cell) > words.length) {
        out.push(`${where}: a word is broken across lines in the cell "${cell.innerText.trim().slice(0, 40)}"`);
        break;
      }
    }
    const rows = Array.from(table.querySelectorAll("tbody tr"));
    const index = rows.map((r) => (r.firstElementChild && r.firstElementChild.tagName === "TH")
      ? r.firstElementChild.innerText.trim() : null);
    const named = Array.from(table.querySelectorAll("thead tr")).some(
      (r) => r.firstElementChild && r.firstElementChild.innerText.trim() !== "");
    if (!named && rows.length > 1 && index.every((v, i) => v === String(i))) {
      out.push(`${where} shows a bare pandas index`);
    }
  });
  return out;
}"""

SETTLED = """(expect) => {
  const mj = window.MathJax;
  const mathDone = !expect.math || document.querySelectorAll("mjx-container").length > 0;
  const widgetsDone = document.querySelectorAll(".widget-subarea").length >= expect.widgets;
  const imgsDone = Array.from(document.images).every((img) => img.complete);
  return mathDone && widgetsDone && imgsDone && (!mj || !mj.startup || mj.startup.document !== undefined);
}"""


def notebook_of(html_dir: Path, page: Path, executed_dir: Path) -> Path | None:
    """The executed notebook a built page came from (``book/executed/<name>.html`` ->
    ``<executed_dir>/<name>.ipynb``)."""
    relative = page.relative_to(html_dir)
    if relative.parts[:2] != ("book", "executed"):
        return None
    candidate = executed_dir / relative.with_suffix(".ipynb").name
    return candidate if candidate.is_file() else None


def figure_problems(name: str, nb: dict, cells: list[dict]) -> list[str]:
    """Compare the pictures each rendered code cell shows with those its notebook cell holds."""
    problems = [
        f"{name}: the executed notebook draws a figure but holds none in {where}" for where in missing_figures(nb)
    ]
    shown = shown_code_cells(nb)
    if len(cells) != len(shown):
        return problems + [
            f"{name}: {len(cells)} code cells on the page, {len(shown)} in the notebook; cannot match figures to cells"
        ]
    for (index, cell), seen in zip(shown, cells):
        expected = cell_images(cell)
        if seen["decoded"] < expected:
            first = "".join(cell["source"]).strip().splitlines()[:1]
            problems.append(
                f"{name}: cell {index} ({first[0][:60] if first else ''!s}) holds {expected} "
                f"picture(s) in the notebook, the page shows {seen['decoded']} decoded"
            )
    return problems


def check_page(browser, html_dir: Path, page: Path, out_dir: Path, executed_dir: Path) -> tuple[list[str], dict]:
    """Return (problems, counts) of one page; problems is empty when it is fine."""
    name = page.relative_to(html_dir).as_posix()
    source = page.read_text(encoding="utf-8")
    static = scan(source)
    problems = [f"{name}: loads {url} from the network" for url in static.remote]
    if 'http-equiv="refresh"' in source.lower():
        return problems, {}  # index.html only redirects to the root page, which is checked on its own

    context = browser.new_context(viewport={"width": WIDTH, "height": 900})
    context.route(re.compile(r"^(?!file:|data:|blob:|about:).*"), lambda route: route.abort())
    tab = context.new_page()
    try:
        tab.goto(page.as_uri(), wait_until="load", timeout=60000)
        try:
            tab.wait_for_function(SETTLED, arg={"math": static.math, "widgets": static.widget_views}, timeout=SETTLE_MS)
        except Exception:  # noqa: BLE001 - what did not settle is reported by the counts below
            pass
        seen = tab.evaluate(f"(() => {{ {TABLES}; return ({MEASURE})(); }})")
        png = out_dir / (page.relative_to(html_dir).with_suffix(".png").as_posix().replace("/", "__"))
        tab.screenshot(path=str(png), full_page=True)
    finally:
        context.close()

    if page.name not in ("genindex.html", "search.html") and seen["text"] < MIN_ARTICLE_CHARS:
        problems.append(f"{name}: the article is blank ({seen['text']} characters of text)")
    if seen["widgets"] < static.widget_views:
        problems.append(
            f"{name}: {static.widget_views} ipywidgets views, {seen['widgets']} rendered "
            "(is _static/ipywidgets/embed.js there? run scripts/fetch_web_assets.py)"
        )
    if static.math and (not seen["math"] or seen["rawTex"]):
        problems.append(
            f"{name}: {static.math} equations, {seen['math']} typeset by MathJax, {seen['rawTex']} "
            "left as TeX (is _static/mathjax/ there? run scripts/fetch_web_assets.py)"
        )
    problems += [f"{name}: a picture did not decode: {src}" for src in seen["broken"]]
    problems += [f"{name}: {problem}" for problem in seen["tables"]]
    expected = None
    if (nb_path := notebook_of(html_dir, page, executed_dir)) is not None:
        nb = json.loads(nb_path.read_text(encoding="utf-8"))
        expected = sum(cell_images(c) for _, c in shown_code_cells(nb))
        problems += figure_problems(name, nb, seen["cells"])

    with Image.open(png) as image:
        height = image.height
        pixels = image.convert("L").resize((WIDTH // 4, max(1, image.height // 4)))
        histogram = pixels.histogram()
        ink = 1 - max(histogram) / sum(histogram)
    if ink < MIN_INK_FRACTION:
        problems.append(f"{name}: the screenshot {png} is blank ({ink:.2%} of it differs from the background)")
    shown = png.relative_to(ROOT) if png.is_relative_to(ROOT) else png
    print(
        f"{name}: {seen['text']} characters, {seen['widgets']}/{static.widget_views} widgets, "
        f"{seen['math']} equations typeset, pictures {seen['decoded']}/{seen['images']} decoded"
        f"{'' if expected is None else f' (notebook holds {expected})'}, ink {ink:.1%}, "
        f"{WIDTH}x{height} px -> {shown}",
        flush=True,
    )
    return problems, {"page": name, "decoded": seen["decoded"], "notebook_pictures": expected, "height": height}


def check_static_css(html_dir: Path) -> list[str]:
    problems = []
    for css in sorted((html_dir / "_static").rglob("*.css")):
        for match in CSS_REMOTE.finditer(css.read_text(encoding="utf-8", errors="replace")):
            line = css.read_text(encoding="utf-8", errors="replace")[: match.start()].count("\n") + 1
            problems.append(f"{css.relative_to(html_dir)}:{line}: imports a resource from the network")
    return problems


def check_book(html_dir: Path, out_dir: Path, toc: Path, executed_dir: Path) -> tuple[list[str], list[dict]]:
    """Check every page of a built book; return (problems, one dict of counts per page)."""
    from playwright.sync_api import sync_playwright

    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.png"):
        old.unlink()
    problems = [
        f"{page}.html: in {toc.name} but not built"
        for page in toc_pages(toc)
        if not (html_dir / f"{page}.html").is_file()
    ]
    problems += check_static_css(html_dir)
    pages = sorted(p for p in html_dir.rglob("*.html") if not p.relative_to(html_dir).parts[0].startswith(("_", ".")))
    counts = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_FLAGS)
        try:
            for page in pages:
                page_problems, page_counts = check_page(browser, html_dir, page, out_dir, executed_dir)
                problems += page_problems
                if page_counts:
                    counts.append(page_counts)
        finally:
            browser.close()
    return problems, counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html-dir", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--toc", type=Path, default=ROOT / "_toc.yml")
    parser.add_argument(
        "--executed",
        type=Path,
        default=ROOT / "book" / "executed",
        help="the executed notebooks the pages were built from (default: book/executed)",
    )
    args = parser.parse_args(argv)

    if not args.html_dir.is_dir():
        raise SystemExit(f"{args.html_dir} does not exist: build the book first (make book).")
    problems, counts = check_book(args.html_dir, args.out, args.toc, args.executed)
    if problems:
        print(f"\n{len(problems)} problems in the built book:", file=sys.stderr)
        for problem in problems:
            print(f"- {problem}", file=sys.stderr)
        return 1
    pictures = sum(c["decoded"] for c in counts)
    print(f"{len(counts)} pages checked, {pictures} pictures decoded, full-length screenshots in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
