"""Put the JavaScript the book needs at view time (ipywidgets, MathJax) into build/web-assets/ for offline use.

Jupyter Book 1.x pages load two things from CDNs by default: the ipywidgets HTML manager (myst-nb's
``nb_ipywidgets_js``) and MathJax (Sphinx's ``mathjax_path``). Offline, widgets then render blank and equations stay
raw TeX. This script fetches both from the npm registry with ``npm pack`` (pinned versions, checked against
pinned sha512 integrities), unpacks the files the pages use into ``build/web-assets/`` (gitignored), and
``_config.yml`` serves that folder as ``_static/`` (``html_static_path``) and points the pages at it:

- ``@jupyter-widgets/html-manager`` ``dist/embed.js``: the standalone bundle (no require.js) with the
  base, controls and output widgets of ipywidgets 8 built in, plus the Font Awesome fonts it loads relative to itself;
- ``mathjax`` ``es5/``: MathJax 3 with its fonts and the TeX extensions it loads on demand.

Both are too large to commit (1.9 MB and 24 MB) and are build artefacts. Run again with --force to refetch.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEST = ROOT / "build" / "web-assets"

# name: (npm spec, registry integrity of the tarball, folder in the tarball, destination under DEST, skip suffixes)
PACKAGES = {
    "ipywidgets": (
        "@jupyter-widgets/html-manager@1.0.15",  # the html-manager release for ipywidgets 8.1 (widget protocol 2)
        "sha512-5thBIV6ymNgmPVOHvzx+gGy8ZSKmSazhtGw4/c4xJDVzRhG9PTeQsRjF3FUTopvFi//SABeNz1yp47bCrJ3CQA==",
        "package/dist",
        "ipywidgets",
        (".map", "embed-amd.js", "libembed-amd.js"),
    ),
    "mathjax": (
        "mathjax@3.2.2",  # the last MathJax 3, the major version Sphinx 7 configures
        "sha512-Bt+SSVU8eBG27zChVewOicYs7Xsdt40qm4+UpHyX7k0/O9NliPc+x77k1/FEsPsjKPZGJvtRZM1vO+geW0OhGw==",
        "package/es5",
        "mathjax",
        (),
    ),
}
# What _config.yml references; their presence means the assets are in place.
ENTRY_POINTS = ("ipywidgets/embed.js", "mathjax/tex-chtml.js")


def integrity(path: Path) -> str:
    """The npm ``dist.integrity`` string (sha512, base64) of a file."""
    return "sha512-" + base64.b64encode(hashlib.sha512(path.read_bytes()).digest()).decode()


def fetch(name: str, workdir: Path) -> None:
    spec, expected, inner, dest_name, skip = PACKAGES[name]
    result = subprocess.run(
        ["npm", "pack", spec, "--silent", "--pack-destination", str(workdir)], capture_output=True, text=True
    )
    if result.returncode != 0:
        raise SystemExit(f"npm pack {spec} failed:\n{result.stderr.strip()}")
    tarball = workdir / result.stdout.strip().splitlines()[-1]
    if integrity(tarball) != expected:
        raise SystemExit(f"{spec}: tarball integrity {integrity(tarball)} differs from the pinned {expected}.")
    dest = DEST / dest_name
    shutil.rmtree(dest, ignore_errors=True)
    with tarfile.open(tarball) as archive:
        members = [
            m
            for m in archive.getmembers()
            if m.isfile() and m.name.startswith(inner + "/") and not m.name.endswith(skip)
        ]
        for member in members:
            member.name = member.name[len(inner) + 1 :]
            archive.extract(member, dest, filter="data")
    size = sum(f.stat().st_size for f in dest.rglob("*") if f.is_file())
    print(f"{spec}: {len(members)} files, {size / 1e6:.1f} MB -> {dest.relative_to(ROOT)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="fetch again even if the files are there")
    args = parser.parse_args(argv)
    if not args.force and all((DEST / path).is_file() for path in ENTRY_POINTS):
        print(f"web assets already in {DEST.relative_to(ROOT)} (use --force to refetch)")
        return 0
    if shutil.which("npm") is None:
        raise SystemExit("npm is needed to fetch the ipywidgets and MathJax JavaScript (e.g. apt-get install npm).")
    DEST.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as workdir:
        for name in PACKAGES:
            fetch(name, Path(workdir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
