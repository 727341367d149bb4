"""`make publish PUSH=0` puts the built pages on a local gh-pages branch (no network needed to test that)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


def test_publish_creates_the_gh_pages_branch_with_the_built_pages(tmp_path):
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "start")
    html = tmp_path / "_build" / "html"
    (html / "_static").mkdir(parents=True)
    (html / "index.html").write_text("<html>book</html>")
    (html / "_static" / "fedlib.css").write_text("body {}")
    env_args = ["GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"]
    done = subprocess.run(
        [
            "env",
            *env_args,
            "make",
            "-s",
            "-f",
            str(ROOT / "Makefile"),
            "-C",
            str(tmp_path),
            "publish",
            "PUSH=0",
            f"PYTHON={sys.executable}",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    files = set(_git(tmp_path, "ls-tree", "-r", "--name-only", "gh-pages").split())
    assert files == {".nojekyll", "index.html", "_static/fedlib.css"}
    head = _git(tmp_path, "rev-parse", "--short", "main").strip()
    assert _git(tmp_path, "log", "-1", "--format=%s", "gh-pages").strip() == f"Book built from {head}"
    assert _git(tmp_path, "show", "gh-pages:index.html") == "<html>book</html>"


def test_publish_without_a_built_book_says_what_to_run(tmp_path):
    _git(tmp_path, "init", "-q")
    done = subprocess.run(
        [
            "make",
            "-s",
            "-f",
            str(ROOT / "Makefile"),
            "-C",
            str(tmp_path),
            "publish",
            "PUSH=0",
            f"PYTHON={sys.executable}",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert "no _build/html/index.html: run make book" in done.stderr
