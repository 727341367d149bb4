"""Execute the notebooks of the run table (runs.yaml) with papermill into book/executed/<name>.ipynb.

Examples (from the repository root)::

    python scripts/run_notebooks.py                          # every page, with the book's parameters
    python scripts/run_notebooks.py --only template --set num_draws=50 --set seed=1
    python scripts/run_notebooks.py --tier quick --out-dir /tmp/quick   # every page at the quick tier
    python scripts/run_notebooks.py --list
    python scripts/run_notebooks.py --smoke --prepare-only --out-dir build/smoke   # for pytest --nbval-lax

Every cell runs under a time limit (`--cell-timeout`, or a run table entry's longer `cell_timeout`); a page that times
out is run once more, then fails naming the cell. The pages run with the papermill engine of
``scripts/notebook_client.py``: a cell the kernel has not started a minute after its request fails at once, naming the
cell, and the page is run once more. A notebook is written to ``<out-dir>/<name>.ipynb`` only when it ran to the end; a
failed run leaves ``<name>.failed.ipynb`` (with the traceback in it) and makes the script exit with status 1, naming the
notebook.
"""

from __future__ import annotations

import argparse
import ast
import logging
import multiprocessing
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import nbformat
import papermill
import yaml
from notebook_client import ENGINE

ROOT = Path(__file__).resolve().parents[1]
TIERS = ("quick", "subset", "paper")
ENTRY_KEYS = {"name", "notebook", "tier", "parameters", "tiers", "smoke", "cell_timeout"}


def load_runs(path: Path) -> list[dict]:
    """Read and check the run table: known keys, unique names, existing notebooks, known tiers."""
    table = yaml.safe_load(path.read_text())
    runs = (table or {}).get("runs")
    if not isinstance(runs, list) or not runs:
        raise SystemExit(f"{path}: expected a non-empty list under 'runs'.")
    seen = set()
    for i, run in enumerate(runs):
        where = f"{path.name}, entry {i} ({run.get('name', '?')})"
        unknown = set(run) - ENTRY_KEYS
        missing = {"name", "notebook", "tier"} - set(run)
        if unknown or missing:
            raise SystemExit(
                f"{where}: unknown keys {sorted(unknown)}, missing keys {sorted(missing)}; "
                f"allowed: {sorted(ENTRY_KEYS)}."
            )
        if run["name"] in seen:
            raise SystemExit(f"{where}: the name {run['name']!r} is used twice.")
        seen.add(run["name"])
        if not (ROOT / run["notebook"]).is_file():
            raise SystemExit(f"{where}: notebook {run['notebook']!r} does not exist.")
        for tier in [run["tier"], *run.get("tiers", {})]:
            if tier not in TIERS:
                raise SystemExit(f"{where}: tier {tier!r} is not one of {TIERS}.")
        limit = run.get("cell_timeout", 1)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise SystemExit(f"{where}: cell_timeout {limit!r} is not a whole number of seconds >= 1.")
        run.setdefault("parameters", {})
        run.setdefault("tiers", {})
        run.setdefault("smoke", {})
    return runs


def cell_limit(run: dict, args) -> int:
    """Seconds a cell of this page may run: ``--cell-timeout``, or the entry's own ``cell_timeout`` where longer (a
    page whose known work takes long; the limit is there to catch a hung cell)."""
    return max(args.cell_timeout, run.get("cell_timeout", 0))


def parse_assignments(items: list[str]) -> dict:
    """Turn ``key=value`` strings into a dict; values are read as YAML literals (``0.5``, ``true``, ``[1, 2]``)."""
    parameters = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise SystemExit(f"--set {item!r}: expected key=value.")
        parameters[key.strip()] = yaml.safe_load(value)
    return parameters


def notebook_parameters(run: dict) -> dict:
    """The names assigned in the notebook's ``parameters`` cell, mapped to their source line.

    The cell is parsed with :mod:`ast`, not papermill's line matcher, which gives up on lines with a second
    ``=`` (as in ``partition = "C=2"`` or a comment that says ``Q = 50 %``).
    """
    nb = nbformat.read(ROOT / run["notebook"], as_version=4)
    cells = [c for c in nb.cells if c.cell_type == "code" and "parameters" in c.metadata.get("tags", [])]
    if not cells:
        raise SystemExit(f"{run['notebook']}: no cell tagged 'parameters'.")
    try:
        tree = ast.parse(cells[0].source)
    except SyntaxError as err:
        raise SystemExit(f"{run['notebook']}: the parameters cell is not valid Python ({err}).") from None
    lines = cells[0].source.splitlines()
    known = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        for target in targets:
            if isinstance(target, ast.Name):
                known[target.id] = lines[node.lineno - 1]
    return known


def parameters_for(run: dict, tier: str | None, overrides: dict, known: dict) -> tuple[str, dict]:
    """The tier and the parameters an entry runs with: the book's values, then the tier's, then ``--set``.

    A notebook whose parameters cell defines ``tier`` (the repro.tiers name) gets the tier passed in; for
    the
    others, another tier than the entry's own needs its overrides under ``tiers:`` in runs.yaml.
    """
    chosen = tier or run["tier"]
    parameters = dict(run["parameters"])
    if "tier" in known:
        parameters["tier"] = chosen
    elif chosen != run["tier"] and chosen not in run["tiers"]:
        raise SystemExit(
            f"{run['name']} ({run['notebook']}): runs.yaml gives no parameters for tier "
            f"{chosen!r} and the notebook has no 'tier' parameter; add them under "
            f"'tiers: {{{chosen}: ...}}' (an empty mapping if the book's values fit that tier)."
        )
    if chosen != run["tier"]:
        parameters.update(run["tiers"].get(chosen, {}))
    parameters.update(overrides)
    unknown = sorted(set(parameters) - set(known))
    if unknown:
        raise SystemExit(
            f"{run['name']} ({run['notebook']}): unknown parameters {unknown}; "
            f"the notebook's parameters cell defines {sorted(known)}."
        )
    return chosen, parameters


def check_toc(runs: list[dict], out_dir: Path) -> None:
    """Every run must be a page of _toc.yml and every executed page of _toc.yml must have a run."""
    if out_dir.resolve() != (ROOT / "book" / "executed").resolve():
        return
    toc = (ROOT / "_toc.yml").read_text()
    pages = {
        line.split("book/executed/", 1)[1].split()[0].removesuffix(".ipynb")
        for line in toc.splitlines()
        if "book/executed/" in line and not line.lstrip().startswith("#")
    }
    names = {run["name"] for run in runs}
    if names - pages or pages - names:
        raise SystemExit(
            f"runs.yaml and _toc.yml disagree: runs without a page {sorted(names - pages)}, "
            f"pages without a run {sorted(pages - names)}."
        )


def stuck_cell(partial: Path) -> str:
    """The cell a failed run stopped in, as ``cell N (first line)``: the last cell papermill started (a cell that
    timed out is marked 'completed' by papermill, one that raised 'failed'; cells never reached stay 'pending')."""
    try:
        nb = nbformat.read(partial, as_version=4)
    except Exception:  # noqa: BLE001 - no partial notebook: nothing to name
        return "cell unknown"
    # papermill puts a banner cell on top of a failed notebook; the numbering is that of the executed notebook
    cells = [c for c in nb.cells if "papermill-error-cell-tag" not in c.get("metadata", {}).get("tags", [])]
    started = [
        i
        for i, cell in enumerate(cells)
        if cell.get("metadata", {}).get("papermill", {}).get("status") not in (None, "pending")
    ]
    if not started:
        return "cell unknown"
    first = cells[started[-1]].source.strip().splitlines()[:1]
    return f"cell {started[-1]} ({first[0][:70] if first else ''})"


#: Tags that already decide how the book shows a code cell; a cell with none of them gets ``hide-input``.
SHOWN_AS_IS = {
    "parameters",
    "hide-input",
    "hide-output",
    "hide-cell",
    "remove-input",
    "remove-output",
    "remove-cell",
    "show-input",
}


def collapse_code(path: Path) -> None:
    """Tag every code cell of an executed notebook ``hide-input`` (the book then shows its outputs with the code
    behind a toggle), except the ``parameters`` cell and cells tagged otherwise, so a page reads as text, figure,
    table. The source notebooks stay as they are: opened in Jupyter they show all their code."""
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        tags = cell.metadata.setdefault("tags", [])
        if cell.cell_type == "code" and not SHOWN_AS_IS & set(tags):
            tags.append("hide-input")
    nbformat.write(nb, path)


def title_with_tier(path: Path, tier: str) -> None:
    """Append the tier to the title (the first line, ``# ...``) of an executed notebook, so that the sidebar names
    the quick and the subset page of one table apart: "Table I: ... (quick tier)"."""
    nb = nbformat.read(path, as_version=4)
    cell = nb.cells[0]
    title, sep, rest = cell.source.partition("\n")
    if cell.cell_type != "markdown" or not title.startswith("# "):
        raise ValueError(f"{path.name}: the first cell must start with the page title '# ...' (got {title!r}).")
    if not title.endswith(f"({tier} tier)"):
        cell.source = f"{title} ({tier} tier){sep}{rest}"
    nbformat.write(nb, path)


class _NoParameterGuesses(logging.Filter):
    """Drop papermill's reading of the parameters cell. It gives up on a line with two '=' (``partition = "C=2"``)
    and then warns that a parameter the cell does define is unknown; ``parameters_for`` checks the names against
    the cell's code (``notebook_parameters``) before any page runs."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(("Passed unknown parameter", "Unable to parse line"))


def execute_once(source: Path, partial: Path, parameters: dict, log_output: bool, cell_timeout: int) -> str:
    """One papermill run; return '' or the error."""
    for name in ("papermill", "papermill.translators"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _NoParameterGuesses) for f in logger.filters):
            logger.addFilter(_NoParameterGuesses())
    try:
        papermill.execute_notebook(
            str(source),
            str(partial),
            parameters=parameters,
            cwd=str(source.parent),  # the notebook's folder, as when it is opened in Jupyter
            progress_bar=False,
            log_output=log_output,
            engine_name=ENGINE,  # scripts/notebook_client.py: no lost execute requests, a loud error if one is
            execution_timeout=cell_timeout,  # seconds a single cell may run; a hung cell fails, never waits forever
        )
    except Exception as error:  # papermill raises PapermillExecutionError, nbclient CellTimeoutError, kernels die
        return f"{type(error).__name__}: {str(error).strip()[:2000]}"
    return ""


def execute(
    run: dict, tier: str, parameters: dict, out_dir: Path, log_output: bool, cell_timeout: int = 600, retries: int = 1
) -> tuple[str, float, str]:
    """Run one notebook; return (name, seconds, error message or '').

    A run that times out in a cell, or whose cell the kernel never started (``notebook_client.CellNotStarted``), is
    tried again (``retries`` times); another error is not retried, since running the same code again gives the same
    error.
    """
    source = ROOT / run["notebook"]
    target = out_dir / f"{run['name']}.ipynb"
    partial = out_dir / f"{run['name']}.failed.ipynb"
    start = time.perf_counter()
    for attempt in range(retries + 1):
        error = execute_once(source, partial, parameters, log_output, cell_timeout)
        if not error:
            collapse_code(partial)
            if "tier" in parameters:
                title_with_tier(partial, parameters["tier"])
            partial.replace(target)
            return run["name"], time.perf_counter() - start, ""
        timed_out = "CellTimeoutError" in error or "timed out" in error.lower()
        not_started = "CellNotStarted" in error
        where = stuck_cell(partial)
        if (timed_out or not_started) and attempt < retries:
            what = "the kernel never started the cell" if not_started else f"after {cell_timeout} s"
            print(f"{'STALL' if not_started else 'TIMEOUT'} {run['name']} in {where}: {what}; trying again", flush=True)
            continue
        kind = f"a cell ran longer than {cell_timeout} s ({attempt + 1} attempts)" if timed_out else "error"
        return run["name"], time.perf_counter() - start, f"{where}: {kind}: {error}\n  partial output: {partial}"
    raise AssertionError("unreachable")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=Path, default=ROOT / "runs.yaml", help="the run table (default: runs.yaml)")
    parser.add_argument("--only", action="append", metavar="NAME", help="run only this entry (repeatable)")
    parser.add_argument(
        "--tier",
        choices=TIERS,
        help="run every selected entry at this tier (default: each entry's own tier, as in the book)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a parameter of every selected entry (repeatable)",
    )
    parser.add_argument(
        "--out-dir",
        type=Path,
        default=ROOT / "book" / "executed",
        help="where executed notebooks go (default: book/executed, what the book shows)",
    )
    parser.add_argument("-j", "--jobs", type=int, default=1, help="notebooks run in parallel (default 1)")
    parser.add_argument(
        "--cell-timeout",
        type=int,
        default=600,
        metavar="SECONDS",
        help="longest a single cell may run before the page fails (default 600; an entry's own cell_timeout "
        "where longer); a page that times out is run once more before the build fails",
    )
    parser.add_argument("--log-output", action="store_true", help="echo the notebooks' output while they run")
    parser.add_argument("--list", action="store_true", help="print the run table and exit")
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="apply each entry's `smoke` overrides (small, fast parameters for the notebook tests)",
    )
    parser.add_argument(
        "--prepare-only",
        action="store_true",
        help="write the notebooks with the parameters injected but do not execute them (for `pytest --nbval-lax`)",
    )
    args = parser.parse_args(argv)

    runs = load_runs(args.runs)
    if args.only:
        unknown = sorted(set(args.only) - {run["name"] for run in runs})
        if unknown:
            raise SystemExit(f"--only {unknown}: no such entry; the run table has {[r['name'] for r in runs]}.")
        runs = [run for run in runs if run["name"] in args.only]
    else:
        check_toc(runs, args.out_dir)
    overrides = parse_assignments(args.set)
    plan = []
    for run in runs:
        entry_overrides = {**run["smoke"], **overrides} if args.smoke else overrides
        tier, parameters = parameters_for(run, args.tier, entry_overrides, notebook_parameters(run))
        plan.append((run, tier, parameters))
    if args.list:
        for run, tier, parameters in plan:
            print(f"{run['name']:<24} {tier:<7} {run['notebook']}  {parameters}")
        return 0

    if args.prepare_only:
        args.out_dir.mkdir(parents=True, exist_ok=True)
        for run, _, parameters in plan:
            target = args.out_dir / f"{run['name']}.ipynb"
            papermill.execute_notebook(
                str(ROOT / run["notebook"]), str(target), parameters=parameters, prepare_only=True, progress_bar=False
            )
            print(f"prepared {target}", flush=True)
        return 0

    # Kernels inherit this process's environment. MPLBACKEND (often Agg in CI and Makefiles) would keep the
    # figures out of the notebooks: the kernels start without it (repro.notebook.setup() guards the same).
    os.environ.pop("MPLBACKEND", None)
    # Kernels start in the notebook's folder: the reproduction (repro/, not installed) is found from the checkout's
    # root, and a relative data root is made absolute here.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    if os.environ.get("FEDLIB_DATA_ROOT"):
        os.environ["FEDLIB_DATA_ROOT"] = str(Path(os.environ["FEDLIB_DATA_ROOT"]).resolve())
    args.out_dir.mkdir(parents=True, exist_ok=True)
    failures = []
    # Every notebook in a fresh process of its own (spawned, not forked, and used once). Under load a page's client
    # sometimes waited on an idle kernel until the cell timeout (the kernel had no cell running); the forked worker
    # had inherited this process's ZeroMQ threads and ran its notebooks one after another on one ZeroMQ context.
    # Neither is needed, so neither is kept.
    spawn = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=spawn, max_tasks_per_child=1) as pool:
        futures = []
        for run, tier, parameters in plan:
            print(f"run  {run['name']} ({run['notebook']}, tier {tier}) {parameters}", flush=True)
            futures.append(
                (run, pool.submit(execute, run, tier, parameters, args.out_dir, args.log_output, cell_limit(run, args)))
            )
        for run, future in futures:
            name, seconds, error = future.result()
            if error:
                failures.append(f"{name} ({run['notebook']}): {error}")
                print(f"FAIL {name} ({run['notebook']}) after {seconds:.1f} s", flush=True)
            else:
                print(f"ok   {name} -> {args.out_dir / (name + '.ipynb')} in {seconds:.1f} s", flush=True)
    if failures:
        print(f"\n{len(failures)} of {len(plan)} notebooks failed:", file=sys.stderr)
        for failure in failures:
            print(f"- {failure}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
