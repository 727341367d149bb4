"""How far a retrain on another machine moves the stored results, measured, and which verdicts it flips.

The stored runs of a tier (``results/<tier>/<group>/``) were trained on one machine.  The same configurations
retrained under another floating-point environment (another CPU capability, oneDNN cap, thread count; see
:mod:`repro.float_env`) are stored under ``results/machines/<machine>/<tier>/<group>/`` with the same keys, so
each
retrained run pairs with its stored twin.  From the pairs:

- :func:`paired_final`: each run's final accuracy (mean of the last 10 evaluated rounds) stored and retrained;
- :func:`spread`: per machine, how far the retrain moves a run (median and largest |change|, and the per-run
  spread ``std(change) / sqrt 2``: a retrain on another machine draws the run's training noise anew) beside the
  seed std of the stored runs;
- :func:`verdicts`: every checked claim of a page (:data:`STORED_CLAIMS`) recomputed from each machine's runs, and
  whether its verdict flips.  A verdict that flips with the machine is no finding at that tier.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from fedlib.training.runs import last_rounds_mean
from repro import claims, participation, reporting, significance
from repro.results import RESULTS_DIR, load_group

__all__ = [
    "MACHINES_DIR",
    "STORED_CLAIMS",
    "machines",
    "machine_env",
    "paired_final",
    "seed_std",
    "spread",
    "claims_at",
    "verdicts",
    "page_note",
    "page_section",
    "flip_note",
    "claims_frame",
]

#: Folder of the retrained copies: ``<MACHINES_DIR>/<machine>/<tier>/<group>/<key>.csv``.
MACHINES_DIR = RESULTS_DIR / "machines"


def _finals(frame, last, by=()):
    return significance.per_run_final(frame, last, by=by)


def _table1(stored, last, results_dir):  # per run: the final accuracy (%)
    return _finals(stored.frame, last)


def _table2(stored, last, results_dir):  # (FedEntOpt+X) - X seed by seed, with the paper's change
    runs = _finals(stored.frame, last)
    bases = [m for m in dict.fromkeys(runs["method"]) if f"FedEntOpt+{m}" in set(runs["method"])]
    paired = significance.paired_pairs(runs, [(f"FedEntOpt+{m}", m) for m in bases])
    if paired.empty:
        return paired
    paper = reporting.table2_summary(stored, last=last)[["partition", "baseline", "paper_change"]]
    return paired.merge(paper.rename(columns={"baseline": "b"}), on=["partition", "b"], how="left")


def _races(stored, last, results_dir):
    return significance.races(stored.frame, "FedEntOpt", window=last)


def _participation(stored, last, results_dir):  # with Table I's full-rate runs from the same folder
    frame, _ = participation.with_full_rate(stored, results_dir)
    runs = participation.per_run(frame, last)
    gaps = significance.paired_against(runs, "FedEntOpt", by=participation.RATE_KEYS)
    return participation.rate_change(runs, "FedEntOpt"), gaps


def _judge_participation(summary, tier):
    change, gaps = summary
    return claims.participation(change, tier, rate_gaps=gaps)


def _availability(stored, last, results_dir):
    return significance.paired_against(_finals(stored.frame, last, by=["scenario"]), "FedEntOpt", by=["scenario"])


def _buffer(stored, last, results_dir):
    return _finals(stored.frame, last, by=["buffer_pct"])


def _large_pools(stored, last, results_dir):
    by = ["num_clients", "clients_per_round"]
    return significance.paired_against(_finals(stored.frame, last, by=by), "FedEntOpt", by=by)


def _fedentropy(stored, last, results_dir):  # the page's curve: runs stored before it have the trained entropy
    f = stored.frame.copy()
    if "reselection_entropy_bits" not in f:
        f["reselection_entropy_bits"] = np.nan
    f["reselection_entropy_bits"] = f["reselection_entropy_bits"].fillna(f["entropy_bits_trained"])
    return f


#: page -> (experiment group, summary of its stored runs ``(stored, last, results_dir)``, the page's claims): what
#: ``tests/test_claims.py`` asserts, what :func:`verdicts` recomputes per machine and what
#: ``repro.scorecard``
#: shows.
STORED_CLAIMS = {
    "table1": ("table1", _table1, claims.table1),
    "table2": ("table2", _table2, claims.table2_changes),
    "accuracy_curves": ("table1", _races, claims.faster_than_every_method),
    "participation": ("participation", _participation, _judge_participation),
    "availability": ("availability", _availability, claims.availability),
    "buffer_accuracy": ("buffer", _buffer, claims.buffer_accuracy),
    "large_pools": ("large_pools", _large_pools, claims.large_pools),
    "fedentropy_entropy": ("fedentropy", _fedentropy, claims.fedentropy),
}


def machines(tier: str, experiment: str, machines_dir=None) -> list[str]:
    """The machines (folder names) that hold retrained runs of ``experiment`` at ``tier``, sorted."""
    root = Path(machines_dir if machines_dir is not None else MACHINES_DIR)
    return sorted(p.name for p in root.glob("*") if any((p / tier / experiment).glob("*.csv")))


def machine_env(tier: str, experiment: str, machine: str, machines_dir=None, short: bool = False) -> str:
    """How the machine's retrains computed floats (``repro.float_env.describe`` of its first run, the part
    that is the same for all)."""
    import json

    from repro import float_env

    root = Path(machines_dir if machines_dir is not None else MACHINES_DIR)
    first = sorted((root / machine / tier / experiment).glob("*.json"))[0]
    env = json.loads(first.read_text()).get("float_env")
    return float_env.short(env) if short else float_env.describe(env)


def _per_run(stored, last: int) -> pd.DataFrame:
    labels = [c for c in stored.meta.columns if c in stored.frame.columns and c != "key"]
    rows = [
        {**dict(zip(labels, sub[labels].iloc[0])), "key": key, "final": last_rounds_mean(sub, last)}
        for key, sub in stored.frame.groupby("key", sort=True)
    ]
    return pd.DataFrame(rows)


def paired_final(
    tier: str, experiment: str, machine: str, last: int = 10, results_dir=None, machines_dir=None
) -> pd.DataFrame:
    """One row per retrained run: its label columns, ``key``, ``stored`` and ``retrained`` final accuracy and
    ``change`` (retrained - stored), all in percentage points.  Runs of the machine with no stored twin are
    left out."""
    root = Path(machines_dir if machines_dir is not None else MACHINES_DIR)
    base = _per_run(load_group(tier, experiment, results_dir), last)
    again = _per_run(load_group(tier, experiment, root / machine), last)[["key", "final"]]
    out = base.merge(again, on="key", suffixes=("_stored", "_retrained"))
    out = out.rename(columns={"final_stored": "stored", "final_retrained": "retrained"})
    out[["stored", "retrained"]] *= 100
    out["change"] = out["retrained"] - out["stored"]
    return out


def seed_std(per_run: pd.DataFrame, column: str = "stored") -> float:
    """The runs' spread over seeds, in the column's unit: per setting (every label column but ``seed``) the
    std over its seeds (ddof=1), pooled as the root of the mean variance over settings with two seeds or more."""
    settings = [c for c in per_run.columns if c not in ("seed", "key", "stored", "retrained", "change")]
    var = per_run.groupby(settings, sort=False)[column].var(ddof=1).dropna()
    return float(math.sqrt(var.mean())) if len(var) else math.nan


def spread(tier: str, experiment: str, last: int = 10, results_dir=None, machines_dir=None) -> pd.DataFrame:
    """Per machine: ``runs`` paired, ``environment``, ``median_abs`` and ``max_abs`` change (pp), ``identical``
    runs (change 0), ``machine_std`` (std of the change / sqrt 2: the per-run spread a machine change draws) and
    ``seed_std`` of every stored run of the group (:func:`seed_std`), both in pp."""
    rows = []
    for m in machines(tier, experiment, machines_dir):
        p = paired_final(tier, experiment, m, last, results_dir, machines_dir)
        if p.empty:
            continue
        if not rows:
            every = _per_run(load_group(tier, experiment, results_dir), last)
            seeds = seed_std(
                every.drop(columns="key").rename(columns={"final": "stored"}).assign(stored=lambda d: d["stored"] * 100)
            )
        rows.append(
            {
                "machine": m,
                "environment": machine_env(tier, experiment, m, machines_dir),
                "kernels": machine_env(tier, experiment, m, machines_dir, short=True),
                "runs": len(p),
                "median_abs": float(p["change"].abs().median()),
                "max_abs": float(p["change"].abs().max()),
                "identical": int((p["change"] == 0).sum()),
                "machine_std": float(p["change"].std(ddof=1) / math.sqrt(2)) if len(p) > 1 else math.nan,
                "seed_std": seeds,
            }
        )
    return pd.DataFrame(rows)


def _measured_groups(tier: str, machines_dir=None) -> list[str]:
    root = Path(machines_dir if machines_dir is not None else MACHINES_DIR)
    return sorted({p.parent.name for p in root.glob(f"*/{tier}/*/*.csv")})


def claims_at(tier: str, page: str, results_dir=None, last: int = 10) -> list:
    """The page's claims (:data:`STORED_CLAIMS`) computed from the runs stored under ``results_dir``."""
    experiment, summarise, judge = STORED_CLAIMS[page]
    stored = load_group(tier, experiment, results_dir)
    return [] if stored.empty else judge(summarise(stored, last, results_dir), tier)


def claims_frame(tier: str, page: str, results_dir=None, machines_dir=None) -> pd.DataFrame:
    """The page's claims as :func:`repro.claims.frame` shows them, with the verdict the scorecard gives: a
    verdict that flips when the runs are retrained on another machine is "undecided (flips with the machine)";
    ``other machines`` gives each machine's verdict."""
    found = claims_at(tier, page, results_dir)
    out = claims.frame(found)
    if not found:
        return out
    v = verdicts(tier, page, results_dir, machines_dir).set_index("key")
    others = [c for c in v.columns if c.startswith("verdict@")]
    out["other machines"] = [
        "; ".join(f"{col.split('@', 1)[1]}: {v.loc[c.key, col]}" for col in others) or "not retrained" for c in found
    ]
    flips = [bool(v.loc[c.key, "flips"]) for c in found]
    out.loc[flips, "verdict"] = "undecided (flips with the machine)"
    return out


def verdicts(tier: str, page: str, results_dir=None, machines_dir=None) -> pd.DataFrame:
    """Every claim of the page: ``ours`` and ``holds`` from the stored runs, and per machine with a full set of
    retrained runs of the group its ``ours@<machine>`` and ``holds@<machine>``; ``flips``: whether any machine's
    verdict differs from the stored one."""
    experiment = STORED_CLAIMS[page][0]
    root = Path(machines_dir if machines_dir is not None else MACHINES_DIR)
    base = claims_at(tier, page, results_dir)
    out = pd.DataFrame(
        {
            "key": [c.key for c in base],
            "ours": [c.ours for c in base],
            "holds": [c.holds for c in base],
            "verdict": [c.verdict for c in base],
        }
    )
    out["flips"] = False
    n_stored = len(load_group(tier, experiment, results_dir))
    for m in machines(tier, experiment, machines_dir):
        if len(load_group(tier, experiment, root / m)) < n_stored:
            continue  # only a sample retrained there: its claims would rest on other runs
        other = {c.key: c for c in claims_at(tier, page, root / m)}
        out[f"ours@{m}"] = [other[k].ours if k in other else np.nan for k in out["key"]]
        out[f"holds@{m}"] = [other[k].holds if k in other else None for k in out["key"]]
        out[f"verdict@{m}"] = [other[k].verdict if k in other else None for k in out["key"]]
        out["flips"] |= out[f"verdict@{m}"].ne(out["verdict"])
    return out


def page_note(tier: str, experiment: str, results_dir=None, machines_dir=None) -> str:
    """A paragraph and a table for a training page: how far a retrain on another machine moved the runs of
    ``experiment``, beside their seed std (Markdown)."""
    table = spread(tier, experiment, results_dir=results_dir, machines_dir=machines_dir)
    if table.empty:
        text = (
            f"No run of `{experiment}` at tier `{tier}` has been retrained on another machine, so how far "
            "another CPU moves these numbers is not measured for this page."
        )
        for other in _measured_groups(tier, machines_dir):
            t = spread(tier, other, results_dir=results_dir, machines_dir=machines_dir)
            if not t.empty:
                r = t.loc[t["machine_std"].idxmax()]
                text += (
                    f" At this tier, {int(r['runs'])} runs of `{other}` retrained under {r['environment']} "
                    f"moved by up to {r['max_abs']:.2f} pp (a spread of {r['machine_std']:.2f} pp per run, "
                    f"seed std {r['seed_std']:.2f} pp): the page of `{other}` shows them."
                )
                break
        return text
    rows = [
        f"| {r.kernels} | {r.runs} | {r.median_abs:.2f} | {r.max_abs:.2f} | {r.identical} "
        f"| {r.machine_std:.2f} | {r.seed_std:.2f} |".replace("| nan |", "| – |")
        for r in table.itertuples()
    ]
    worst = table.loc[table["machine_std"].idxmax()]
    versus = (
        f", {worst['machine_std'] / worst['seed_std']:.2f} times the seed std of {worst['seed_std']:.2f} pp"
        if worst["seed_std"] == worst["seed_std"]
        else " (the group has one seed per setting here: no seed std to set beside it)"
    )
    return (
        "**Another machine.** These runs were trained on one CPU; on another CPU floats differ in the last "
        "digits and training grows that into points. The runs below were retrained under another "
        f"floating-point environment (`results/machines/`). The largest per-run spread a machine change drew "
        f"is {worst['machine_std']:.2f} pp{versus}: one run's final accuracy moves by about that on another "
        "computer (a mean over n seeds by that over the square root of n).\n\n"
        "| retrained with | runs | median \\|Δ\\| pp | largest \\|Δ\\| pp | unchanged | spread per run, pp "
        "| seed std, pp |\n|---|---|---|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n\nThe retrains: "
        + "; ".join(f"`results/machines/{r.machine}`: {r.environment}" for r in table.itertuples())
        + "."
    )


def flip_note(tier: str, page: str, results_dir=None, machines_dir=None) -> str:
    """One sentence: how many of the page's claims were recomputed on other machines' runs and which flipped."""
    v = verdicts(tier, page, results_dir, machines_dir)
    others = [c.split("@", 1)[1] for c in v.columns if c.startswith("holds@")]
    if v.empty:
        return f"The page judges no claim at tier `{tier}`."
    if not others:
        return (
            f"Its {len(v)} claims were not recomputed on another machine (no machine retrained every run of the group)."
        )
    flipped = v[v["flips"]]
    where = ", ".join(f"`{m}`" for m in others)
    if flipped.empty:
        return f"The page's {len(v)} claims, recomputed from the runs retrained on {where}: no verdict flips."
    keys = ", ".join(f"`{k}`" for k in flipped["key"])
    return (
        f"Of {len(v)} claims recomputed from the runs retrained on {where}, {len(flipped)} flip: {keys}. "
        "A verdict that flips with the machine is no finding at this tier."
    )


def page_section(tier: str, experiment: str, page: str | None = None, results_dir=None, machines_dir=None) -> str:
    """What a training page says about another machine (Markdown): :func:`page_note` for its group and, for a
    page with stored claims, :func:`flip_note`."""
    text = page_note(tier, experiment, results_dir, machines_dir)
    if page in STORED_CLAIMS:
        text += "\n\n" + flip_note(tier, page, results_dir, machines_dir)
    return text
