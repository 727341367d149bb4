"""How far a retrain on another machine moves the stored results, measured: the note a training page shows.

The stored runs of a tier (``results/<tier>/<group>/``) were trained on one machine.  The same configurations
retrained under another floating-point environment (another CPU capability, oneDNN cap, thread count; see
:mod:`repro.float_env`) are stored under ``results/machines/<machine>/<tier>/<group>/`` with the same
keys, so each retrained run pairs with its stored twin.  From the pairs:

- :func:`paired_final`: each run's final accuracy (mean of the last 10 evaluated rounds) stored and retrained;
- :func:`spread`: per machine, how far the retrain moves a run (median and largest |change|, and the per-run
  spread ``std(change) / sqrt 2``: a retrain on another machine draws the run's training noise anew) beside the
  seed std of the stored runs;
- :func:`page_note`: both as a paragraph and a table for a training page;
- :func:`near_boundary`: the decided accuracy comparisons whose interval lies so close to the rule's boundary
  that a machine change could move it across: the verdicts to retrain on another machine first.

Whether a retrain flips a verdict is the scorecard's to say (:mod:`repro.scorecard`: a verdict that changes when a
retrained run replaces its stored twin is undecided).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from repro.results import RESULTS_DIR, load_group
from repro.significance import per_run_final

__all__ = [
    "MACHINES_DIR",
    "machines",
    "machine_env",
    "paired_final",
    "seed_std",
    "spread",
    "page_note",
    "largest_machine_std",
    "near_boundary",
]

#: Folder of the retrained copies: ``<MACHINES_DIR>/<machine>/<tier>/<group>/<key>.csv``.
MACHINES_DIR = RESULTS_DIR / "machines"


def machines(tier: str, group: str, machines_dir=None) -> list[str]:
    """The machines (folder names) that hold retrained runs of ``group`` at ``tier``, sorted."""
    root = Path(machines_dir if machines_dir is not None else MACHINES_DIR)
    return sorted(p.name for p in root.glob("*") if any((p / tier / group).glob("*.csv")))


def machine_env(tier: str, group: str, machine: str, machines_dir=None, short: bool = False) -> str:
    """How the machine's retrains computed floats (``repro.float_env.describe`` of its first run, the part
    that is the same for all)."""
    import json

    from repro import float_env

    root = Path(machines_dir if machines_dir is not None else MACHINES_DIR)
    first = sorted((root / machine / tier / group).glob("*.json"))[0]
    env = json.loads(first.read_text()).get("float_env")
    return float_env.short(env) if short else float_env.describe(env)


def _per_run(stored, last: int) -> pd.DataFrame:
    """Per stored run: its label columns, ``key`` and ``final`` accuracy (%)."""
    labels = [c for c in stored.meta.columns if c in stored.frame.columns and c != "key"]
    finals = per_run_final(stored.frame[["key", "round", "test_accuracy"]], last, by=["key"])
    first = stored.frame.groupby("key", sort=True)[labels].first().reset_index()
    return first.merge(finals.rename(columns={"accuracy": "final"}), on="key")


def paired_final(
    tier: str, group: str, machine: str, last: int = 10, results_dir=None, machines_dir=None
) -> pd.DataFrame:
    """One row per retrained run: its label columns, ``key``, ``stored`` and ``retrained`` final accuracy and
    ``change`` (retrained - stored), all in percentage points.  Runs of the machine with no stored twin are
    left out."""
    root = Path(machines_dir if machines_dir is not None else MACHINES_DIR)
    base = _per_run(load_group(tier, group, results_dir), last)
    again = _per_run(load_group(tier, group, root / machine), last)[["key", "final"]]
    out = base.merge(again, on="key", suffixes=("_stored", "_retrained"))
    out = out.rename(columns={"final_stored": "stored", "final_retrained": "retrained"})
    out["change"] = out["retrained"] - out["stored"]
    return out


def seed_std(per_run: pd.DataFrame, column: str = "stored") -> float:
    """The runs' spread over seeds, in the column's unit: per setting (every label column but ``seed``) the
    std over its seeds (ddof=1), pooled as the root of the mean variance over settings with two seeds or more."""
    settings = [c for c in per_run.columns if c not in ("seed", "key", "stored", "retrained", "change")]
    var = per_run.groupby(settings, sort=False)[column].var(ddof=1).dropna()
    return float(math.sqrt(var.mean())) if len(var) else math.nan


def spread(tier: str, group: str, last: int = 10, results_dir=None, machines_dir=None) -> pd.DataFrame:
    """Per machine: ``runs`` paired, ``environment``, ``median_abs`` and ``max_abs`` change (pp), ``identical``
    runs (change 0), ``machine_std`` (std of the change / sqrt 2: the per-run spread a machine change draws) and
    ``seed_std`` of every stored run of the group (:func:`seed_std`), both in pp."""
    rows = []
    for m in machines(tier, group, machines_dir):
        p = paired_final(tier, group, m, last, results_dir, machines_dir)
        if p.empty:
            continue
        if not rows:
            every = _per_run(load_group(tier, group, results_dir), last)
            seeds = seed_std(every.drop(columns="key").rename(columns={"final": "stored"}))
        rows.append(
            {
                "machine": m,
                "environment": machine_env(tier, group, m, machines_dir),
                "kernels": machine_env(tier, group, m, machines_dir, short=True),
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


def _spread_sentence(table: pd.DataFrame) -> str:
    """The largest per-run spread beside the seed std, or why none is measured (one pair per machine)."""
    if table["machine_std"].isna().all():
        return "With one retrained run per machine, no spread per run is measured yet."
    worst = table.loc[table["machine_std"].idxmax()]
    versus = (
        f", {worst['machine_std'] / worst['seed_std']:.2f} times the seed std of {worst['seed_std']:.2f} pp"
        if worst["seed_std"] == worst["seed_std"]
        else " (the group has one seed per setting here: no seed std to set beside it)"
    )
    return (
        f"The largest per-run spread a machine change drew is {worst['machine_std']:.2f} pp{versus}: one run's "
        "final accuracy moves by about that on another computer (a mean over n seeds by that over the square root "
        "of n)."
    )


def _largest_move(tier, group, table, results_dir, machines_dir) -> str:
    """One sentence naming the run a machine change moved most, with its stored and retrained accuracy."""
    machine = table.loc[table["max_abs"].idxmax(), "machine"]
    pairs = paired_final(tier, group, machine, results_dir=results_dir, machines_dir=machines_dir)
    run = pairs.loc[pairs["change"].abs().idxmax()]
    labels = ", ".join(
        f"{c} {run[c]}" for c in pairs.columns if c not in ("key", "stored", "retrained", "change", "model")
    )
    return (
        f"The largest single move: {labels}, {run['stored']:.2f} % stored and {run['retrained']:.2f} % "
        f"retrained on `{machine}`."
    )


def page_note(tier: str, group: str, results_dir=None, machines_dir=None) -> str:
    """A paragraph and a table for a training page: how far a retrain on another machine moved the runs of
    ``group``, beside their seed std (Markdown)."""
    table = spread(tier, group, results_dir=results_dir, machines_dir=machines_dir)
    if table.empty:
        text = (
            f"No run of `{group}` at tier `{tier}` has been retrained on another machine, so how far "
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
    return (
        "**Another machine.** These runs were trained on one CPU; on another CPU or a GPU floats differ in the "
        "last digits and training grows that into points. The runs below were retrained under another "
        f"floating-point environment (`results/machines/`). {_spread_sentence(table)} "
        + _largest_move(tier, group, table, results_dir, machines_dir)
        + "\n\n"
        "| retrained with | runs | median \\|Δ\\| pp | largest \\|Δ\\| pp | unchanged | spread per run, pp "
        "| seed std, pp |\n|---|---|---|---|---|---|---|\n"
        + "\n".join(rows)
        + "\n\nThe retrains: "
        + "; ".join(f"`results/machines/{r.machine}`: {r.environment}" for r in table.itertuples())
        + "."
    )


def largest_machine_std(tier: str, results_dir=None, machines_dir=None) -> float:
    """The largest per-run spread (:func:`spread`'s ``machine_std``, pp) any machine drew at ``tier`` over the
    groups it retrained; NaN where none is measured."""
    stds = [
        spread(tier, g, results_dir=results_dir, machines_dir=machines_dir)["machine_std"].max()
        for g in _measured_groups(tier, machines_dir)
    ]
    stds = [x for x in stds if x == x]
    return max(stds) if stds else math.nan


def near_boundary(judged: pd.DataFrame, machine_std: float, k: float = 2.0) -> pd.DataFrame:
    """Per accuracy comparison (measured in pp) of every decided training statement in ``judged``
    (:func:`repro.scorecard.judge`'s rows): ``room``, how far the interval's nearer edge lies inside (or, for a
    miss, outside) the rule's boundary, ``|distance| - half width`` in pp; ``shift``, how far a machine change
    moves a seed-paired mean gap over ``n`` seeds, ``sqrt 2 * machine_std / sqrt n`` (both runs of a pair
    retrained, each moving by ``machine_std``; a quantity that averages over more runs moves less, so the shift
    errs on the side of flagging); ``near`` when ``room < k * shift``: the comparisons whose runs a retrain on
    another machine should recheck.  The unit, not the quantity's wording, picks them: a gap between method means
    or a change of a gap over partitions counts as much as a final-accuracy gap; comparisons in other units
    (entropies, shares, rounds, clients) are left out: the accuracy's machine spread says nothing of them."""
    rows = []
    for r in judged.itertuples():
        if r.verdict not in ("reproduces", "does not reproduce") or r.judgement is None:
            continue
        for c in r.judgement.comparisons():
            if "] pp (" not in c.reason:  # another unit: bits, rounds, clients, a share
                continue
            if c.verdict not in ("reproduces", "does not reproduce") or not (
                c.n > 1 and math.isfinite(c.low) and math.isfinite(c.high)
            ):
                continue
            room = abs(c.distance) - (c.high - c.low) / 2
            shift = math.sqrt(2) * machine_std / math.sqrt(c.n)
            rows.append(
                {
                    "id": r.id,
                    "column": r.column,
                    "comparison": c.comparison,
                    "setting": c.setting_label,
                    "verdict": c.verdict,
                    "n": c.n,
                    "room": room,
                    "shift": shift,
                    "near": bool(room < k * shift),
                }
            )
    cols = ["id", "column", "comparison", "setting", "verdict", "n", "room", "shift", "near"]
    return pd.DataFrame(rows, columns=cols)
