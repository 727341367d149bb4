"""Check the built book as a reader without network sees it, and save a screenshot of every page.

Builds nothing; run it after ``jb build``. For every HTML page under ``_build/html`` it

1. fails when a page of ``_toc.yml`` has no HTML file;
2. fails when a page loads a script, style sheet, font, image or frame from an http(s) URL (offline, that
   resource is missing), and when a style sheet in ``_static`` imports one;
3. opens the page in headless Chromium with every host name unresolvable, after the page's JavaScript ran, and
   fails when the article has (almost) no text, when an ipywidgets view did not render, or when an equation
   was not typeset by MathJax;
4. saves ``screenshots/<page>.png`` and fails when it is (almost) a single colour.

Usage: ``python scripts/screenshots.py [--html-dir _build/html] [--out screenshots]``. Needs Chromium
(``apt-get install -y chromium``).
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from html.parser import HTMLParser
from pathlib import Path

import yaml
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
CHROMIUM_FLAGS = [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--mute-audio",
    "--no-first-run", "--disable-extensions", "--disable-background-networking",
    # Virtual time the page's JavaScript gets before the DOM is dumped or the picture taken; without a budget a
    # redirect page hangs, and at 5000 ms MathJax has not finished a page with ~70 equations.
    "--virtual-time-budget=20000",
    "--host-resolver-rules=MAP * ~NOTFOUND",  # no host name resolves: the reader has no network
]
WINDOW = (1280, 4000)  # tall enough to show a whole page of the book in one picture
MIN_ARTICLE_CHARS = 40  # an article with less text than a title and a sentence counts as blank
MIN_INK_FRACTION = 0.005  # share of pixels that differ from the background colour
# Attributes through which a page fetches a resource at view time (links to other sites are fine).
RESOURCE_ATTRIBUTES = {"script": "src", "img": "src", "iframe": "src", "source": "src", "video": "src",
                       "audio": "src", "embed": "src"}
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
    raise SystemExit(f"No Chromium found (looked for {', '.join(CHROMIUM_NAMES)}); "
                     "install it, e.g. apt-get install -y chromium.")


def chromium(binary: str, *args: str, timeout: int = 60) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *CHROMIUM_FLAGS, *args], capture_output=True, text=True, timeout=timeout)


def check_page(binary: str, html_dir: Path, page: Path, out_dir: Path) -> list[str]:
    """Return the problems of one page (an empty list when it is fine)."""
    name = page.relative_to(html_dir).as_posix()
    problems = []
    static = scan(page.read_text(encoding="utf-8"))
    problems += [f"{name}: loads {url} from the network" for url in static.remote]
    if 'http-equiv="refresh"' in page.read_text(encoding="utf-8").lower():
        return problems  # index.html only redirects to the root page, which is checked on its own

    dumped = chromium(binary, "--dump-dom", page.as_uri())
    if dumped.returncode != 0 or "<html" not in dumped.stdout:
        return problems + [f"{name}: Chromium could not render it: {dumped.stderr.strip()[-500:]}"]
    dom = scan(dumped.stdout)
    if page.name not in ("genindex.html", "search.html") and len(dom.text) < MIN_ARTICLE_CHARS:
        problems.append(f"{name}: the article is blank ({len(dom.text)} characters of text)")
    if dom.rendered_widgets < static.widget_views:
        problems.append(f"{name}: {static.widget_views} ipywidgets views, {dom.rendered_widgets} rendered "
                        "(is _static/ipywidgets/embed.js there? run scripts/fetch_web_assets.py)")
    raw_tex = dom.text.count("\\(") + dom.text.count("\\[")  # delimiters MathJax removes when it typesets
    if static.math and (not dom.typeset_math or raw_tex):
        problems.append(f"{name}: {static.math} equations, {dom.typeset_math} typeset by MathJax, {raw_tex} left "
                        "as TeX (is _static/mathjax/ there? run scripts/fetch_web_assets.py)")

    png = out_dir / (page.relative_to(html_dir).with_suffix(".png").as_posix().replace("/", "__"))
    shot = chromium(binary, f"--window-size={WINDOW[0]},{WINDOW[1]}", f"--screenshot={png}", page.as_uri())
    if shot.returncode != 0 or not png.is_file():
        return problems + [f"{name}: no screenshot: {shot.stderr.strip()[-500:]}"]
    with Image.open(png) as image:
        pixels = image.convert("L").resize((WINDOW[0] // 4, WINDOW[1] // 4))
        histogram = pixels.histogram()
        ink = 1 - max(histogram) / sum(histogram)
    if ink < MIN_INK_FRACTION:
        problems.append(f"{name}: the screenshot {png} is blank ({ink:.2%} of it differs from the background)")
    print(f"{name}: {len(dom.text)} characters, {dom.rendered_widgets}/{static.widget_views} widgets, "
          f"{dom.typeset_math} equations typeset, ink {ink:.1%} -> {png.relative_to(ROOT) if png.is_relative_to(ROOT) else png}",
          flush=True)
    return problems


def check_static_css(html_dir: Path) -> list[str]:
    problems = []
    for css in sorted((html_dir / "_static").rglob("*.css")):
        for match in CSS_REMOTE.finditer(css.read_text(encoding="utf-8", errors="replace")):
            line = css.read_text(encoding="utf-8", errors="replace")[: match.start()].count("\n") + 1
            problems.append(f"{css.relative_to(html_dir)}:{line}: imports a resource from the network")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html-dir", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--out", type=Path, default=ROOT / "screenshots")
    parser.add_argument("--toc", type=Path, default=ROOT / "_toc.yml")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="pages checked in parallel (default 2)")
    args = parser.parse_args(argv)

    if not args.html_dir.is_dir():
        raise SystemExit(f"{args.html_dir} does not exist: build the book first (make book).")
    binary = find_chromium()
    args.out.mkdir(parents=True, exist_ok=True)
    for old in args.out.glob("*.png"):
        old.unlink()

    problems = [f"{page}.html: in {args.toc.name} but not built"
                for page in toc_pages(args.toc) if not (args.html_dir / f"{page}.html").is_file()]
    problems += check_static_css(args.html_dir)
    pages = sorted(p for p in args.html_dir.rglob("*.html")
                   if not p.relative_to(args.html_dir).parts[0].startswith(("_", ".")))
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for page_problems in pool.map(lambda p: check_page(binary, args.html_dir, p, args.out), pages):
            problems += page_problems
    if problems:
        print(f"\n{len(problems)} problems in the built book:", file=sys.stderr)
        for problem in problems:
            print(f"- {problem}", file=sys.stderr)
        return 1
    print(f"{len(pages)} pages checked, screenshots in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
