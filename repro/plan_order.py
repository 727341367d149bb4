"""Was each seed plan committed before the runs it planned?  Read from the repository's git history: the commit that
added a confirmatory plan's file (or its completion record) and the first commit that added a stored run of the
fresh seeds it planned.  A plan passes when its commit comes first; it says nothing of runs not committed yet.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import yaml

from repro import tiers
from repro.results import RESULTS_DIR

__all__ = ["plan_order"]


def _git(root: Path, *args: str) -> str | None:
    """``git <args>``'s output in ``root``, or None where there is no git or no history."""
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def _first_added(root: Path, where: str) -> dict[str, str] | None:
    """{path: the first commit that added it} for the files under ``where`` (relative to ``root``)."""
    log = _git(root, "log", "--reverse", "--diff-filter=A", "--name-only", "--format=C %H", "--", where)
    if log is None:
        return None
    out, commit = {}, None
    for line in log.splitlines():
        if line.startswith("C "):
            commit = line[2:]
        elif line:
            out.setdefault(line, commit)
    return out


def _stored_runs(tier: str, results_dir: Path, root: Path) -> list[tuple[str, int, str]]:
    """(cell key, seed, path relative to ``root``) of every stored run of ``tier``."""
    out = []
    for meta in sorted((results_dir / tier).glob("*/*.json")):
        label = json.loads(meta.read_text())["label"]
        out.append((tiers.cell_key(meta.parent.name, label), label["seed"], meta.relative_to(root).as_posix()))
    return out


def _record_added(root: Path, path: str, number: int) -> str | None:
    """The first commit whose ``path`` (a plan completions file) holds a record of plan ``number``."""
    for commit in (_git(root, "log", "--reverse", "--format=%H", "--", path) or "").split():
        text = _git(root, "show", f"{commit}:{path}")
        if text and any(int(r["plan"]) == number for r in yaml.safe_load(text) or ()):
            return commit
    return None


def _plans(tier: str, root: Path, files: dict) -> list[tuple[str, str, str | None, dict]]:
    """(what, its file, the commit that added it, {cell key: the seeds it planned}) per seed plan: the tier's first,
    each confirmatory plan and each plan completion."""
    out = []
    seed_plan = tiers.get_tier(tier).seed_plan
    if isinstance(seed_plan, str):  # the first plan: the seeds of its cells beyond the tier's own (``tier_seeds``)
        cells = yaml.safe_load((root / seed_plan).read_text())["cells"]
        planned = {tiers.cell_key(c["group"], c["label"]): range(c["tier_seeds"], c["seeds"]) for c in cells}
        out.append(("seed plan", seed_plan, files.get(seed_plan), planned))
    for number, path in enumerate(tiers.written_confirmatory_plans(tier), start=1):
        out.append((f"plan {number}", path, files.get(path), tiers.file_cells(tier, number)))
    done, path = tiers.completions(tier), tiers.get_tier(tier).plan_completions
    for number in sorted(done):
        own = tiers.file_cells(tier, number)
        cells = {k: tuple(s for s in seeds if s not in own.get(k, ())) for k, seeds in done[number].items()}
        out.append((f"plan {number}'s completion", path, _record_added(root, path, number), cells))
    return out


def plan_order(tier: str = "subset", results_dir=None) -> pd.DataFrame | None:
    """One row per seed plan of ``tier`` (the first plan, for the seeds it added to the tier's own; each confirmatory
    plan; each plan completion, for the seeds its plan's file did not list): ``plan``, ``file``, ``plan_commit``
    (the first commit that added the file, or the completion's record), ``runs`` (its planned runs in the store),
    ``committed_runs`` (those in the history), ``first_run_commit`` and ``plan_first`` (True when no committed run
    of it precedes the plan).  None without git or in a shallow clone.  ``results_dir`` must lie inside the
    repository (default: its ``results/``)."""
    root = tiers.ROOT
    results_dir = Path(results_dir if results_dir is not None else RESULTS_DIR).resolve()
    if (_git(root, "rev-parse", "--is-shallow-repository") or "").strip() != "false":
        return None  # no git, or a shallow clone: its first commit would seem to add every file at once
    order = _git(root, "rev-list", "--reverse", "--topo-order", "HEAD")
    added = _first_added(root, results_dir.relative_to(root).as_posix() + f"/{tier}")
    files = _first_added(root, "plans")
    if order is None or added is None or files is None:
        return None
    rank = {c: i for i, c in enumerate(order.split())}
    runs = _stored_runs(tier, results_dir, root)
    rows = []
    for what, path, plan_commit, cells in _plans(tier, root, files):
        mine = [p for k, s, p in runs if s in cells.get(k, ())]
        commits = sorted({added[p] for p in mine if p in added}, key=rank.__getitem__)
        first = commits[0] if commits else None
        rows.append(
            {
                "plan": what,
                "file": path,
                "plan_commit": plan_commit[:7] if plan_commit else None,
                "runs": len(mine),
                "committed_runs": sum(p in added for p in mine),
                "first_run_commit": first[:7] if first else None,
                "plan_first": plan_commit is not None and (first is None or rank[plan_commit] < rank[first]),
            }
        )
    return pd.DataFrame(rows)
