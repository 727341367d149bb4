"""repro.machine_spread: stored runs paired with their retrains on another machine, the spread, and
verdicts that
flip with the machine (hand-made stores, then the repository's own)."""

import math

import pandas as pd
import pytest

from repro import machine_spread, results, tiers


def _store(root, method, seed, accs, partition="C=2"):
    cfg = tiers.tier_config("quick", method=method, partition_name=partition, seed=seed, rounds=len(accs))
    t = pd.DataFrame({"round": range(len(accs) + 1), "test_accuracy": [0.1, *accs]})
    label = {"partition": partition, "method": method, "seed": seed}
    results.store_run(t, cfg, "quick", "table1", label, results_dir=root)


@pytest.mark.slow
def test_paired_final_spread_and_a_flipping_verdict(tmp_path):
    base, machines = tmp_path / "base", tmp_path / "machines"
    # stored: FedEntOpt 0.60 / 0.70, FedAvg 0.50 / 0.60 -> FedEntOpt - FedAvg = +10 pp at both seeds (reproduces)
    # machine "m": FedEntOpt 0.40 / 0.50, FedAvg 0.50 / 0.60 -> -10 pp at both seeds (does not): the verdict flips
    for root, fe, fa in ((base, (0.6, 0.7), (0.5, 0.6)), (machines / "m", (0.4, 0.5), (0.5, 0.6))):
        for seed in (0, 1):
            _store(root, "FedEntOpt", seed, [fe[seed]] * 3)
            _store(root, "FedAvg", seed, [fa[seed]] * 3)
    p = machine_spread.paired_final("quick", "table1", "m", results_dir=base, machines_dir=machines)
    p = p.set_index(["method", "seed"])
    assert p.loc[("FedEntOpt", 0), "change"] == pytest.approx(-20.0)
    assert p.loc[("FedAvg", 1), "change"] == pytest.approx(0.0)
    assert p.loc[("FedEntOpt", 1), "change"] == pytest.approx(-20.0)
    s = machine_spread.spread("quick", "table1", results_dir=base, machines_dir=machines).iloc[0]
    # changes -20, -20, 0, 0 (pp): median |change| 10, max 20, 2 identical; std (ddof 1) of the changes
    changes = pd.Series([-20.0, -20.0, 0.0, 0.0])
    assert (s["runs"], s["identical"]) == (4, 2)
    assert (s["median_abs"], s["max_abs"]) == (pytest.approx(10.0), pytest.approx(20.0))
    assert s["machine_std"] == pytest.approx(changes.std(ddof=1) / math.sqrt(2))
    # seed std of the stored runs: FedEntOpt 60/70 -> var 50; FedAvg 50/60 -> var 50; pooled sqrt(50)
    assert s["seed_std"] == pytest.approx(math.sqrt(50))
    v = machine_spread.verdicts("quick", "table1", results_dir=base, machines_dir=machines).iloc[0]
    assert v["ours"] == pytest.approx(10.0) and v["verdict"] == "reproduces"
    assert v["ours@m"] == pytest.approx(-10.0) and v["verdict@m"] == "does not reproduce" and v["flips"]
    shown = machine_spread.claims_frame("quick", "table1", results_dir=base, machines_dir=machines).iloc[0]
    assert shown["verdict"] == "undecided (flips with the machine)" and shown["ours"] == pytest.approx(10.0)
    assert shown["other machines"] == "m: does not reproduce"
    assert "1 flip: `quick:table1/" in machine_spread.flip_note("quick", "table1", base, machines)
    note = machine_spread.page_note("quick", "table1", results_dir=base, machines_dir=machines)
    assert "| 4 | 10.00 | 20.00 | 2 | " in note and "`results/machines/m`: cpu " in note
    assert f"spread a machine change drew is {changes.std(ddof=1) / math.sqrt(2):.2f} pp" in note
    other = machine_spread.page_note("quick", "table2", results_dir=base, machines_dir=machines)
    assert other.startswith("No run of `table2` at tier `quick` has been retrained")
    assert "At this tier, 4 runs of `table1` retrained under" in other and "moved by up to 20.00 pp" in other


def test_a_machine_with_only_a_sample_of_the_runs_judges_no_claim(tmp_path):
    base, machines = tmp_path / "base", tmp_path / "machines"
    for seed in (0, 1):
        _store(base, "FedEntOpt", seed, [0.6] * 3)
        _store(base, "FedAvg", seed, [0.5] * 3)
    _store(machines / "m", "FedEntOpt", 0, [0.2] * 3)  # one run: no claim of Table I can be judged from it
    v = machine_spread.verdicts("quick", "table1", results_dir=base, machines_dir=machines)
    assert list(v.columns) == ["key", "ours", "holds", "verdict", "flips"] and not v["flips"].any()
    assert len(machine_spread.paired_final("quick", "table1", "m", results_dir=base, machines_dir=machines)) == 1


def test_no_page_without_retrains_claims_a_spread(tmp_path):
    note = machine_spread.page_note("quick", "table1", results_dir=tmp_path, machines_dir=tmp_path / "none")
    assert note.startswith("No run of `table1` at tier `quick` has been retrained on another machine")


@pytest.mark.slow
@pytest.mark.parametrize("page", sorted(machine_spread.STORED_CLAIMS))
def test_no_stored_verdict_turns_into_its_opposite_on_the_machines_that_retrained_it(page):
    """No claim the book judges from stored runs turns from "reproduces" into "does not reproduce" (or back) when
    the runs are retrained under another floating-point environment (results/machines/*). A verdict that moves
    to or from "undecided" with the machine is no finding: the scorecard counts it undecided
    (tests/test_scorecard.py)."""
    v = machine_spread.verdicts("quick", page)
    if v.empty:
        pytest.skip(f"no claim of {page} at the quick tier")
    experiment = machine_spread.STORED_CLAIMS[page][0]
    if not machine_spread.machines("quick", experiment):
        pytest.skip(f"no quick {experiment} run retrained on another machine yet")
    retrained = [c for c in v.columns if c.startswith("verdict@")]
    assert retrained, f"no machine retrained every quick {experiment} run"
    decided = {"reproduces", "does not reproduce"}
    opposite = pd.concat(
        [v["verdict"].isin(decided) & v[c].isin(decided) & v[c].ne(v["verdict"]) for c in retrained], axis=1
    ).any(axis=1)
    assert not opposite.any(), v[opposite].to_string()
