"""repro.participation (Fig. 2 as numbers), on hand-checked small cases and on the stored subset runs.  The
statements of §V-B3 are judged by the scorecard (tests/test_scorecard.py)."""

import numpy as np
import pandas as pd
import pytest

from repro import participation, results, significance, tiers

# final accuracy (%) per method, rate (M of K = 100) and seed 0, 1, 2
HAND = {("A", 10): [30, 32, 34], ("A", 4): [31, 31, 33], ("B", 10): [30, 30, 30], ("B", 4): [20, 22, 24]}


def _frame(values=HAND, partition="P", rounds=2):
    """A stored-like frame: every round of a run has the run's final accuracy."""
    rows = []
    for (method, m), accs in values.items():
        for seed, acc in enumerate(accs):
            for r in range(rounds + 1):
                rows.append(
                    {
                        "partition": partition,
                        "method": method,
                        "num_clients": 100,
                        "clients_per_round": m,
                        "seed": seed,
                        "round": r,
                        "test_accuracy": acc / 100 if r else np.nan,
                    }
                )
    return pd.DataFrame(rows)


def test_per_run_keeps_the_rate_columns():
    runs = participation.per_run(_frame(), last=2)
    assert len(runs) == 12
    assert sorted(runs["rate"].unique()) == [4.0, 10.0]
    got = runs.set_index(["method", "rate", "seed"])["accuracy"]
    assert got[("B", 4.0, 2)] == pytest.approx(24.0)


def test_rate_change_by_hand():
    change = participation.rate_change(participation.per_run(_frame(), last=1), "A").set_index("method")
    a, b = change.loc["A"], change.loc["B"]
    assert (a["high"], a["low"], a["n"]) == (10.0, 4.0, 3)
    assert a["change"] == pytest.approx(-1 / 3)  # (1 - 1 - 1) / 3
    assert b["change"] == pytest.approx(-8.0)  # (-10 - 8 - 6) / 3
    assert a["slope"] == pytest.approx(1 / 18)  # per seed (acc(4) - acc(10)) / (4 - 10): -1/6, 1/6, 1/6
    assert b["extra_loss"] == pytest.approx(23 / 3)  # A's change minus B's per seed: 11, 7, 5
    assert np.isnan(a["extra_loss"])
    assert (a["best_at"], b["best_at"], a["rates"]) == (2, 0, 2)
    assert b["gap"] == pytest.approx(35 / 6)  # A - B at rate 10: 0, 2, 4; at rate 4: 11, 9, 9
    assert (a["partition"], a["num_clients"]) == ("P", 100)
    assert b["p_change"] == pytest.approx(significance.paired_test([20, 22, 24], [30, 30, 30])["p_ttest"])


def test_rate_change_uses_only_seeds_with_every_rate():
    frame = _frame()
    frame = frame[~((frame["method"] == "B") & (frame["clients_per_round"] == 4) & (frame["seed"] == 2))]
    change = participation.rate_change(participation.per_run(frame, last=1), "A").set_index("method")
    assert list(change["n"]) == [2, 2]  # the same seeds for every method
    assert change.loc["B", "change"] == pytest.approx(-9.0)  # seeds 0, 1: -10, -8
    assert change.loc["A", "change"] == pytest.approx(0.0)  # seeds 0, 1: +1, -1


def test_rate_change_keeps_settings_apart_and_refuses_duplicates():
    both = pd.concat(
        [_frame().assign(model="m1"), _frame({k: [v + 10 for v in vs] for k, vs in HAND.items()}).assign(model="m2")]
    )
    change = participation.rate_change(participation.per_run(both, last=1), "A").set_index(["model", "method"])
    assert change.loc[("m1", "A"), "acc_high"] == pytest.approx(32.0)
    assert change.loc[("m2", "A"), "acc_high"] == pytest.approx(42.0)
    runs = participation.per_run(_frame(), last=1)
    with pytest.raises(ValueError, match="two runs of one method, rate and seed"):
        participation.rate_change(pd.concat([runs, runs.iloc[:1]]), "A")


def test_rate_change_refuses_an_absent_reference():
    with pytest.raises(ValueError, match=r"^parameter 'reference': got 'Z'; allowed: a method with stored runs: '"):
        participation.rate_change(participation.per_run(_frame(), last=1), "Z")


def test_per_run_final_refuses_an_unknown_column():
    with pytest.raises(ValueError, match=r"^parameter 'by': got \['nope'\]; allowed: columns of the frame: \["):
        significance.per_run_final(_frame(), 1, by=("nope",))


def test_full_rate_runs_differ_from_participation_only_in_m_and_seed():
    part = {participation._family(r.config): r for r in tiers.group_configs("subset", "participation")}
    pairs = participation.full_rate_runs("subset")
    # one pair per Table I run of a (partition, method) that participation runs, at every seed Table I runs it
    families = {(r.label["partition"], r.label["method"]) for r in tiers.group_configs("subset", "participation")}
    table1 = [
        r for r in tiers.group_configs("subset", "table1") if (r.label["partition"], r.label["method"]) in families
    ]
    assert len(pairs) == len(table1) >= len(tiers.PARTICIPATION_METHODS) * 2 * 3
    for label, run in pairs:
        twin = part[participation._family(run.config)]
        assert run.group == "table1"
        assert label == {**twin.label, "clients_per_round": 10, "seed": run.config.seed}
        assert run.config == twin.config.replace(clients_per_round=10, seed=run.config.seed)
    # Table I's seeds beyond the participation cells' own count too (a plan gives FedAvg's Table I cell more)
    part_seeds = {
        (r.label["partition"], r.label["method"], r.label["seed"])
        for r in tiers.group_configs("subset", "participation")
    }
    assert any((lab["partition"], lab["method"], lab["seed"]) not in part_seeds for lab, _ in pairs)
    assert participation.full_rate_runs("quick") == []  # its participation group uses K = 50, Table I K = 20


@pytest.mark.slow
def test_stored_subset_participation_gets_its_full_rate_point():
    stored = results.load_group("subset", "participation")
    if stored.empty:
        pytest.skip("no stored subset participation runs")
    frame, added = participation.with_full_rate(stored)
    pairs = participation.full_rate_runs("subset")
    assert added == sum(results.find_stored(run.config, "subset", groups=["table1"]) is not None for _, run in pairs)
    assert set(frame["clients_per_round"]) == {4, 5, 6, 7, 8, 9, 10}
    full = frame[frame["clients_per_round"] == 10]
    assert full.groupby(["partition", "method", "seed"]).ngroups == added


def test_paired_against_compares_within_each_rate_only_when_asked():
    runs = participation.per_run(_frame(), last=1)
    by_rate = significance.paired_against(runs, "A", by=participation.RATE_KEYS).set_index("clients_per_round")
    assert by_rate.loc[10, "mean_diff"] == pytest.approx(2.0)  # A - B at 10: 0, 2, 4
    assert by_rate.loc[4, "mean_diff"] == pytest.approx(29 / 3)  # at 4: 11, 9, 9
    with pytest.raises(ValueError, match=r"^parameter 'by': got \['nope'\]; allowed: columns of per_run: \["):
        significance.paired_against(runs, "A", by=("nope",))
