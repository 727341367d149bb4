"""The notebooks as users open them: JupyterLab in a real browser (the system Chromium, driven by Playwright,
no network), run all cells of the explorer, move the K slider, see the live figure redrawn.

The notebook is copied to a temporary folder first, so JupyterLab's autosave never writes outputs into the
repository's notebook sources.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser")) if p), None)

pytestmark = pytest.mark.skipif(
    CHROMIUM is None
    or importlib.util.find_spec("playwright") is None
    or importlib.util.find_spec("jupyterlab") is None,
    reason="needs Chromium (apt-get install chromium), playwright and jupyterlab (make install)",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def lab(tmp_path):
    shutil.copy(ROOT / "notebooks" / "explorer.ipynb", tmp_path / "explorer.ipynb")
    port = _free_port()
    log = open(tmp_path / "jupyterlab.log", "w")
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            f"--port={port}",
            "--ServerApp.ip=127.0.0.1",
            "--ServerApp.token=",
            "--ServerApp.password=",
            "--ServerApp.allow_root=True",
            f"--ServerApp.root_dir={tmp_path}",
            "--LabApp.news_url=None",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=1)
                break
            except OSError:
                if server.poll() is not None:
                    pytest.fail(f"JupyterLab exited: {(tmp_path / 'jupyterlab.log').read_text()[-2000:]}")
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


LIVE_IMAGE = """() => {
  const imgs = Array.from(document.querySelectorAll(".widget-output img"));
  const shown = imgs.filter((img) => img.complete && img.naturalWidth > 0);
  return shown.length ? shown[shown.length - 1].src : null;
}"""


@pytest.mark.slow
def test_explorer_runs_in_jupyterlab_and_its_k_slider_redraws_the_figure(lab, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"],
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{lab}/lab/tree/explorer.ipynb", timeout=120_000)
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=120_000)
            select = page.get_by_role("button", name="Select", exact=True)  # JupyterLab may ask for the kernel
            try:
                select.wait_for(timeout=8_000)
                select.click()
            except Exception:  # noqa: BLE001 - no dialog: the notebook's kernel started by itself
                pass
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=120_000)
            page.get_by_role("menuitem", name="Run", exact=True).click()
            page.get_by_text("Run All Cells", exact=True).click()
            # the live view (widgets.interact) draws its first figure; JupyterLab loads images only near the
            # viewport, so the view is scrolled into sight first
            interact = page.locator(".widget-interact").first
            interact.wait_for(timeout=300_000)
            interact.scroll_into_view_if_needed()
            page.wait_for_function(LIVE_IMAGE, timeout=120_000)
            before = page.evaluate(LIVE_IMAGE)
            k_slider = page.locator(".widget-hslider").filter(
                has=page.locator(".widget-label").filter(has_text=re.compile(r"^K$"))
            )
            assert k_slider.count() == 1
            readout_before = k_slider.locator(".widget-readout").inner_text()
            handle = k_slider.locator(".noUi-handle")
            handle.focus()
            handle.press("ArrowRight")
            interact.scroll_into_view_if_needed()
            page.wait_for_function(f"(before) => ({LIVE_IMAGE})() !== before", arg=before, timeout=120_000)
            after = page.evaluate(LIVE_IMAGE)
            readout_after = k_slider.locator(".widget-readout").inner_text()
            page.screenshot(path=str(tmp_path / "explorer-jupyterlab.png"))
        except Exception:
            page.screenshot(path=str(tmp_path / "explorer-jupyterlab-failed.png"))  # for a person to look at
            raise
        finally:
            browser.close()
    assert (readout_before, readout_after) == ("100", "110")
    assert before != after
