"""repro.machine_spread: stored runs paired with their retrains on another machine, and how far the retrain moves
them (hand-made stores).  Whether a retrain flips a verdict is the scorecard's (tests/test_scorecard.py)."""

import math

import pandas as pd
import pytest

from repro import machine_spread, results, rules, tiers


def _store(root, method, seed, accs, partition="C=2"):
    cfg = tiers.tier_config("quick", method=method, partition_name=partition, seed=seed, rounds=len(accs))
    t = pd.DataFrame({"round": range(len(accs) + 1), "test_accuracy": [0.1, *accs]})
    label = {"partition": partition, "method": method, "seed": seed}
    results.store_run(t, cfg, "quick", "table1", label, results_dir=root)


@pytest.mark.slow
def test_paired_final_and_the_spread_a_machine_change_draws(tmp_path):
    base, machines = tmp_path / "base", tmp_path / "machines"
    # stored: FedEntOpt 0.60 / 0.70, FedAvg 0.50 / 0.60; machine "m": FedEntOpt 0.40 / 0.50, FedAvg as stored
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
    note = machine_spread.page_note("quick", "table1", results_dir=base, machines_dir=machines)
    assert "| 4 | 10.00 | 20.00 | 2 | " in note and "`results/machines/m`: cpu " in note
    assert f"spread a machine change drew is {changes.std(ddof=1) / math.sqrt(2):.2f} pp" in note
    other = machine_spread.page_note("quick", "table2", results_dir=base, machines_dir=machines)
    assert other.startswith("No run of `table2` at tier `quick` has been retrained")
    assert "At this tier, 4 runs of `table1` retrained under" in other and "moved by up to 20.00 pp" in other


def test_a_machine_with_only_a_sample_of_the_runs_pairs_that_sample(tmp_path):
    base, machines = tmp_path / "base", tmp_path / "machines"
    for seed in (0, 1):
        _store(base, "FedEntOpt", seed, [0.6] * 3)
        _store(base, "FedAvg", seed, [0.5] * 3)
    _store(machines / "m", "FedEntOpt", 0, [0.2] * 3)  # one run retrained
    p = machine_spread.paired_final("quick", "table1", "m", results_dir=base, machines_dir=machines)
    assert len(p) == 1 and p["change"].iloc[0] == pytest.approx(-40.0)
    s = machine_spread.spread("quick", "table1", results_dir=base, machines_dir=machines).iloc[0]
    assert s["runs"] == 1 and math.isnan(s["machine_std"])  # one pair: no spread
    note = machine_spread.page_note("quick", "table1", results_dir=base, machines_dir=machines)
    assert "The largest single move: method FedEntOpt, partition C=2, seed 0, 60.00 % stored and 20.00 % " in note
    assert "With one retrained run per machine, no spread per run is measured yet." in note


def test_no_page_without_retrains_claims_a_spread(tmp_path):
    note = machine_spread.page_note("quick", "table1", results_dir=tmp_path, machines_dir=tmp_path / "none")
    assert note.startswith("No run of `table1` at tier `quick` has been retrained on another machine")


def _verdict(verdict, estimate, half, n, distance, comparison, unit=" pp"):
    reason = f"{comparison} = {estimate} [{estimate - half}, {estimate + half}]{unit} (95 % t-interval, seed-paired)"
    return rules.Verdict(
        verdict, estimate, estimate - half, estimate + half, n, verdict, None, (), reason, comparison, distance=distance
    )


def test_near_boundary_flags_the_comparisons_a_machine_change_could_move_across():
    # direction "> 0": FedLC's gap +6.25 +- 6.24 over 3 seeds (room 0.01 pp) is near a machine spread of 0.3 pp
    # (a paired mean over 3 seeds moves by sqrt 2 * 0.3 / sqrt 3 = 0.245); FedNova's +3.77 +- 3.03 over 5 is not
    near = _verdict("reproduces", 6.25, 6.24, 3, 6.25, "FedEntOpt+FedLC - FedLC")
    far = _verdict("reproduces", 3.77, 3.03, 5, 3.77, "FedEntOpt+FedNova - FedNova")
    # a miss of "within 0.95": |gap| 2.0 +- 0.5 lies 0.55 pp outside (distance -1.05): room 0.55 against 2 * 0.245
    miss = _verdict("does not reproduce", 2.0, 0.5, 3, -1.05, "FedEntOpt - FedEntOpt (DP)")
    undecided = _verdict("undecided", 0.1, 1.0, 3, 0.1, "open")
    rounds = _verdict("reproduces", 5.0, 1.0, 3, 5.0, "rounds to its own final accuracy", unit=" rounds")
    entropy = _verdict("reproduces", 0.3, 0.29, 3, 0.3, "FedEntOpt - Random", unit=" bits")  # as close, in bits
    # a gap of gaps in pp whose quantity never says "final accuracy" is an accuracy comparison all the same
    pronounced = _verdict("reproduces", 6.34, 6.0, 3, 6.34, "Dir(0.1) - C=2")
    setting = rules.Verdict("reproduces", 0, 0, 0, 3, "reproduces", None, (), "", parts=(near, far, undecided, rounds))

    def alone(v):
        return rules.Verdict(**{**v.__dict__, "parts": (v,)})

    judged = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "column": ["subset"] * 4,
            "verdict": ["reproduces", "does not reproduce", "reproduces", "reproduces"],
            "judgement": [
                rules.Judgement("direction", "a", setting, (setting,)),
                rules.Judgement("equal_within", "b", miss, (alone(miss),)),
                rules.Judgement("direction", "c", entropy, (alone(entropy),)),
                rules.Judgement("direction", "d", pronounced, (alone(pronounced),)),
            ],
        }
    )
    out = machine_spread.near_boundary(judged, machine_std=0.3).set_index("comparison")
    assert list(out.index) == [
        "FedEntOpt+FedLC - FedLC",
        "FedEntOpt+FedNova - FedNova",
        "FedEntOpt - FedEntOpt (DP)",
        "Dir(0.1) - C=2",
    ]
    assert out.loc["FedEntOpt+FedLC - FedLC", "room"] == pytest.approx(0.01)
    assert out.loc["FedEntOpt+FedLC - FedLC", "shift"] == pytest.approx(math.sqrt(2) * 0.3 / math.sqrt(3))
    assert out["near"].tolist() == [True, False, False, True]
    assert out.loc["FedEntOpt - FedEntOpt (DP)", "room"] == pytest.approx(0.55)
    assert machine_spread.near_boundary(judged, machine_std=0.3, k=3.0)["near"].tolist()[2]
