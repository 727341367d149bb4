"""fedlib.reproduction.scorecard: the inventory of the paper's statements, every claim in it, and the verdicts the
scorecard page
shows (computed by the same functions as the page: scorecard.all_claims, scorecard.scorecard)."""

import re
from fnmatch import fnmatchcase
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fedlib.reproduction import claims, scorecard

ROOT = Path(__file__).resolve().parents[1]
PAPERS = ROOT.parent / "shared" / "papers"


@pytest.fixture(scope="module")
def found():
    """Every claim at the book's parameters and from every stored tier (as the scorecard page computes it)."""
    return scorecard.all_claims()


def _plain(text: str) -> str:
    """Letters and digits only; the paper's TeX commands dropped (\\mu and \\log read as mu and log)."""
    text = text.replace("\\mu", "mu").replace("μ", "mu").replace("\\log", "log").replace("\\%", "%")
    return re.sub(r"[^a-z0-9]", "", re.sub(r"\\[a-zA-Z]+", "", text).lower())


def test_the_inventory_has_unique_keys_quoted_words_and_known_pages():
    keys = [s.key for s in scorecard.STATEMENTS]
    assert len(keys) == len(set(keys))
    pages = {r["name"] for r in yaml.safe_load((ROOT / "runs.yaml").read_text())["runs"]}
    for s in scorecard.STATEMENTS:
        assert s.page in pages | {""}, s.key
        assert s.words and s.paper and s.section, s.key


@pytest.mark.skipif(not PAPERS.exists(), reason="the paper's text is not on this machine")
def test_the_inventory_quotes_the_papers_words():
    v2, v1 = (_plain((PAPERS / name).read_text()) for name in ("fedentopt-v2.md", "fedentopt-v1.txt"))
    wrong = []
    for s in scorecard.STATEMENTS:
        if s.section.startswith("Table"):  # a table-cell group, named not quoted
            continue
        for part in re.sub(r"\[[^]]*\]", "...", s.words).split("..."):
            if len(_plain(part)) >= 8 and _plain(part) not in (v1 if s.section.startswith("v1") else v2):
                wrong.append((s.key, part))
    assert not wrong, wrong


def test_every_claim_is_as_documented_or_flips_with_the_machine(found):
    wrong = found[(found["verdict"] != found["expected"]) & ~found["flips"]]
    assert wrong.empty, wrong[["key", "ours", "verdict", "expected"]].to_string()
    assert (found.loc[found["flips"], "verdict"] == "undecided").all()


def test_every_claim_belongs_to_a_statement_or_is_evidence(found):
    patterns = [p for s in scorecard.STATEMENTS for p in s.claims]
    loose = [
        n
        for n in set(found["name"])
        if n not in scorecard.EVIDENCE_CLAIMS and not any(fnmatchcase(n, p) for p in patterns)
    ]
    assert not loose, loose


def test_every_pattern_of_the_inventory_judges_some_claim(found):
    dead = [
        (s.key, p) for s in scorecard.STATEMENTS for p in s.claims if not any(fnmatchcase(n, p) for n in found["name"])
    ]
    assert not dead, dead


def test_the_card_has_a_row_per_statement_and_counts_that_add_up(found):
    card = scorecard.scorecard(found)
    assert list(card["key"]) == [s.key for s in scorecard.STATEMENTS]
    assert set(card["verdict"]) <= set(claims.VERDICTS)
    table = scorecard.counts(card)
    assert (table.sum() == len(card)).all()
    no_claim = [s.key for s in scorecard.STATEMENTS if not s.claims]
    assert (card.set_index("key").loc[no_claim, "verdict"] == "needs the paper tier").all()
    shown = scorecard.to_html(card)
    assert all(k in shown for k in card["key"]) and 'href="table1.html"' in shown
    assert 'href="table1_subset.html"' in shown  # the subset column links the subset page


def _found(rows):
    cols = list(scorecard.CLAIM_COLUMNS)
    return pd.DataFrame([{**dict.fromkeys(cols, ""), "ours": 1.0, "flips": False, **r} for r in rows], columns=cols)


def test_a_statement_takes_its_worst_claim_and_its_highest_tier(monkeypatch):
    s = scorecard.Statement("x/best", "§X", "best", "best", "table1", ("table1/*/best",))
    monkeypatch.setattr(scorecard, "STATEMENTS", (s, scorecard.Statement("x/none", "§X", "w", "p", "")))
    found = _found(
        [
            {"tier": "quick", "name": "table1/C=2/best", "verdict": "does not reproduce"},
            {"tier": "quick", "name": "table1/Dir(0.1)/best", "verdict": "undecided"},
            {"tier": "subset", "name": "table1/C=2/best", "verdict": "reproduces"},
            {"tier": "subset", "name": "table1/Dir(0.1)/best", "verdict": "undecided", "flips": True},
        ]
    )
    card = scorecard.scorecard(found).set_index("key")
    assert card.loc["x/best", "verdict_quick"] == "does not reproduce"
    assert card.loc["x/best", "verdict_subset"] == "undecided"
    assert "flips with the machine" in card.loc["x/best", "ours_subset"]
    assert card.loc["x/best", "verdict_paper"] == "" and card.loc["x/best", "verdict"] == "undecided"
    assert card.loc["x/none", "verdict"] == "needs the paper tier"
    table = scorecard.counts(card.reset_index())
    assert table.loc["not judged at this tier", "paper"] == 2 and table.loc["needs the paper tier", "overall"] == 1


def test_a_verdict_that_flips_with_the_machine_is_undecided_on_the_card(tmp_path):
    from fedlib.reproduction import results, tiers

    def store(root, method, seed, acc):
        cfg = tiers.tier_config("quick", method=method, partition_name="C=2", seed=seed, rounds=3)
        t = pd.DataFrame({"round": range(4), "test_accuracy": [0.1, acc, acc, acc]})
        results.store_run(
            t, cfg, "quick", "table1", {"partition": "C=2", "method": method, "seed": seed}, results_dir=root
        )

    base, machines = tmp_path / "base", tmp_path / "machines"
    for root, fe in ((base, (0.6, 0.7)), (machines / "m", (0.4, 0.5))):  # +10 pp at both seeds, then -10 pp
        for seed in (0, 1):
            store(root, "FedEntOpt", seed, fe[seed])
            store(root, "FedAvg", seed, (0.5, 0.6)[seed])
    rows = scorecard.training_claims("quick", base, machines)
    best = next(c for page, c, flips in rows if c.key == "quick:table1/C=2/best")
    assert best.verdict == "reproduces"
    assert [flips for page, c, flips in rows if c is best] == [True]


# ----------------------------------------------------------------------------------------------- page tops

PAGES_WITH_STATEMENTS = sorted({s.page for s in scorecard.STATEMENTS if s.page})


@pytest.mark.parametrize(
    "page, tier", [("table1", "quick"), ("table1", "subset"), ("availability", "quick"), ("participation", "subset")]
)
def test_the_verdicts_on_top_of_a_training_page_are_the_scorecards(found, page, tier):
    """What a page shows under its title equals the scorecard's column of that tier for the page's statements."""
    card = scorecard.scorecard(found).set_index("key")
    top = scorecard.page_card(page, tier).set_index("key")
    mine = [s.key for s in scorecard.STATEMENTS if s.page == page and s.key not in scorecard.EVIDENCE_CLAIMS]
    assert list(top.index) == mine and mine
    for key in mine:
        expected = card.loc[key, f"verdict_{tier}"]
        if expected:
            assert top.loc[key, "verdict"] == expected and top.loc[key, "ours"] == card.loc[key, f"ours_{tier}"]
        else:
            assert top.loc[key, "verdict"] == (
                "needs the paper tier"
                if not next(s for s in scorecard.STATEMENTS if s.key == key).claims
                else "not judged at this tier"
            )


def test_the_verdicts_on_top_of_a_label_page_are_the_scorecards(found):
    page = "entropy_trace"
    params = scorecard.book_parameters(page)
    top = scorecard.page_card(page, "label", scorecard.LABEL_PAGES[page](params)).set_index("key")
    card = scorecard.scorecard(found).set_index("key")
    assert (top["verdict"] == card.loc[top.index, "verdict_quick"]).all()
    html = scorecard.page_verdicts(page, "label", scorecard.LABEL_PAGES[page](params))
    assert html.count("<tr>") == len(top) + 1 and "at the paper&#x27;s scale" in html


def test_a_page_that_is_no_training_page_needs_its_claims():
    with pytest.raises(ValueError, match="page 'entropy_trace' is no training page .*pass the claims it computed"):
        scorecard.page_card("entropy_trace", "quick")


@pytest.mark.parametrize("page", PAGES_WITH_STATEMENTS)
def test_every_page_with_statements_opens_with_its_verdicts(page):
    """The first cell pastes the verdicts right under the title; a code cell glues them from page_verdicts."""
    import json

    nb = json.loads((ROOT / "notebooks" / f"{page}.ipynb").read_text())
    first = "".join(nb["cells"][0]["source"]).splitlines()
    assert first[0].startswith("# ") and first[1:4] == ["", "```{glue} verdicts", "```"]
    code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    assert sum(f'on_top(scorecard.page_verdicts("{page}"' in c for c in code) == 1
