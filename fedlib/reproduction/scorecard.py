"""The scorecard: every checkable statement of the paper, the claims that judge it, and one verdict per tier.

:data:`STATEMENTS` is the inventory (data, one frozen :class:`Statement` per sentence, table-cell group or figure
reading with a number or a comparison: the abstract, §IV, §V and §VI of v2, and v1's large pools that the book
shows).  Each names the book page that tests it and the patterns of the :class:`fedlib.reproduction.claims.Claim` keys
that
judge it (without the ``tier:`` prefix of training claims).  A statement with no claim at a tier gets "needs the
paper tier" there: nothing checkable is left out silently.

:func:`all_claims` computes every claim once: the label-only pages' claims at the parameters the book runs them
with (:func:`book_parameters`; they run at the paper's scale in every tier) and the training pages' claims from the
stored runs of each tier (:data:`fedlib.reproduction.machine_spread.STORED_CLAIMS`), where a verdict that flips when the
runs
are retrained on another machine (:func:`fedlib.reproduction.machine_spread.verdicts`) becomes "undecided".
:func:`scorecard`
folds them into one row per statement; the scorecard page and ``tests/test_scorecard.py`` call the same functions,
so the page, the tests and the other pages cannot disagree.

A statement's verdict at a tier: "does not reproduce" if one of its claims does not, else "undecided" if one is
undecided, else "reproduces"; with no claim, "needs the paper tier".  Its overall verdict is the one at the highest
tier that judged it (paper, then subset, then quick).
"""

from __future__ import annotations

import ast
import functools
import json
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

import pandas as pd

from fedlib.reproduction import claims, label_tables, machine_spread
from fedlib.reproduction.results import load_group

__all__ = [
    "Statement",
    "STATEMENTS",
    "EVIDENCE_CLAIMS",
    "TIERS",
    "book_parameters",
    "label_claims",
    "training_claims",
    "all_claims",
    "statement_claims",
    "scorecard",
    "counts",
    "to_html",
    "table_html",
    "sections",
    "page_card",
    "page_verdicts",
]

ROOT = Path(__file__).resolve().parents[2]
#: The columns of :func:`all_claims`, one row per (tier, claim).
CLAIM_COLUMNS = (
    "tier",
    "page",
    "key",
    "name",
    "claim",
    "paper",
    "ours",
    "tolerance",
    "verdict",
    "flips",
    "expected",
    "note",
)
#: The tiers of the scorecard's columns, lowest first.
TIERS = ("quick", "subset", "paper")
NEEDS_PAPER = "needs the paper tier"
NOT_JUDGED = ""  # a tier column where no claim of the statement was computed
NOT_AT_TIER = "not judged at this tier"


@dataclass(frozen=True)
class Statement:
    """One checkable statement of the paper."""

    key: str  # stable: "<section>/<what>"
    section: str  # where the paper states it
    words: str  # the paper's words, quoted ("..." for a cut, [ ] for our insertion; a "Table" section paraphrases)
    paper: str  # the paper's value, as text
    page: str  # the book page (runs.yaml name) that tests it; "" for none
    claims: tuple[str, ...] = ()  # fnmatch patterns of the Claim keys (without "tier:") that judge it
    label_only: bool = False  # judged by a label-only page: the same at every tier (the paper's scale)


def _s(key, section, words, paper, page="", claims=(), label_only=False):
    return Statement(key, section, words, paper, page, tuple(claims), label_only)


#: Claims that are our evidence for an expected difference, not statements of the paper.
EVIDENCE_CLAIMS = ("label_coverage/CIFAR-100/fine_labels", "communication_cost/model_sizes")

#: The inventory of the paper's checkable statements (v2 unless the section says v1).
STATEMENTS: tuple[Statement, ...] = (
    # ------------------------------------------------------------------ abstract
    _s(
        "abstract/outperforms",
        "Abstract",
        "the proposed method outperforms several state-of-the-art algorithms",
        "best in Table I",
        "table1",
        ["table1/*/best"],
    ),
    _s(
        "abstract/up_to_6pct",
        "Abstract",
        "by up to 6% in classification accuracy under standard settings regardless of the model size",
        "+6.19 pp (LeNet-5, CIFAR-10, Dir(0.1))",
        "table1",
    ),
    _s(
        "abstract/over_30pct",
        "Abstract",
        "while achieving gains of over 30% in scenarios with low participation rates and client dropout",
        "+33.64 pp (dropout, Dir(0.1))",
        "availability",
    ),
    _s(
        "abstract/combined_40pct",
        "Abstract",
        "FedEntOpt offers the flexibility to be combined with existing "
        "algorithms, enhancing their classification accuracy by more than 40%",
        "+41.16 pp (FedNova, Dir(0.1))",
        "table2",
    ),
    _s(
        "abstract/dp_unaffected",
        "Abstract",
        "its performance remains unaffected even when differential privacy is applied",
        "|DP - non-DP| <= 0.95 pp",
        "table1",
        ["table1/*/dp_matches"],
    ),
    # ------------------------------------------------------------------ §IV, Fig. 1
    _s(
        "IV/fig1_above_threshold",
        "§IV, Fig. 1",
        "for C = 10, FedEntOpt consistently exceeds log2(9) ≈ 3.17",
        "every round",
        "entropy_trace",
        ["entropy_trace/above_threshold"],
        True,
    ),
    _s(
        "IV/fig1_above_random",
        "§IV, Fig. 1",
        "[FedEntOpt] consistently achieves the highest entropy ... compared "
        "to both random selection [and the re-selection method]",
        "above random",
        "entropy_trace",
        ["entropy_trace/above_random_every_round", "entropy_trace/random_below"],
        True,
    ),
    _s(
        "IV/fig1_low_variance",
        "§IV, Fig. 1",
        "with low variance throughout training",
        "low variance",
        "entropy_trace",
        ["entropy_trace/low_variance"],
        True,
    ),
    _s(
        "IV/fig1_above_reselection",
        "§IV, Fig. 1",
        "[FedEntOpt] consistently achieves the highest entropy ... "
        "compared to both random selection and the re-selection method",
        "above FedEntropy",
        "fedentropy_entropy",
        ["fedentropy_entropy/fedentopt_above_reselection"],
    ),
    _s(
        "IV/random_above_reselection",
        "§IV",
        "random selection tends to have a higher average entropy compared to the re-selection approach",
        "random above FedEntropy",
        "fedentropy_entropy",
        ["fedentropy_entropy/random_above_reselection"],
    ),
    _s(
        "IV/reselection_below_fedavg",
        "§IV",
        "the global model performance of the re-selection method is worse than that of FedAvg",
        "FedEntropy below FedAvg",
        "fedentropy_entropy",
        ["fedentropy_entropy/fedavg_above_reselection"],
    ),
    # ------------------------------------------------------------------ §V, set-up
    _s(
        "V/consistently_outperforms",
        "§V",
        "Under the label skew setting, FedEntOpt consistently outperforms the "
        "other state-of-the-art algorithms in terms of classification accuracy",
        "best in Table I",
        "table1",
        ["table1/*/best"],
    ),
    _s(
        "V-A5/buffer_choice",
        "§V-A5",
        "We find that Q = 50% performs the best for distribution-based "
        "partitioning, while Q = 70% is optimal for quantity-based partitioning",
        "Q = 50 % / 70 %",
        "",
    ),
    _s(
        "V-A5/fedprox_mu",
        "§V-A5",
        "For both partitioning strategies, the optimal value is found to be μ = 0.0001",
        "μ = 0.0001",
        "",
    ),
    # ------------------------------------------------------------------ §V-B1, Table I
    _s(
        "V-B1/best_every_setting",
        "§V-B1, Table I",
        "Our method consistently achieves higher classification accuracy across all datasets and partitions",
        "best in 11 of 12 settings (bold)",
        "table1",
        ["table1/*/best"],
    ),
    _s(
        "V-B1/lenet_cifar10_dir_6pct",
        "§V-B1",
        "the most gain, exceeding 6% compared to the second-best "
        "algorithm, is observed on the CIFAR-10 dataset for Dir(0.1)",
        "+6.19 pp over FedAvg",
        "table1",
    ),
    _s(
        "V-B1/lenet_1_3pp",
        "§V-B1",
        "More moderate but still consistent gains of around 1–3 percentage points are seen on CINIC-10 and CIFAR-100",
        "+0.51 to +2.27 pp",
        "table1",
    ),
    _s(
        "V-B1/fedconcat_under",
        "§V-B1",
        "FedConcat consistently underperformed",
        "6.7–24.5 % (LeNet-5)",
        "table1",
        ["table1/*/fedconcat_below_fedavg"],
    ),
    _s(
        "V-B1/kl_low",
        "§V-B1",
        "KL converges at a low accuracy",
        "17.9–34.8 % (LeNet-5)",
        "table1",
        ["table1/*/kl_below_fedavg"],
    ),
    _s(
        "V-B1/fednova_scaffold_dir",
        "§V-B1",
        "FedNova and SCAFFOLD ... suffer from low classification accuracy, especially in the case of Dir(0.1)",
        "10.0–14.1 % (CIFAR-10, Dir(0.1))",
        "table1",
        ["table1/Dir(0.1)/fednova_below_fedavg", "table1/Dir(0.1)/scaffold_below_fedavg"],
    ),
    _s(
        "V-B1/vgg_margins",
        "§V-B1",
        "On CIFAR-100 under Dir(0.1), FedEntOpt outperforms the best baseline by "
        "about 3 percentage points, while on the other datasets it exceeds the best baseline by approximately "
        "1–2 percentage points",
        "VGG-11: +2.84 pp; -0.85 to +2.02 pp",
        "table1",
    ),
    _s(
        "V-B1/vgg_fedconcat",
        "§V-B1",
        "FedConcat again underperforms ... even more pronounced for the larger VGG-11 architecture",
        "chance level (VGG-11)",
        "table1",
    ),
    _s(
        "V-B1/vgg_fednova_scaffold",
        "§V-B1",
        "In contrast to the LeNet-5 architecture, FedNova and SCAFFOLD perform significantly better",
        "VGG-11 rows",
        "table1",
    ),
    _s(
        "V-B1/faster",
        "§V-B1",
        "FedEntOpt ... reaches a given target accuracy significantly faster than competing methods",
        "faster (no number)",
        "accuracy_curves",
        ["accuracy_curves/*/faster_than_every_method"],
    ),
    _s(
        "V-B1/table1_cells",
        "Table I",
        "Table I: mean test accuracy (%) of 10 methods in 12 settings",
        "120 cells",
        "table1",
    ),
    # ------------------------------------------------------------------ §V-B2, differential privacy
    _s(
        "V-B2/dp_matches",
        "§V-B2, Table I",
        "FedEntOpt manages to maintain the same high classification "
        "accuracy, matching the performance of the non-private variant",
        "|DP - non-DP| <= 0.95 pp",
        "table1",
        ["table1/*/dp_matches"],
    ),
    _s(
        "V-B2/dp_sometimes_higher",
        "§V-B2",
        "in some cases the performance is even increased",
        "DP above in 7 of 12 settings",
        "table1",
        ["table1/dp_sometimes_higher"],
    ),
    _s(
        "V-B2/dp_above_baselines",
        "§V-B2",
        "the proposed method outperforms several baseline algorithms even "
        "under strong privacy guarantees regardless of the model architecture",
        "FedEntOpt (DP) column",
        "table1",
        ["table1/*/dp_above_baselines"],
    ),
    # ------------------------------------------------------------------ §V-B3, Fig. 2
    _s(
        "V-B3/keeps_accuracy",
        "§V-B3, Fig. 2",
        "FedEntOpt consistently maintains high accuracy, even with lower "
        "participation rates regardless of the model size",
        "maintains (no number)",
        "participation",
        ["participation/*/keeps_accuracy"],
    ),
    _s(
        "V-B3/others_degrade",
        "§V-B3, Fig. 2",
        "while the other methods partially suffer performance degradation",
        "others degrade",
        "participation",
        ["participation/*/others_lose_more"],
    ),
    _s(
        "V-B3/dir_pronounced",
        "§V-B3, Fig. 2",
        "The difference in classification accuracy is particularly pronounced in the challenging Dir(0.1) case",
        "Dir(0.1) gap > C=2 gap",
        "participation",
        ["participation/dir_more_pronounced"],
    ),
    _s(
        "V-B3/default_choice",
        "§V-B3, Fig. 2",
        "making FedEntOpt the default choice to effectively handle both label skew and low participation scenarios",
        "best at every rate",
        "participation",
        ["participation/*/best_at_every_rate"],
    ),
    _s(
        "V-B3/vgg_and_cifar100",
        "§V-B3, Fig. 2",
        "regardless of the model size [Fig. 2's VGG-11 and CIFAR-100 panels]",
        "Fig. 2 upper row, CIFAR-100",
        "participation",
    ),
    _s(
        "V-B3/cifar100_c2_identical",
        "§V-B3",
        "For C = 2 on CIFAR-100, the results are excluded as they are nearly identical across all methods",
        "nearly identical",
        "participation",
    ),
    # ------------------------------------------------------------------ §V-B4, Table II
    _s(
        "V-B4/dir_increases",
        "§V-B4, Table II",
        "Especially in the case of distribution-based imbalances, the classification accuracy increases significantly",
        "+7.31 to +41.16 pp (LeNet-5, CIFAR-10)",
        "table2",
        ["table2/Dir(0.1)/*"],
    ),
    _s(
        "V-B4/c2_modest",
        "§V-B4, Table II",
        "Even under the simpler C = 2 partition, FedEntOpt still yields modest improvements",
        "+0.14 to +20.16 pp (LeNet-5, CIFAR-10)",
        "table2",
        ["table2/C=2/*"],
    ),
    _s(
        "V-B4/over_40_and_13",
        "§V-B4",
        "by more than 40% for LeNet-5, while VGG-11 also sees substantial gains of over 13%",
        "+41.16 / +13.87 pp",
        "table2",
    ),
    _s("V-B4/other_cells", "Table II", "Table II: the CINIC-10, CIFAR-100 and VGG-11 cells", "50 cells", "table2"),
    # ------------------------------------------------------------------ §V-B5, Table III
    _s(
        "V-B5/dropout_best",
        "§V-B5, Table III",
        "FedEntOpt consistently outperforms FedAvg and FedProx across all tested scenarios [dropout]",
        "bold in every row",
        "availability",
        ["availability/Dropout/*"],
    ),
    _s(
        "V-B5/straggling_best",
        "§V-B5, Table III",
        "FedEntOpt consistently outperforms FedAvg and FedProx across all tested scenarios [straggling]",
        "bold in every row (one tie)",
        "availability",
        ["availability/Straggling/*"],
    ),
    _s(
        "V-B5/over_30_and_8",
        "§V-B5",
        "enhancing classification accuracy by over 30% under dropout and up to 8% in straggling conditions",
        "+33.64 / +7.44 pp",
        "availability",
    ),
    _s(
        "V-B5/unaffected",
        "§V-B5",
        "FedEntOpt does not seem to be affected under this setup, maintaining "
        "performance comparable to the baseline case according to Table I",
        "Table III vs Table I",
        "availability",
    ),
    # ------------------------------------------------------------------ §V-C, Table IV
    _s(
        "V-C/best_medical",
        "§V-C, Table IV",
        "FedEntOpt consistently achieves the highest classification accuracy",
        "best in 6 of 6",
        "",
    ),
    _s(
        "V-C/scaffold_second",
        "§V-C, Table IV",
        "SCAFFOLD is the second-best performing method, its accuracy is consistently 2–6 percentage points lower",
        "2.1–6.0 pp",
        "",
    ),
    # ------------------------------------------------------------------ §V-D, Table V
    _s(
        "V-D/labels_4ck",
        "§V-D, Table V",
        "sending the label count vector costs 4C bytes per client, which amounts to 4CK bytes in aggregate",
        "Labels column",
        "communication_cost",
        ["communication_cost/labels"],
        True,
    ),
    _s(
        "V-D/model_sizes",
        "Table V",
        "Model (MB): the per-round upload of one client's model parameters, 4p bytes",
        "Model column",
        "communication_cost",
        ["communication_cost/fedlib_model_sizes"],
        True,
    ),
    _s(
        "V-D/orders_of_magnitude",
        "§V-D, Table V",
        "sending label counts from all K clients is several orders of "
        "magnitude cheaper than uploading model parameters of a single client model",
        "30.88× to 7.494e4×",
        "communication_cost",
        ["communication_cost/orders_of_magnitude"],
        True,
    ),
    # ------------------------------------------------------------------ §V-E, Table VI
    _s(
        "V-E/hnorm_cells",
        "Table VI",
        "normalized selection entropy H_norm [mean ± std over 3 seeds]",
        "16 cells",
        "buffer_diversity",
        ["buffer_diversity/*/*/Q*", "buffer_diversity/no_offset"],
        True,
    ),
    _s(
        "V-E/hnorm_rises",
        "§V-E",
        "increasing the buffer size consistently raised the normalized entropy score",
        "rises at every step",
        "buffer_diversity",
        ["buffer_diversity/*/*/rises"],
        True,
    ),
    _s(
        "V-E/every_client",
        "§V-E",
        "Note that in all settings, every client was selected at least once",
        "every client",
        "buffer_diversity",
        ["buffer_diversity/*/*/every_client_picked"],
        True,
    ),
    _s(
        "V-E/c2_accuracy_rises",
        "§V-E, Table VI",
        "for C = 2 ... larger buffer sizes consistently improve performance",
        "49.34 → 53.82 % (CIFAR-10)",
        "buffer_accuracy",
        ["buffer_accuracy/C=2/rises"],
    ),
    _s(
        "V-E/dir_accuracy_degrades",
        "§V-E, Table VI",
        "Under Dir(0.1) ... Larger buffer size excludes these clients, degrading the global model performance",
        "-0.28 pp at Q = 75 % (CIFAR-10)",
        "buffer_accuracy",
        ["buffer_accuracy/Dir(0.1)/largest_degrades"],
    ),
    _s(
        "V-E/q0_worst",
        "Table VI",
        "accuracy column: Q = 0 is the lowest in all four settings",
        "lowest in 4 of 4",
        "buffer_accuracy",
        ["buffer_accuracy/*/q0_worst"],
    ),
    _s("V-E/accuracy_cells", "Table VI", "mean test accuracy (%) of FedEntOpt per Q", "16 cells", "buffer_accuracy"),
    # ------------------------------------------------------------------ §VI
    _s(
        "VI/dp_robust",
        "§VI",
        "our results indicate robustness to moderate differential privacy noise",
        "DP matches non-DP",
        "table1",
        ["table1/*/dp_matches"],
    ),
    _s(
        "VI/buffer_mitigates_adversaries",
        "§VI",
        "limited participation and a larger buffer size could reduce any single adversarial client's influence",
        "no number",
        "lying_clients",
        ["lying_clients/*/buffer_reduces_liar_share"],
        label_only=True,
    ),
    # ------------------------------------------------------------------ v1 §V-B5, large pools
    _s(
        "v1/coverage_cifar10",
        "v1 §V-B5",
        "the probability of achieving full label coverage is 65% for subsets "
        "of 7 clients and decreases to 7% for subsets of 3 clients. In the setup with 200 clients, the probability "
        "ranges from 59% to 5%",
        "0.65, 0.07; 0.59, 0.05",
        "label_coverage",
        ["label_coverage/CIFAR-10/*"],
        True,
    ),
    _s(
        "v1/coverage_cifar100",
        "v1 §V-B5",
        "For CIFAR-100, the probability of full label coverage is 0% in all cases",
        "0 %",
        "label_coverage",
        ["label_coverage/CIFAR-100/zero_everywhere"],
        True,
    ),
    _s(
        "v1/large_pools_robust",
        "v1 §V-B5, Fig. 4",
        "FedEntOpt is robust against performance degradation, even "
        "in cases where many baseline algorithms fail to learn",
        "above FedAvg (no numbers)",
        "large_pools",
        ["large_pools/*"],
    ),
    _s(
        "v1/fedconcat_fails",
        "v1 §V-B5",
        "FedConcat is excluded, as it failed to learn anything in this case",
        "chance level",
        "large_pools",
    ),
)


# ----------------------------------------------------------------------------------------------- the claims


def book_parameters(name: str, smoke: bool = False) -> dict:
    """The parameters of page ``name`` as the book runs it: the notebook's defaults updated by its runs.yaml entry
    (and by its ``smoke`` overrides when ``smoke``)."""
    import yaml

    entry = next(r for r in yaml.safe_load((ROOT / "runs.yaml").read_text())["runs"] if r["name"] == name)
    nb = json.loads((ROOT / entry["notebook"]).read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))
    values = {}
    for node in ast.parse("".join(cell["source"])).body:
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        values[target.id] = ast.literal_eval(node.value)
    values.update(entry.get("parameters", {}))
    if smoke:
        values.update(entry.get("smoke", {}))
    return values


def _fig1(p):
    from fedlib.data.profiles import get_profile

    traces = label_tables.fig1_traces(
        p["profile"],
        p["partition"],
        num_clients=p["num_clients"],
        num_selected=p["num_selected"],
        num_rounds=p["num_rounds"],
        seeds=p["seeds"],
        buffer_fraction=p["buffer_fraction"],
        dc_num_random=p["dc_num_random"],
        dc_target=p["dc_target"],
    )
    return claims.fig1(traces, get_profile(p["profile"]).num_classes)


def _table6(p):
    table, _, _ = label_tables.table6(
        p["profiles"],
        p["dataset_names"],
        p["partitions"],
        buffer_fractions=p["buffer_fractions"],
        num_clients=p["num_clients"],
        num_selected=p["num_selected"],
        num_rounds=p["num_rounds"],
        seeds=p["seeds"],
    )
    return claims.table6_hnorm(table)


def coverage_common(p) -> dict:
    """The keyword arguments of the coverage page's studies."""
    keys = ("pool_sizes", "subset_sizes", "num_rounds", "seeds", "beta", "buffer_fraction", "max_redraws")
    return {k: p[k] for k in keys}


def _coverage(p):
    common = coverage_common(p)
    table = label_tables.coverage_table(p["profiles"], p["dataset_names"], **common)
    fine = label_tables.fine_coverage(p["fine_classes"], p["fine_per_class"], **common)
    return claims.coverage(table) + claims.fine_label_coverage(fine)


def _table5(p):
    from fedlib.reproduction.communication import paper_count_reconstruction, table_v

    table = table_v()
    rebuilt = [paper_count_reconstruction(m, c) for m, c in zip(table["model"], table["C"])]
    return claims.table5(table, rebuilt, p["decimals"])


def lying_study(p) -> pd.DataFrame:
    """The lying-clients page's label-only runs of one uniform liar without a defence (the rows the §VI claim
    reads), at the page's parameters."""
    from fedlib.label_only.adversarial import LiarSpec, share_table

    return share_table(
        p["profile"],
        p["partitions"],
        threats={"uniform": LiarSpec(1, "uniform", p["inflation"], "honest")},
        defences={"none": {}},
        num_clients=p["num_clients"],
        num_selected=p["num_selected"],
        num_rounds=p["num_rounds"],
        buffer_sizes=p["buffer_sizes"],
        seeds=p["seeds"],
    )


def _lying(p):
    return claims.adversary_buffer(lying_study(p))


#: label-only page -> its claims from the page's parameters.
LABEL_PAGES = {
    "entropy_trace": _fig1,
    "buffer_diversity": _table6,
    "label_coverage": _coverage,
    "communication_cost": _table5,
    "lying_clients": _lying,
}


@functools.lru_cache(maxsize=2)
def label_claims(smoke: bool = False) -> tuple[tuple[str, object], ...]:
    """(page, Claim) for every label-only page at the book's parameters (``smoke``: the pages' smoke ones);
    computed once per process (the claims are frozen)."""
    return tuple((page, c) for page, judge in LABEL_PAGES.items() for c in judge(book_parameters(page, smoke)))


def training_claims(tier: str, results_dir=None, machines_dir=None) -> list[tuple[str, object, bool]]:
    """(page, Claim, flips) for every training page with stored runs at ``tier``; ``flips``: the verdict changes
    when the runs are retrained on another machine (:func:`fedlib.reproduction.machine_spread.verdicts`)."""
    out = []
    for page, (group, _, _) in machine_spread.STORED_CLAIMS.items():
        if load_group(tier, group, results_dir).empty:
            continue
        found = machine_spread.claims_at(tier, page, results_dir)
        v = machine_spread.verdicts(tier, page, results_dir, machines_dir)
        flips = dict(zip(v["key"], v["flips"])) if len(v) else {}
        out += [(page, c, bool(flips.get(c.key, False))) for c in found]
    return out


def all_claims(tiers=TIERS, smoke: bool = False, results_dir=None, machines_dir=None) -> pd.DataFrame:
    """Every claim: one row per (tier, claim) with ``tier`` ("label" for the label-only pages), ``page``,
    ``key``, ``name`` (the key without its tier), ``claim``, ``paper``, ``ours``, ``tolerance``, ``verdict`` (a
    verdict that flips with the machine is "undecided"), ``flips``, ``expected`` (the documented verdict,
    :func:`fedlib.reproduction.claims.expected_verdict`) and ``note``."""
    rows = [("label", page, c, False) for page, c in label_claims(smoke)]
    for tier in tiers:
        rows += [(tier, page, c, flips) for page, c, flips in training_claims(tier, results_dir, machines_dir)]
    return _claim_rows(rows)


def _claim_rows(rows) -> pd.DataFrame:
    """(tier, page, Claim, flips) tuples as :func:`all_claims` gives them."""
    return pd.DataFrame(
        [
            {
                "tier": t,
                "page": page,
                "key": c.key,
                "name": c.key.split(":", 1)[-1],
                "claim": c.claim,
                "paper": c.paper,
                "ours": c.ours,
                "tolerance": c.tolerance,
                "verdict": "undecided" if flips else c.verdict,
                "flips": flips,
                "expected": claims.expected_verdict(c.key),
                "note": claims.why(c.key),
            }
            for t, page, c, flips in rows
        ],
        columns=list(CLAIM_COLUMNS),
    )


# ----------------------------------------------------------------------------------------------- the card


def statement_claims(statement: Statement, found: pd.DataFrame, tier: str) -> pd.DataFrame:
    """The rows of :func:`all_claims` that judge ``statement`` at ``tier`` (label-only: the "label" rows)."""
    rows = found[found["tier"] == ("label" if statement.label_only else tier)]
    hit = rows["name"].map(lambda n: any(fnmatchcase(n, p) for p in statement.claims))
    return rows[hit]


def _fold(rows: pd.DataFrame) -> tuple[str, str]:
    """(verdict, ours as text) of a statement from its claims at one tier; ("", "") with none there."""
    if rows.empty:
        return NOT_JUDGED, ""
    verdicts = list(rows["verdict"])
    verdict = next((v for v in ("does not reproduce", "undecided") if v in verdicts), "reproduces")
    flips = " (flips with the machine)" if rows["flips"].any() else ""
    if len(rows) == 1:
        return verdict, f"ours {rows['ours'].iloc[0]:.4g}{flips}"
    short = {"reproduces": "reproduce", "does not reproduce": "do not", "undecided": "undecided"}
    tally = ", ".join(f"{verdicts.count(v)} {short[v]}" for v in short if v in verdicts)
    return verdict, f"{len(rows)} claims: {tally}{flips}"


def _page_at(page: str, tier: str, label_only: bool) -> str:
    import yaml

    names = {r["name"] for r in yaml.safe_load((ROOT / "runs.yaml").read_text())["runs"]}
    if page and not label_only and tier != "quick" and f"{page}_{tier}" in names:
        return f"{page}_{tier}"
    return page if page in names else ""


def scorecard(found: pd.DataFrame) -> pd.DataFrame:
    """One row per statement of :data:`STATEMENTS`: ``key``, ``section``, ``words``, ``paper``, per tier
    ``ours_<tier>``, ``verdict_<tier>`` ("" where no claim of it was computed at that tier) and ``page_<tier>`` (the
    book page that shows it there), and ``verdict``: the one at the highest tier that judged it, "needs the paper
    tier" where none did.  ``found``: :func:`all_claims`."""
    rows = []
    for s in STATEMENTS:
        row = {"key": s.key, "section": s.section, "words": s.words, "paper": s.paper}
        overall = NEEDS_PAPER
        for tier in TIERS:
            verdict, ours = _fold(statement_claims(s, found, tier))
            row.update(
                {f"ours_{tier}": ours, f"verdict_{tier}": verdict, f"page_{tier}": _page_at(s.page, tier, s.label_only)}
            )
            overall = verdict or overall
        rows.append({**row, "verdict": overall})
    return pd.DataFrame(rows)


def counts(card: pd.DataFrame) -> pd.DataFrame:
    """Statements per verdict (rows; "not judged at this tier" for a tier column without a claim) and tier
    (columns, and ``overall``: the highest tier that judged each statement)."""
    cols = {**{t: card[f"verdict_{t}"].replace(NOT_JUDGED, NOT_AT_TIER) for t in TIERS}, "overall": card["verdict"]}
    out = pd.DataFrame({name: col.value_counts() for name, col in cols.items()})
    return out.reindex([*claims.VERDICTS, NOT_AT_TIER]).fillna(0).astype(int).rename_axis("verdict")


_LEFT = "text-align:left;vertical-align:top"
_COLOURS = {
    "reproduces": "#d9f2d9",
    "does not reproduce": "#f8d7d7",
    "undecided": "#fff3c4",
    NEEDS_PAPER: "#e4e4e4",
    NOT_JUDGED: "#ffffff",
}


def _cell(verdict: str, ours: str = "", page: str = "") -> str:
    import html

    text = (html.escape(verdict) or "–") + (f"<br><small>{html.escape(ours)}</small>" if ours else "")
    if page and verdict not in (NEEDS_PAPER, NOT_JUDGED):
        text = f'<a href="{page}.html">{text}</a>'
    return f'<td style="background:{_COLOURS[verdict]};{_LEFT}">{text}</td>'


def to_html(card: pd.DataFrame, tiers=TIERS) -> str:
    """The scorecard as an HTML table that fits a text column: the statement (key, section, the paper's words)
    in one cell, the paper's value, per tier our verdict with our value (linked to the page that shows it; "–":
    not judged at that tier) and the overall verdict."""
    import html

    head = "".join(f'<th style="{_LEFT}">{t}</th>' for t in tiers)
    body = []
    for r in card.itertuples():
        words = (
            f"<small><code>{html.escape(r.key)}</code> · {html.escape(r.section)}</small><br>“{html.escape(r.words)}”"
        )
        cells = "".join(
            _cell(getattr(r, f"verdict_{t}"), getattr(r, f"ours_{t}"), getattr(r, f"page_{t}")) for t in tiers
        )
        body.append(
            f'<tr><td style="{_LEFT}">{words}</td><td style="{_LEFT}">{html.escape(r.paper)}</td>{cells}'
            f"{_cell(r.verdict)}</tr>"
        )
    return (
        '<table class="scorecard" style="font-size:80%;table-layout:fixed;width:100%;word-wrap:break-word">'
        '<colgroup><col style="width:34%"><col style="width:13%">'
        + "".join('<col style="width:13%">' for _ in tiers)
        + '<col style="width:14%"></colgroup>'
        f'<thead><tr><th style="{_LEFT}">the paper says</th><th style="{_LEFT}">paper\'s value</th>{head}'
        f'<th style="{_LEFT}">verdict</th></tr></thead><tbody>' + "".join(body) + "</tbody></table>"
    )


def table_html(frame: pd.DataFrame, widths: dict | None = None) -> str:
    """A DataFrame as an HTML table without its index, in the text column's width (``widths``: column -> CSS
    width; text wraps inside the cells)."""
    import html

    widths = widths or {}
    cols = "".join(f'<col style="width:{widths.get(c, "auto")}">' for c in frame.columns)
    head = "".join(f'<th style="{_LEFT}">{html.escape(str(c))}</th>' for c in frame.columns)
    rows = "".join(
        "<tr>" + "".join(f'<td style="{_LEFT}">{html.escape(_text(v))}</td>' for v in r) + "</tr>"
        for r in frame.itertuples(index=False)
    )
    return (
        f'<table style="font-size:80%;table-layout:fixed;width:100%;word-wrap:break-word"><colgroup>{cols}'
        f"</colgroup><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
    )


def _text(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def sections(card: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
    """The card split into parts of the paper (abstract, §IV, §V-A/B1/B2, §V-B3 to B5, §V-C to E, §VI and v1),
    in the inventory's order, so that each table stays short."""
    part = card["key"].str.split("/").str[0].map(_PART)
    return [(name, card[part == name]) for name in dict.fromkeys(part)]


_B12 = "§V-A, §V-B1, §V-B2: set-up, Table I, privacy"
_B35 = "§V-B3 to §V-B5: participation, Tables II and III"
_CE = "§V-C to §V-E: medical data, Tables V and VI"
_PART = {
    "abstract": "Abstract",
    "IV": "§IV: Fig. 1",
    "V": _B12,
    "V-A5": _B12,
    "V-B1": _B12,
    "V-B2": _B12,
    "V-B3": _B35,
    "V-B4": _B35,
    "V-B5": _B35,
    "V-C": _CE,
    "V-D": _CE,
    "V-E": _CE,
    "VI": "§VI and v1's large pools",
    "v1": "§VI and v1's large pools",
}


# ----------------------------------------------------------------------------------------------- one page


def page_card(page: str, tier: str, found=None, results_dir=None, machines_dir=None) -> pd.DataFrame:
    """The statements that book page ``page`` judges (its runs.yaml name without a ``_<tier>`` suffix), one row
    each as :func:`scorecard` gives them at ``tier``: ``key``, ``section``, ``words``, ``paper``, ``ours`` and
    ``verdict`` ("needs the paper tier" for a statement without claims, "not judged at this tier" where none of
    its claims was computed at ``tier``).

    A training page's claims are computed here from the stored runs of ``tier`` (as the scorecard computes them);
    a label-only page passes the claims it computed (``found``: a list of :class:`fedlib.reproduction.claims.Claim`), so
    the
    verdicts on top of a page are those of the table at its bottom."""
    if page in machine_spread.STORED_CLAIMS:
        rows = [(tier, p, c, flips) for p, c, flips in training_claims(tier, results_dir, machines_dir) if p == page]
    elif found is not None:
        rows, tier = [("label", page, c, False) for c in found], "label"
    else:
        raise ValueError(
            f"page {page!r} is no training page of fedlib.reproduction.machine_spread.STORED_CLAIMS "
            f"({', '.join(machine_spread.STORED_CLAIMS)}): pass the claims it computed as found=."
        )
    frame = _claim_rows(rows)
    out = []
    for s in STATEMENTS:
        if s.page != page or s.key in EVIDENCE_CLAIMS:
            continue
        verdict, ours = _fold(statement_claims(s, frame, tier))
        out.append(
            {
                "key": s.key,
                "section": s.section,
                "words": s.words,
                "paper": s.paper,
                "ours": ours,
                "verdict": verdict or (NOT_AT_TIER if s.claims else NEEDS_PAPER),
            }
        )
    return pd.DataFrame(out, columns=["key", "section", "words", "paper", "ours", "verdict"])


def page_verdicts(page: str, tier: str, found=None, results_dir=None, machines_dir=None) -> str:
    """The verdicts that open a book page (HTML): a sentence with the counts, then one row per statement of
    :func:`page_card` with the paper's words, the paper's value and our verdict with our value; the scorecard
    links every statement of the book."""
    import html

    card = page_card(page, tier, found, results_dir, machines_dir)
    at = (
        "at the paper's scale (label counts only, every tier)"
        if found is not None and page not in machine_spread.STORED_CLAIMS
        else f"at the {tier} tier"
    )
    tally = card["verdict"].value_counts()
    parts = ", ".join(f"{tally[v]} {v}" for v in (*claims.VERDICTS, NOT_AT_TIER) if v in tally)
    head = (
        f"<p><strong>Verdicts on this page</strong> {html.escape(at)}: {len(card)} statement(s) of the paper, "
        f'{html.escape(parts) or "none"}. <a href="scorecard.html">The scorecard</a> lists every statement of '
        "the paper; the table <em>Claims checked</em> below gives each claim with its tolerance.</p>"
    )
    colours = {**_COLOURS, NOT_AT_TIER: "#ffffff"}
    body = "".join(
        f'<tr><td style="{_LEFT}"><small><code>{html.escape(r.key)}</code> · {html.escape(r.section)}</small><br>'
        f'“{html.escape(r.words)}”</td><td style="{_LEFT}">{html.escape(r.paper)}</td>'
        f'<td style="background:{colours[r.verdict]};{_LEFT}">{html.escape(r.verdict)}'
        + (f"<br><small>{html.escape(r.ours)}</small>" if r.ours else "")
        + "</td></tr>"
        for r in card.itertuples()
    )
    return (
        head + '<table class="page-verdicts" style="font-size:80%;table-layout:fixed;width:100%;'
        'word-wrap:break-word"><colgroup><col style="width:58%"><col style="width:20%"><col style="width:22%">'
        f'</colgroup><thead><tr><th style="{_LEFT}">the paper says</th><th style="{_LEFT}">paper\'s value</th>'
        f'<th style="{_LEFT}">our verdict</th></tr></thead><tbody>{body}</tbody></table>'
    )
