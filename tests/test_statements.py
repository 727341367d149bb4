"""repro.statements: the paper's statements as data (statements.yaml) load, validate, quote the paper at
the lines they name, keep every id of the former scorecard inventory, and name sources and tiers that exist in the
code."""

import copy
from pathlib import Path

import pytest
import yaml

from repro import rules
from repro import statements as st

ROOT = Path(__file__).resolve().parents[1]
PAPERS = ROOT.parent / "shared" / "papers"
#: The ids of the scorecard's former inventory (repro.scorecard.STATEMENTS, replaced by this
#: table), kept so that a verdict can be followed from the old card to the new one.
FORMER_IDS = (
    "abstract/outperforms",
    "abstract/up_to_6pct",
    "abstract/over_30pct",
    "abstract/combined_40pct",
    "abstract/dp_unaffected",
    "IV/fig1_above_threshold",
    "IV/fig1_above_random",
    "IV/fig1_low_variance",
    "IV/fig1_above_reselection",
    "IV/random_above_reselection",
    "IV/reselection_below_fedavg",
    "V/consistently_outperforms",
    "V-A5/buffer_choice",
    "V-A5/fedprox_mu",
    "V-B1/best_every_setting",
    "V-B1/lenet_cifar10_dir_6pct",
    "V-B1/lenet_1_3pp",
    "V-B1/fedconcat_under",
    "V-B1/kl_low",
    "V-B1/fednova_scaffold_dir",
    "V-B1/vgg_margins",
    "V-B1/vgg_fedconcat",
    "V-B1/vgg_fednova_scaffold",
    "V-B1/faster",
    "V-B1/table1_cells",
    "V-B2/dp_matches",
    "V-B2/dp_sometimes_higher",
    "V-B2/dp_above_baselines",
    "V-B3/keeps_accuracy",
    "V-B3/others_degrade",
    "V-B3/dir_pronounced",
    "V-B3/default_choice",
    "V-B3/vgg_and_cifar100",
    "V-B3/cifar100_c2_identical",
    "V-B4/dir_increases",
    "V-B4/c2_modest",
    "V-B4/over_40_and_13",
    "V-B5/dropout_best",
    "V-B5/straggling_best",
    "V-B5/over_30_and_8",
    "V-B5/unaffected",
    "V-C/best_medical",
    "V-C/scaffold_second",
    "V-D/labels_4ck",
    "V-D/model_sizes",
    "V-D/orders_of_magnitude",
    "V-E/hnorm_cells",
    "V-E/hnorm_rises",
    "V-E/every_client",
    "V-E/c2_accuracy_rises",
    "V-E/dir_accuracy_degrades",
    "V-E/q0_worst",
    "VI/dp_robust",
    "VI/buffer_mitigates_adversaries",
    "v1/coverage_cifar10",
    "v1/coverage_cifar100",
    "v1/large_pools_robust",
    "v1/fedconcat_fails",
    "V-B4/other_cells",
    "V-E/accuracy_cells",
)


@pytest.fixture(scope="module")
def table():
    return st.load_table()


@pytest.fixture(scope="module")
def document():
    return yaml.safe_load(st.PATH.read_text(encoding="utf-8"))


def test_the_table_loads_and_validates(table):
    assert len(table.statements) >= len(FORMER_IDS)
    assert table.alpha == rules.ALPHA  # one alpha for every interval
    ids = [s.id for s in table.statements]
    assert len(ids) == len(set(ids))
    assert set(table.frame()["id"]) == set(ids)
    assert table.by_id("V-B3/dir_pronounced").groups == ("participation",)


def test_every_former_scorecard_statement_is_in_the_table(table):
    known = {s.id for s in table.statements} | {old for s in table.statements for old in s.replaces}
    missing = [i for i in FORMER_IDS if i not in known]
    assert not missing, missing


def test_it_adds_the_missing_statements_of_v2_and_v1s_figures(table):
    old = set(FORMER_IDS)
    added = [s for s in table.statements if s.id not in old and s.checkable]
    v2 = [s for s in added if s.paper == "v2"]
    v1 = [s for s in added if s.paper == "v1"]
    assert len(v2) >= 16, [s.id for s in v2]  # the audit: "at least 16 checkable statements of v2"
    assert {"V-A5/weight_decay", "V-B2/laplace_scale"} <= {s.id for s in v2}  # the two examples
    assert {s.lines[0] for s in v1} >= {261, 266, 316}  # v1's large pools (Fig. 4) and Figs. 5 and 6


def test_the_flags_carry_their_reasons(table):
    for s in table.statements:
        assert s.contradicts_paper_table == bool(s.contradiction), s.id
        assert s.group_missing == bool(s.needed), s.id
    assert table.by_id("V-D/orders_of_magnitude").contradicts_paper_table  # 30.88x in the paper's own Table V
    from repro import tiers

    for s in table.statements:  # a statement that names a group names one the tiers define
        assert all(g in tiers.GROUPS for g in s.groups), s.id


def test_every_margin_is_named_and_sourced(table):
    for s in table.statements:
        if s.rule == "equal_within" and isinstance(s.params["margin"], str):
            assert table.margins[s.params["margin"]]["from"], s.id


@pytest.mark.skipif(not PAPERS.exists(), reason="the paper's text is not on this machine")
def test_the_words_are_the_papers_at_the_lines_named(table):
    papers = {
        "v2": (PAPERS / "fedentopt-v2.md").read_text(encoding="utf-8"),
        "v1": (PAPERS / "fedentopt-v1.txt").read_text(encoding="utf-8"),
    }
    wrong = [(s.id, s.line) for s in table.statements if not st.quote_in(s.words, st.paper_excerpt(s, papers))]
    assert not wrong, wrong
    for s in table.statements:  # restated_at names lines that exist
        for line in s.restated_at:
            paper, number = ("v1", line[3:]) if line.startswith("v1:") else ("v2", line)
            assert 1 <= int(number.split("-")[0]) <= len(papers[paper].splitlines()), (s.id, line)


def test_a_mistyped_quote_fails():
    text = "Under the label skew setting,  $\\text{Dir}(0.1)$ , FedEntOpt consistently outperforms the others."
    assert st.quote_in("the label skew setting, Dir(0.1), FedEntOpt consistently outperforms", text)
    assert st.quote_in("Under the label skew ... outperforms the others.", text)
    assert not st.quote_in("the label skew setting, Dir(0.1), FedEntOpt consistently outperformed", text)
    assert not st.quote_in("outperforms the others ... Under the label skew", text)  # the parts in order
    assert not st.quote_in("the label-skew setting", text)


def test_every_label_only_source_imports(table):
    assert st.unresolved_sources(table.statements) == []


def test_every_training_tier_listed_can_judge_the_statement(table):
    assert st.tier_problems(table.statements) == []


def _entry(document, sid="V-B3/dir_pronounced"):
    return copy.deepcopy(next(e for e in document["statements"] if e["id"] == sid))


def _with(document, *entries):
    return {**{k: v for k, v in document.items() if k != "statements"}, "statements": list(entries)}


BAD = {
    "unknown rule": ("rule", lambda e: e.update(rule="bets"), "bets"),
    "unknown group": ("source.group", lambda e: e.update(source={"group": "tabel1"}), "tabel1"),
    "unknown tier": ("tiers", lambda e: e.update(tiers=["subset", "full"]), "full"),
    "missing words": ("words", lambda e: e.pop("words"), "None"),
    "empty words": ("words", lambda e: e.update(words="  "), "'  '"),
    "unknown field": ("verdict", lambda e: e.update(verdict="reproduces"), "reproduces"),
    "missing rule parameter": ("params.side", lambda e: e["params"].pop("side"), "None"),
    "unknown side": ("params.side", lambda e: e["params"].update(side="up"), "up"),
    "unknown setting key": ("params.settings", lambda e: e["params"].update(settings=["modle"]), "modle"),
    "bad line": ("line", lambda e: e.update(line="l.200"), "l.200"),
    "contradiction without cells": ("contradiction", lambda e: e.update(contradicts_paper_table=True), "None"),
    "missing group without need": ("needed", lambda e: e.update(group_missing=True), "None"),
    "label-only source at a training tier": (
        "tiers",
        lambda e: e.update(source={"label_only": "repro.label_tables.table6"}),
        "subset",
    ),
    "not_checkable with a source": (
        "source",
        lambda e: e.update(rule="not_checkable", params={"reason": "no"}),
        "participation",
    ),
    "unknown margin": (
        "params.margin",
        lambda e: e.update(rule="equal_within", params={"quantity": "q", "margin": "wide", "settings": []}),
        "wide",
    ),
    "numeric margin without its origin": (
        "params.margin_from",
        lambda e: e.update(rule="equal_within", params={"quantity": "q", "margin": 1.5, "settings": []}),
        "None",
    ),
    "unknown relation": (
        "params.relation",
        lambda e: e.update(rule="magnitude", params={"quantity": "q", "relation": "near", "value": 6, "settings": []}),
        "near",
    ),
    "range without two ends": (
        "params.value",
        lambda e: e.update(rule="magnitude", params={"quantity": "q", "relation": "range", "value": 3, "settings": []}),
        "3",
    ),
    "paper value without unit": ("paper_value", lambda e: e.update(paper_value={"value": 6.19}), "6.19"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_each_validation_error_names_the_statement_the_field_and_the_value(document, case):
    field, spoil, shown = BAD[case]
    entry = _entry(document)
    spoil(entry)
    with pytest.raises(st.StatementError) as err:
        st.validate(_with(document, entry))
    message = str(err.value)
    assert "'V-B3/dir_pronounced'" in message and f"field {field!r}" in message and shown in message, message
    assert "allowed" in message, message


def test_a_duplicate_id_is_an_error(document):
    entry = _entry(document)
    with pytest.raises(st.StatementError, match=r"statement 'V-B3/dir_pronounced': field 'id'.*statement 1"):
        st.validate(_with(document, entry, copy.deepcopy(entry)))
    other = _entry(document, "V-B3/keeps_accuracy")
    other["replaces"] = ["V-B3/dir_pronounced"]  # an old id claimed twice
    with pytest.raises(st.StatementError, match="already has it"):
        st.validate(_with(document, entry, other))


def test_the_good_entry_validates_alone(document):
    t = st.validate(_with(document, _entry(document)))
    assert [s.id for s in t.statements] == ["V-B3/dir_pronounced"]
    assert t.statements[0].params["side"] == "positive"
    with pytest.raises(TypeError):
        t.statements[0].params["side"] = "negative"  # frozen all the way down
