"""Check that a FrameSlider works in a static page: move a control in headless Chromium, see the figure change.

For every FrameSlider in the given HTML pages (a built book page, or an executed notebook whose output holds one),
the script writes a standalone page with the slider's HTML plus a tiny script that, after load, sets the last
range input to its maximum and dispatches an 'input' event, then records ``data-key`` and the <img> source before
and after.  Chromium runs headless with no network (``--host-resolver-rules``) and ``--virtual-time-budget``;
``--dump-dom`` gives the result.  Exit status 1 if any slider did not change its key and image.

    python scripts/check_frame_slider.py                      # every built page under _build/html/book/executed
    python scripts/check_frame_slider.py book/executed/table1.ipynb _build/html/book/executed/table1.html
    python scripts/check_frame_slider.py --screenshots screenshots/sliders book/executed/*.ipynb

With ``--screenshots DIR`` each slider of an executed notebook is also photographed before and after the move
(``DIR/<notebook>-<n>-before.png`` and ``-after.png``), so a person can see the figure change.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

PROBE = """
<script>
window.addEventListener("load", function() {
  document.querySelectorAll(".fedlib-frame-slider").forEach(function(root, i) {
    var img = root.querySelector("img");
    var before = [root.getAttribute("data-key"), img.src.length, img.src.slice(-40)];
    var inputs = root.querySelectorAll('input[type="range"]');
    var el = inputs[inputs.length - 1];
    el.value = el.max;
    el.dispatchEvent(new Event("input"));
    var after = [root.getAttribute("data-key"), img.src.length, img.src.slice(-40)];
    var out = document.createElement("pre");
    out.id = "probe-" + i;
    out.textContent = "PROBE " + JSON.stringify({before: before, after: after});
    document.body.appendChild(out);
  });
});
</script>"""


def slider_blocks(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".ipynb":
        nb = json.loads(text)
        return [
            "".join(o["data"]["text/html"])
            for c in nb["cells"]
            for o in c.get("outputs", [])
            if "text/html" in o.get("data", {}) and "fedlib-frame-slider" in "".join(o["data"]["text/html"])
        ]
    return [text] if "fedlib-frame-slider" in text else []


ROOT = Path(__file__).resolve().parents[1]


def _chrome_args(chrome: str, tmp: str) -> list[str]:
    return [
        chrome,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--hide-scrollbars",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--virtual-time-budget=5000",
        f"--user-data-dir={tmp}/profile",
    ]


def _photograph(chrome: str, block: str, target: Path, *, moved: bool) -> None:
    """Screenshot of the slider alone, before or after the probe moves its last control."""
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "page.html"
        page.write_text(f"<!doctype html><html><body>{block}{PROBE if moved else ''}</body></html>")
        subprocess.run(
            [*_chrome_args(chrome, tmp), "--window-size=1000,700", f"--screenshot={target}", page.as_uri()],
            capture_output=True,
            text=True,
            timeout=120,
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "pages", nargs="*", type=Path, help="built pages or executed notebooks (default: every built page)"
    )
    parser.add_argument("--screenshots", type=Path, metavar="DIR", help="photograph each slider before and after")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.pages if not p.is_file()]
    if missing:
        parser.error(f"pages: no such file {', '.join(missing)}")
    shots = args.screenshots
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
    paths = args.pages or sorted((ROOT / "_build" / "html" / "book" / "executed").glob("*.html"))
    if not paths:
        print("no pages given and none built under _build/html/book/executed (run `make book` first)")
        return 2
    chrome = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if chrome is None:
        print("no chromium found")
        return 2
    bad = 0
    for path in paths:
        for j, block in enumerate(slider_blocks(path)):
            with tempfile.TemporaryDirectory() as tmp:
                page = Path(tmp) / "page.html"
                body = block if block.lstrip().startswith("<!") else f"<!doctype html><html><body>{block}</body></html>"
                page.write_text(body.replace("</body>", PROBE + "</body>") if "</body>" in body else body + PROBE)
                out = subprocess.run(
                    [*_chrome_args(chrome, tmp), "--dump-dom", page.as_uri()],
                    capture_output=True,
                    text=True,
                    timeout=120,
                )
            if shots is not None and path.suffix == ".ipynb":
                for when in ("before", "after"):
                    _photograph(chrome, block, shots / f"{path.stem}-{j}-{when}.png", moved=when == "after")
            probes = [json.loads(m.replace("&quot;", '"')) for m in re.findall(r"PROBE (\{.*?\})</pre>", out.stdout)]
            if not probes:
                print(f"FAIL {path} block {j}: no probe output (JavaScript did not run?)")
                bad += 1
            for k, p in enumerate(probes):
                changed = p["before"][0] != p["after"][0] and p["before"][1:] != p["after"][1:]
                print(
                    f"{'ok  ' if changed else 'FAIL'} {path} slider {j}.{k}: data-key {p['before'][0]!r} -> "
                    f"{p['after'][0]!r}, image {'changed' if p['before'][1:] != p['after'][1:] else 'unchanged'}"
                )
                bad += not changed
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
