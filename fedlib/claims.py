"""The paper's claims, checked: every number the book puts beside the paper's, judged at a stated tolerance.

Each function takes what a page computes (a study's DataFrame, a stored experiment's summary) and returns
:class:`Claim` rows: the paper's statement, its value, ours, the tolerance and whether the claim holds. The pages
display them (:func:`frame`) and ``tests/test_claims.py`` recomputes them with the book's parameters and asserts
them, so a change that breaks a result breaks the build.

Where our result is *expected* to differ from the paper, the claim carries ``expected=False`` and the reason
(:data:`EXPECTED_DIFFERENCES`): the test then asserts the difference and its explanation, not the paper's value.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

__all__ = ["Claim", "frame", "all_hold", "EXPECTED_DIFFERENCES", "TOLERANCES", "fig1", "table6_hnorm", "coverage",
           "fine_label_coverage", "table5", "table1_directions", "table2_signs", "faster_than_fedavg",
           "participation"]

#: Tolerances of the numeric claims (absolute, in the claim's own unit).
TOLERANCES = {
    "table6_hnorm": 0.03,  # H_norm per cell of Table VI, |ours - paper|
    "coverage_cifar10": 0.10,  # P(random subset holds every label), CIFAR-10, |ours - paper|
    "fine_label_coverage": 0.02,  # our explanation of CIFAR-100's 0 %: fine-label coverage at most this
    # Fig. 2 (participation rates): a change or extra loss in pp counts only beyond this. FedEntOpt's seed std of
    # the final accuracy is 0.7-1.1 pp at the subset tier (Table I, 5 seeds), so 2 pp is about twice it.
    "participation_pp": 2.0,
}

#: Claims we expect to miss, with the reason; keys are Claim.key values (``tier:`` prefixes for training claims).
EXPECTED_DIFFERENCES: dict[str, str] = {
    "label_coverage/CIFAR-100/zero_everywhere": (
        "Our 20-superclass federations cover all labels clearly more often than 0 %; over CIFAR-100's 100 fine "
        "labels coverage is at most 2 % (claim 'fine_labels'), so the paper's figure looks like fine-label "
        "coverage although its text names the superclasses. Our explanation, not a fact."),
    "label_coverage/CIFAR-10/K150/M7": (
        "Ours is above the paper's at M = 7 for both pools; which pool lands outside the tolerance depends on "
        "the partitions drawn (with the seed streams of fedlib.seeds it is K = 150, with the earlier numbering it "
        "was K = 200, and the other pool sits just inside). The paper does not say how many partitions it drew "
        "or how. A finding we leave open."),
    "quick:table2/C=2/FedLC": (
        "The paper's change is +0.14 pp, inside its own noise (for FedLC under #C=2 it is negative in 3 of its "
        "6 data set and model cells). On the quick tier's MNIST digits FedLC is the strongest method alone, "
        "and adding FedEntOpt costs it accuracy: a tier artefact we do not generalise."),
    "subset:table2/C=2/FedLC": (
        "The paper's change is +0.14 pp, inside its own noise. At the subset tier FedLC under #C=2 ends close to chance "
        "and below every other method at every seed, alone and with FedEntOpt (Table I page, 'What this tier "
        "can and cannot tell'), so there is no learning for the selection to improve; the paired change is far from "
        "significant. Every method starts by predicting one class for some rounds; FedLC does not leave that "
        "state, and the absent-class margin of the reference code (zero_count = 1e-8: a margin of 100 tau) looks "
        "like the cause: in a short diagnostic run (seed 2, not stored) zero_count = 1 starts learning where 1e-8 "
        "does not. A finding about FedLC's zero-count convention under #C=2, not about the selection."),
}

_SUBSET_FIG2_C2 = (
    "At the subset tier under #C=2 no method's accuracy moves beyond the seed spread between 10 % and 4 % "
    "participation: FedEntOpt -2.1 pp (paired t p = 0.09), FedAvg -1.2, FedProx -1.3, KL -1.0 pp (3 seeds). "
    "FedEntOpt starts highest (+2.6 pp over FedAvg at 10 %) and stays above FedAvg at 6 of 7 rates (0.8-2.7 pp, "
    "none significant; at 7 % FedAvg is 1.1 pp above), so it neither keeps its accuracy clearly better nor is the "
    "best at every rate. Under #C=2 each class sits on about a fifth of the clients, so a random pick sees most "
    "classes within a few rounds; the paper itself calls the difference pronounced under Dir(0.1) (where all our "
    "checks hold) and drops #C=2 on CIFAR-100 as 'nearly identical across all methods'. A finding of this tier "
    "(52 images per client; all four methods end between 25 % and 30 %).")
EXPECTED_DIFFERENCES.update({f"subset:participation/C=2/{what}": _SUBSET_FIG2_C2
                             for what in ("keeps_accuracy", "others_lose_more", "best_at_every_rate")})


@dataclass(frozen=True)
class Claim:
    """One checked claim. ``holds`` says whether our value meets the paper's claim at the tolerance."""

    key: str  # unique, stable name: "<page>/<what>"
    claim: str  # what the paper states
    paper: str  # the paper's value, as text
    ours: float  # our value
    tolerance: str  # how ours is judged against the paper
    holds: bool

    @property
    def expected(self) -> bool:
        """Whether we expect the claim to hold (False for a documented, explained difference)."""
        return self.key not in EXPECTED_DIFFERENCES

    @property
    def as_expected(self) -> bool:
        return self.holds == self.expected


def frame(claims):
    """The claims as a table for a page: claim, paper, ours, tolerance, holds, and the reason of a known gap (a
    reason that several rows share is given in the first and named by its row number in the others)."""
    import pandas as pd

    rows = [{**{k: v for k, v in asdict(c).items() if k != "key"}, "expected": c.expected,
             "note": EXPECTED_DIFFERENCES.get(c.key, "")} for c in claims]
    out = pd.DataFrame(rows, columns=["claim", "paper", "ours", "tolerance", "holds", "expected", "note"])
    out["ours"] = out["ours"].round(3)
    first = {}
    for i, note in enumerate(out["note"]):  # a reason shared by several rows is printed once
        if note and note in first:
            out.loc[i, "note"] = f"as row {first[note]}"
        first.setdefault(note, i)
    return out


def all_hold(claims) -> bool:
    """True when every claim came out as expected (holds, or misses with a documented reason)."""
    return all(c.as_expected for c in claims)


# --------------------------------------------------------------------------------------------- label-only pages

def fig1(traces, num_classes: int):
    """Fig. 1: FedEntOpt's pooled entropy above log2(C - 1) in every round; random selection below FedEntOpt.

    ``traces``: :func:`fedlib.label_studies.selector_traces` with methods named "FedEntOpt" and "Random".
    """
    threshold = math.log2(num_classes - 1)
    ours = traces[traces.method == "FedEntOpt"]
    rand = traces[traces.method == "Random"]
    share = float((ours.entropy > threshold).mean())
    gap = float(ours.entropy.mean() - rand.entropy.mean())
    return [
        Claim("entropy_trace/above_threshold", f"FedEntOpt's entropy exceeds log2({num_classes - 1}) = "
              f"{threshold:.2f} bits in every round", "every round (share 1.0)", share,
              "share of rounds, all seeds: exactly 1", share == 1.0),
        Claim("entropy_trace/random_below", "random selection stays below FedEntOpt", "FedEntOpt - random > 0",
              gap, "mean entropy difference (bits) > 0", gap > 0),
    ]


def table6_hnorm(table):
    """Table VI: H_norm in every cell within :data:`TOLERANCES` of the paper; H_norm rises with Q per setting.

    ``table``: one row per (dataset, partition, buffer_pct) with ``hnorm_mean`` and ``paper_hnorm_mean``.
    """
    tol = TOLERANCES["table6_hnorm"]
    out = []
    for _, r in table.sort_values(["dataset", "partition", "buffer_pct"]).iterrows():
        diff = float(r["hnorm_mean"] - r["paper_hnorm_mean"])
        out.append(Claim(f"buffer_diversity/{r['dataset']}/{r['partition']}/Q{int(r['buffer_pct'])}",
                         f"H_norm, {r['dataset']} {r['partition']}, Q = {int(r['buffer_pct'])} % of K",
                         f"{r['paper_hnorm_mean']:.3f}", float(r["hnorm_mean"]), f"|ours - paper| <= {tol}",
                         abs(diff) <= tol))
    for (ds, part), sub in table.sort_values("buffer_pct").groupby(["dataset", "partition"]):
        steps = np.diff(sub["hnorm_mean"].to_numpy())
        if steps.size == 0:
            continue
        out.append(Claim(f"buffer_diversity/{ds}/{part}/rises", f"H_norm rises with Q, {ds} {part}",
                         "rises at every step", float(steps.min()), "smallest step > 0", bool(np.all(steps > 0))))
    return out


def coverage(table):
    """§V-B5: P(random subset holds every label) beside the paper's (v1) at the cells it states.

    ``table``: one row per (dataset, num_clients, num_selected) with ``random_coverage`` and
    ``paper_probability`` (NaN where the paper gives none). Each stated cell must be within the tolerance, except
    for a data set the paper gives as 0 % in every case (CIFAR-100): that is one claim, "0 % everywhere", judged
    on our largest cell and expected to miss (see :func:`fine_label_coverage` for our explanation).
    """
    tol = TOLERANCES["coverage_cifar10"]
    out = []
    stated = table.dropna(subset=["paper_probability"])
    for dataset, sub in stated.groupby("dataset", sort=False):
        if (sub["paper_probability"] == 0).all():
            worst = float(sub["random_coverage"].max())
            out.append(Claim(f"label_coverage/{dataset}/zero_everywhere", f"P(random subset covers all labels), "
                             f"{dataset}: 0 % for every K and M", "0.00 in every case", worst,
                             f"largest of our cells <= {tol}", worst <= tol))
            continue
        for _, r in sub.iterrows():
            diff = float(r["random_coverage"] - r["paper_probability"])
            out.append(Claim(f"label_coverage/{dataset}/K{int(r['num_clients'])}/M{int(r['num_selected'])}",
                             f"P(random subset covers all labels), {dataset}, K = {int(r['num_clients'])}, "
                             f"M = {int(r['num_selected'])}", f"{r['paper_probability']:.2f}",
                             float(r["random_coverage"]), f"|ours - paper| <= {tol}", abs(diff) <= tol))
    return out


def fine_label_coverage(fine_means):
    """Our explanation of the paper's 0 % for CIFAR-100: over its 100 fine labels, coverage is at most 2 %."""
    tol = TOLERANCES["fine_label_coverage"]
    worst = float(fine_means["random_coverage"].max())
    return [Claim("label_coverage/CIFAR-100/fine_labels", "CIFAR-100: P(random subset covers all labels) is 0 % "
                  "(our reading: over the 100 fine labels)", "0.00 in every case", worst,
                  f"largest over all cells <= {tol}", worst <= tol)]


def table5(table, rebuilt_params, decimals: int = 3):
    """Table V: the label upload (4CK bytes) equals the printed MB in every row; the nominal parameter counts
    (:func:`fedlib.communication.paper_count_reconstruction`) reproduce every printed model size; one model
    upload costs more than all label counts together in every row.
    """
    labels_equal = np.isclose(table["labels_mb"].to_numpy(), table["paper_labels_mb"].to_numpy(), rtol=0, atol=5e-5)
    printed = np.round(table["paper_model_mb"].to_numpy(), decimals)
    rebuilt = np.round(4 * np.asarray(rebuilt_params, dtype=float) / 1e6, decimals)
    ratio = table["ratio"].to_numpy()
    return [
        Claim("communication_cost/labels", "label upload 4CK bytes, as printed", f"{len(table)} rows",
              float(labels_equal.sum()), "rows equal at the printed precision: all", bool(labels_equal.all())),
        Claim("communication_cost/model_sizes", "model sizes as printed (nominal parameter counts)",
              f"{len(table)} rows", float((printed == rebuilt).sum()), "rows equal at 3 decimals: all",
              bool(np.all(printed == rebuilt))),
        Claim("communication_cost/ratio", "one model upload costs more than all label counts", "ratio > 1",
              float(ratio.min()), "smallest ratio > 1", bool(ratio.min() > 1)),
    ]


# ---------------------------------------------------------------------------------------------- training pages

def table1_directions(summary, tier: str):
    """Table I: FedEntOpt above FedAvg in each partition (the paper: in every setting).

    ``summary``: :func:`fedlib.reporting.table1_summary` (ours_mean, paper_mean per partition and method).
    """
    out = []
    for part, sub in summary.groupby("partition"):
        sub = sub.set_index("method")
        if not {"FedEntOpt", "FedAvg"} <= set(sub.index):
            continue
        ours = float(sub.loc["FedEntOpt", "ours_mean"] - sub.loc["FedAvg", "ours_mean"])
        theirs = float(sub.loc["FedEntOpt", "paper_mean"] - sub.loc["FedAvg", "paper_mean"])
        out.append(Claim(f"{tier}:table1/{part}/fedentopt_over_fedavg", f"FedEntOpt - FedAvg > 0, {part}",
                         f"{theirs:+.2f} pp", ours, "ours > 0 pp", ours > 0))
    return out


def table2_signs(summary, tier: str):
    """Table II: adding FedEntOpt to a baseline changes its accuracy in the direction the paper reports.

    ``summary``: :func:`fedlib.reporting.table2_summary` (ours_change, paper_change per partition and baseline).
    """
    out = []
    for _, r in summary.dropna(subset=["paper_change"]).iterrows():
        same = np.sign(r["ours_change"]) == np.sign(r["paper_change"])
        out.append(Claim(f"{tier}:table2/{r['partition']}/{r['baseline']}", f"FedEntOpt+{r['baseline']} - "
                         f"{r['baseline']}, {r['partition']}", f"{r['paper_change']:+.2f} pp",
                         float(r["ours_change"]), "same sign as the paper", bool(same)))
    return out


def faster_than_fedavg(to_fedavg, tier: str):
    """§V-B1: FedEntOpt "reaches a given target accuracy significantly faster than competing methods"; here: it
    reaches FedAvg's final accuracy in fewer rounds than FedAvg does (speed-up > 1), per partition.

    ``to_fedavg``: :func:`fedlib.significance.rounds_to_reference` with reference ``"FedAvg"``.
    """
    out = []
    for part, sub in to_fedavg.groupby("partition", sort=False):
        fe = sub[sub["method"] == "FedEntOpt"]
        if fe.empty:
            continue
        speedup = float(fe["speedup"].iloc[0])
        out.append(Claim(f"{tier}:accuracy_curves/{part}/faster_than_fedavg",
                         f"FedEntOpt reaches FedAvg's final accuracy sooner, {part}", "faster (no number)",
                         speedup, "speed-up > 1 (NaN: never reached)", bool(speedup > 1)))
    return out


def _settings(change, split: str):
    """(label, rows) per setting of a rate_change table, the setting's columns without ``split``; a label names
    the columns that take more than one value (plus ``split``'s value by the caller)."""
    keys = [c for c in change.columns[:list(change.columns).index("method")] if c != split]
    varying = [c for c in keys if change[c].nunique() > 1]
    groups = change.groupby(keys, sort=False) if keys else [((), change)]
    for key, sub in groups:
        key = dict(zip(keys, key if isinstance(key, tuple) else (key,)))
        yield "".join(f"{key[c]}/" for c in varying), sub


def participation(change, tier: str, reference: str = "FedEntOpt"):
    """§V-B3 / Fig. 2: "FedEntOpt consistently maintains high accuracy, even with lower participation rates
    regardless of the model size, while the other methods partially suffer performance degradation. [...] The
    difference in classification accuracy is particularly pronounced in the challenging Dir(0.1) case."  The paper
    gives Fig. 2 without numbers; per setting (partition, and model or data set where they vary), with ``tol`` =
    ``TOLERANCES["participation_pp"]``:

    - ``keeps_accuracy``: the reference's change from the highest to the lowest rate is no drop larger than tol;
    - ``others_lose_more``: some other method loses more than tol pp more than the reference between those rates;
    - ``best_at_every_rate``: the reference has the highest mean at every rate (what the paper's "default
      choice" rests on);
    - and across partitions, ``dir_more_pronounced``: the reference's mean gap to the other methods (over rates)
      is larger under Dir(0.1) than under C=2.

    ``change``: :func:`fedlib.participation.rate_change`.  A setting where fewer than two seeds have every method
    and rate gives no claim: one seed cannot tell a drop from noise.
    """
    tol, out = TOLERANCES["participation_pp"], []
    for label, setting in _settings(change, "partition"):
        gaps = {}
        for part, sub in setting.groupby("partition", sort=False):
            ref, others = sub[sub["method"] == reference], sub[sub["method"] != reference]
            if ref.empty or ref["n"].iloc[0] < 2:
                continue
            r, key = ref.iloc[0], f"{tier}:participation/{label}{part}"
            span = f"{r['high']:g} % to {r['low']:g} %, {label}{part}"
            out.append(Claim(f"{key}/keeps_accuracy", f"{reference} keeps its accuracy from {span}",
                             "maintains (no number)", float(r["change"]), f"change >= -{tol:g} pp",
                             bool(r["change"] >= -tol)))
            if others.empty:
                continue
            worst = others.loc[others["extra_loss"].idxmax()]
            out += [
                Claim(f"{key}/others_lose_more", f"another method loses more than {reference} from {span} (most: "
                      f"{worst['method']}, paired t p = {worst['p_extra_loss']:.2f})", "others partially degrade",
                      float(worst["extra_loss"]), f"largest extra loss > {tol:g} pp", bool(worst["extra_loss"] > tol)),
                Claim(f"{key}/best_at_every_rate", f"{reference} has the highest mean at every rate, {label}{part}",
                      "Fig. 2 (no numbers)", float(r["best_at"]), f"best at all {int(r['rates'])} rates",
                      bool(r["best_at"] == r["rates"])),
            ]
            gaps[part] = float(others["gap"].mean())
        if {"Dir(0.1)", "C=2"} <= set(gaps):
            diff = gaps["Dir(0.1)"] - gaps["C=2"]
            out.append(Claim(f"{tier}:participation/{label}dir_more_pronounced", f"{reference}'s mean gap to the "
                             f"other methods is larger under Dir(0.1) than under C=2"
                             + (f", {label.rstrip('/')}" if label else ""),
                             "particularly pronounced in Dir(0.1)", diff, "Dir(0.1) gap - C=2 gap > 0 pp", diff > 0))
    return out
