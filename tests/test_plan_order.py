"""The order of plans and runs in the git history: a hand-built history, and the repository's own."""

import pytest

from repro import plan_order, tiers

CELL = tiers.cell_key("table1", {"method": "FedAvg", "partition": "C=2"})
OTHER = tiers.cell_key("table1", {"method": "KL", "partition": "C=2"})


def _history(monkeypatch, added_runs: dict):
    """Commits a, b, c in that order; plan 1 (seeds 100 and 101 of CELL) added in b; the store holds runs of
    CELL seeds 5 and 100, OTHER seed 101 and CELL seed 101, committed as ``added_runs`` says."""
    git = {"--is-shallow-repository": "false\n", "--topo-order": "a\nb\nc\n"}
    monkeypatch.setattr(plan_order, "_git", lambda root, *a: next(git[k] for k in git if k in a))
    monkeypatch.setattr(
        plan_order, "_first_added", lambda root, where: {"p.yaml": "b"} if where == "plans" else dict(added_runs)
    )
    monkeypatch.setattr(plan_order, "_plans", lambda tier, root, files: [("plan 1", "p.yaml", "b", {CELL: (100, 101)})])
    runs = [(CELL, 5, "r5.json"), (CELL, 100, "r100.json"), (OTHER, 101, "k101.json"), (CELL, 101, "r101.json")]
    monkeypatch.setattr(plan_order, "_stored_runs", lambda tier, results_dir, root: runs)
    return plan_order.plan_order("subset", results_dir=tiers.ROOT / "results").iloc[0]


def test_a_plan_passes_only_when_no_committed_run_of_its_seeds_comes_before_it(monkeypatch):
    # seed 5 and KL's seed 101 are not the plan's: committed first, they do not count against it
    row = _history(monkeypatch, {"r5.json": "a", "k101.json": "a", "r100.json": "c"})
    assert (row["runs"], row["committed_runs"], row["first_run_commit"], row["plan_first"]) == (2, 1, "c", True)
    row = _history(monkeypatch, {"r100.json": "c", "r101.json": "a"})
    assert (row["committed_runs"], row["first_run_commit"], row["plan_first"]) == (2, "a", False)
    row = _history(monkeypatch, {"r100.json": "b"})  # in the plan's own commit: not after it
    assert not row["plan_first"]


def test_no_verdict_on_the_order_without_a_full_history(monkeypatch):
    monkeypatch.setattr(plan_order, "_git", lambda root, *a: "true\n" if "--is-shallow-repository" in a else "")
    assert plan_order.plan_order("subset") is None
    monkeypatch.setattr(plan_order, "_git", lambda root, *a: None)
    assert plan_order.plan_order("subset") is None


def test_every_seed_plan_of_the_subset_tier_was_committed_before_its_runs():
    order = plan_order.plan_order("subset")
    if order is None:
        pytest.skip("no full git history here (a source archive or a shallow clone)")
    written = len(tiers.written_confirmatory_plans("subset"))
    assert list(order["plan"][: written + 1]) == ["seed plan", *(f"plan {n}" for n in range(1, written + 1))]
    assert order["plan_commit"].notna().all(), "a plan file or completion record that was never committed"
    late = order.loc[~order["plan_first"], ["plan", "plan_commit", "first_run_commit"]]
    assert late.empty, f"runs committed before their plan:\n{late.to_string()}"
    assert (order["committed_runs"] <= order["runs"]).all()
