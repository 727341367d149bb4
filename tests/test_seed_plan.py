"""repro.seed_plan: seeds needed per gap (hand-checked), the cap, the routes of a claim and a statement,
the shared cells counted once; and the committed subset plan agrees with the tier that runs it.  The confirmatory
plan: a judgement's chances on fresh seeds (hand-checked against the one-gap power and combined as its rule
combines), the cells a statement reads, and the committed plan's fresh seeds, apart from the first plan's."""

import json
import math

import pytest
import yaml

from repro import seed_plan as sp
from repro import tiers

# ------------------------------------------------------------------------------------------ power and seeds


def test_seeds_needed_for_a_one_sd_gap_is_ten():
    # Hand check: the normal approximation with Guenther's (1981) t correction,
    # n = ((z_.975 + z_.8) / d)^2 + z_.975^2 / 2 = (1.960 + 0.842)^2 + 1.921 = 9.77 -> 10 seeds for d = 1;
    # G*Power's one-sample t test gives the same n = 10 with power 0.803.
    assert sp.seeds_needed(1.0, 1.0) == 10
    assert sp.power(1.0, 1.0, 10) == pytest.approx(0.803, abs=5e-4)
    assert sp.power(1.0, 1.0, 9) < sp.POWER <= sp.power(1.0, 1.0, 10)
    # d = 0.5: (2.802 / 0.5)^2 + 1.921 = 33.3 -> 34 (G*Power: 34)
    assert sp.seeds_needed(0.5, 1.0, cap=40) == 34


def test_seeds_needed_scales_with_the_spread_and_uses_the_t_quantile():
    assert sp.seeds_needed(2.0, 2.0) == sp.seeds_needed(1.0, 1.0)  # only effect / sd matters
    assert sp.seeds_needed(-1.0, 1.0) == 10  # a gap against the claim decides as fast
    assert sp.seeds_needed(1.5, 1.0, margin=0.5) == 10  # the interval must exclude the margin: the same gap of 1 sd
    # the normal quantile would call 8 seeds enough ((1.960 + 0.842)^2 = 7.85); with the t quantile they are not
    assert sp.power(1.0, 1.0, 8) < 0.75


def test_the_cap_binds():
    assert sp.seeds_needed(1.0, 1.0, cap=9) is None
    assert sp.seeds_needed(1.0, 1.0, cap=10) == 10
    assert sp.seeds_needed(0.1, 1.0) is None  # 0.1 sd needs ~ 800 seeds
    assert sp.seeds_needed(math.nan, 1.0) is None


def test_equivalence_power():
    assert sp.power(0.0, 1.0, 10, test="inside", margin=0.0) == 0.0  # nothing lies inside an empty region
    p = [sp.power(0.0, 1.0, n, test="inside", margin=1.0) for n in (5, 10, 20)]
    assert p[0] < p[1] < p[2]
    assert sp.seeds_needed(0.0, 1.0, test="inside", margin=1.0) == 13
    assert sp.seeds_needed(0.0, 1.0, test="rounds") == 1  # the rule draws rounds


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match=r"^parameter 'test': got 'twosided'; allowed: 'excludes', 'inside'\.$"):
        sp.power(1.0, 1.0, 10, test="twosided")
    with pytest.raises(ValueError, match=r"^parameter 'n': got 1; allowed: an integer >= 2\.$"):
        sp.power(1.0, 1.0, 1)
    with pytest.raises(ValueError, match=r"^parameter 'cap': got 1; allowed: an integer >= 2\.$"):
        sp.seeds_needed(1.0, 1.0, cap=1)


# header: pilot mean, paper's effect, pilot interval, effect planned with
@pytest.mark.parametrize(
    "pilot,paper,interval,planned",
    [
        (4.0, 2.0, (1.0, 7.0), 2.0),  # the paper's is smaller and plausible: the conservative one
        (4.0, 2.0, (3.0, 5.0), 4.0),  # the paper's lies outside the pilot's interval: the tier's own effect
        (4.0, 9.0, (1.0, 7.0), 4.0),  # the paper's is larger
        (-2.0, 30.0, (-9.0, 5.0), -2.0),  # opposite signs: the pilot's, which decides against the claim
        (math.nan, 3.0, (-math.inf, math.inf), 3.0),  # no pilot: the paper's
    ],
)
def test_planning_effect(pilot, paper, interval, planned):
    assert sp.planning_effect(pilot, paper, interval) == planned


# ------------------------------------------------------------------------------------------ routes and cells


def _gap(name, mean, sd=1.0, cells=(), claim="c", **kw):
    return sp.Gap(claim, name, tuple(cells), mean, sd, 3, **kw)


def test_a_claim_over_every_gap_is_decided_by_its_slowest_gap_or_by_one_against():
    # d = 1 needs 10 seeds (above); d = 2 needs 5 (power 0.75 at 4, 0.91 at 5: the same non-central t)
    every = sp.ClaimSpec("c", (_gap("a", 2.0), _gap("b", 1.0)), need=2)
    got = sp.plan_claim(every)
    assert (got["route"], got["n"]) == ("for", 10)
    assert [(g.name, p["n"]) for g, p in got["gaps"]] == [("a", 5), ("b", 10)]  # each gap asks its own seeds
    # one gap against the claim decides it ("does not reproduce") sooner than both for it
    against = sp.ClaimSpec("c", (_gap("a", 1.0), _gap("b", -2.0)), need=2)
    got = sp.plan_claim(against)
    assert (got["route"], got["n"], [g.name for g, _ in got["gaps"]]) == ("against", sp.seeds_needed(2.0, 1.0), ["b"])
    # beyond the cap on every route: no plan
    hopeless = sp.ClaimSpec("c", (_gap("a", 0.1), _gap("b", 1.0)), need=2)
    assert sp.plan_claim(hopeless)["route"] is None


def test_a_claim_that_needs_some_gaps_takes_the_cheapest():
    spec = sp.ClaimSpec("c", (_gap("a", 0.1), _gap("b", 2.0), _gap("c", 1.0)), need=2)
    got = sp.plan_claim(spec)
    assert (got["route"], got["n"], sorted(g.name for g, _ in got["gaps"])) == ("for", 10, ["b", "c"])


def test_a_statement_goes_against_through_its_cheapest_claim():
    plans = {"x": {"route": "for", "n": 6}, "y": {"route": "against", "n": 9}, "z": {"route": "against", "n": 4}}
    assert sp.plan_statement(plans) == {"route": "against", "n": 4, "claims": ["z"]}
    both = {"x": {"route": "for", "n": 6}, "y": {"route": "for", "n": 11}}
    assert sp.plan_statement(both) == {"route": "for", "n": 11, "claims": ["x", "y"]}
    stuck = {"x": {"route": "for", "n": 6}, "y": {"route": None, "n": None}}
    assert sp.plan_statement(stuck)["route"] is None


def test_a_cell_that_several_gaps_need_counts_once_with_the_largest_ask():
    ref = ("table1", {"partition": "C=2", "method": "FedEntOpt"})
    a = _gap("a", 1.0, cells=(ref, ("table1", {"partition": "C=2", "method": "FedAvg"})))
    b = _gap("b", 1.0, cells=(ref, ("table1", {"partition": "C=2", "method": "KL"})))
    cells = sp.cell_seeds([(a, 10), (b, 4), (a, 6)])
    assert len(cells) == 3
    assert cells[sp.cell_key(*ref)] == 10
    assert cells[sp.cell_key("table1", {"partition": "C=2", "method": "KL"})] == 4
    # the seed is no part of a cell
    assert sp.cell_key("table1", {"method": "KL", "seed": 3}) == sp.cell_key("table1", {"method": "KL"})


# ------------------------------------------------------------------------------------------ the committed plan


def _plan():
    return yaml.safe_load((tiers.ROOT / tiers.get_tier("subset").seed_plan).read_text())


def test_the_subset_tier_runs_the_seeds_of_its_plan():
    plan, fresh = _plan(), tiers.confirmatory("subset").seeds
    assert (plan["alpha"], plan["power"], plan["cap"]) == (0.05, sp.POWER, sp.CAP)
    runs = {}
    for group in tiers.tier_groups("subset"):
        for r in tiers.group_configs("subset", group):
            if r.label["seed"] not in fresh:  # the confirmatory plan's seeds: the next test
                runs.setdefault(sp.cell_key(group, r.label), set()).add(r.label["seed"])
    for cell in plan["cells"]:
        key = sp.cell_key(cell["group"], cell["label"])
        assert key in runs, f"plan cell {key} is no cell of the subset tier"
        assert runs[key] == set(range(cell["seeds"])), key
        assert cell["seeds"] > cell["tier_seeds"]
    assert max(c["seeds"] for c in plan["cells"]) <= plan["cap"]


def test_the_plan_lists_every_statement_it_cannot_decide_with_the_reason():
    plan = _plan()
    for s in plan["statements"]:
        if s["route"] is None:
            assert s["note"].startswith(f"cannot decide within the cap of {plan['cap']} seeds")
        else:
            assert 1 <= s["seeds"] <= plan["cap"] and s["decided_through"]
    assert plan["totals"]["to_train"] == sum(g["to_train"] for g in plan["groups"].values())
    assert sum(plan["pilot"].values()) > 0  # the stored runs it was computed from


@pytest.mark.slow
def test_progress_counts_the_tiers_runs_and_those_stored(tmp_path):
    from repro import seed_plan, tiers

    nothing = seed_plan.progress("subset", results_dir=tmp_path)
    assert [r["group"] for r in nothing] == list(seed_plan.read_plan("subset")["groups"])
    fresh = tiers.confirmatory("subset").seeds
    for row in nothing:
        assert row["runs"] == sum(r.label["seed"] not in fresh for r in tiers.group_configs("subset", row["group"]))
        assert row["stored"] == 0 and row["to_train"] == row["runs"] and row["cpu_hours_left"] > 0
    now = {r["group"]: r for r in seed_plan.progress("subset")}
    assert now["table1"]["stored"] >= seed_plan.read_plan("subset")["pilot"]["table1"]
    assert all(r["stored"] + r["to_train"] == r["runs"] for r in now.values())
    gone, completed = tiers.withdrawn("subset"), {r["plan"]: r["runs"] for r in seed_plan.completion_records("subset")}
    for number in range(1, len(tiers.written_confirmatory_plans("subset")) + 1):
        confirm = seed_plan.progress("subset", results_dir=tmp_path, which=number)
        runs = 0 if number in gone else seed_plan.read_plan("subset", number)["totals"]["runs"]
        runs += completed.get(number, 0)  # a completed plan's runs: its file's and its completion's
        assert sum(r["runs"] for r in confirm) == runs  # a withdrawn plan asks for no run


def test_a_tier_without_a_plan_file_is_refused():
    from repro import seed_plan

    with pytest.raises(
        ValueError,
        match=r"^tier 'quick' parameter 'seed_plan': got None; allowed: a plans/ path \(a tier with a seed",
    ):
        seed_plan.read_plan("quick")


def test_seeds_to_decide_reads_the_spread_back_from_the_interval():
    from scipy import stats

    from repro.rules import Verdict

    sd, n, mean = 2.0, 5, 1.5
    half = stats.t.ppf(1 - sp.ALPHA / 2, n - 1) * sd / math.sqrt(n)
    v = Verdict("undecided", mean, mean - half, mean + half, n, "reproduces", None, (), "", distance=mean)
    out = sp.seeds_to_decide(v)
    assert out["sd"] == pytest.approx(sd) and out["distance"] == mean
    assert out["n"] == sp.seeds_needed(mean, sd)  # the estimate 1.5 sd/2 from its boundary: within the cap
    assert sp.power(mean, sd, out["n"]) >= sp.POWER > sp.power(mean, sd, out["n"] - 1)
    near = Verdict("undecided", 0.05, 0.05 - half, 0.05 + half, n, "reproduces", None, (), "", distance=0.05)
    assert sp.seeds_to_decide(near)["n"] is None  # beyond the cap: more seeds would not decide it
    one = Verdict("undecided", 1.0, -math.inf, math.inf, 1, "reproduces", None, (), "", distance=1.0)
    assert sp.seeds_to_decide(one)["n"] is None and math.isnan(sp.seeds_to_decide(one)["sd"])


# ------------------------------------------------------------------------------------------ confirmatory plan


def _frame(gaps: dict, seeds=(0, 1, 2), setting=None):
    """A tidy frame: method "R" at 0 and each rival X at R + gap(seed), optionally in one setting."""
    import pandas as pd

    rows = [{"method": "R", "seed": s, "value": 0.0} for s in seeds]
    rows += [{"method": x, "seed": s, "value": -g[i]} for x, g in gaps.items() for i, s in enumerate(seeds)]
    f = pd.DataFrame(rows)
    return f.assign(partition=setting) if setting else f


def test_the_chance_of_one_comparison_is_the_power_of_its_gap():
    from repro import rules

    j = rules.direction(_frame({"B": [0.0, 1.0, 2.0]}), [("R", "B")])  # R - B: mean 1, sd 1 over 3 seeds
    passes, misses = sp.verdict_chances(j, 10)
    assert passes == pytest.approx(sp.power(1.0, 1.0, 10), abs=1e-3)  # the other tail is ~1e-6
    assert misses < 1e-5
    flipped = rules.direction(_frame({"B": [0.0, 1.0, 2.0]}), [("R", "B")], side=-1)
    assert sp.verdict_chances(flipped, 10) == pytest.approx((misses, passes), abs=1e-9)


def test_chances_combine_as_the_rule_combines():
    from repro import rules

    gaps = {"B": [0.0, 1.0, 2.0], "C": [0.5, 1.5, 2.5], "D": [1.0, 2.0, 3.0]}  # sd 1; means 1, 1.5, 2
    frame, pairs = _frame(gaps), [("R", x) for x in gaps]
    every = rules.direction(frame, pairs)
    some = rules.direction(frame, pairs, combine="some")
    k = len(pairs)
    one = {x: sp._comparison_chances(v, 6, "every", rules.ALPHA) for x, v in zip(gaps, every.comparisons())}
    alone = {x: sp._comparison_chances(v, 6, "some", rules.ALPHA) for x, v in zip(gaps, some.comparisons())}
    assert all(v.k == k for v in every.comparisons())
    assert sp.verdict_chances(every, 6)[0] == pytest.approx(math.prod(p for p, _ in one.values()))
    assert sp.verdict_chances(some, 6)[0] == pytest.approx(1 - math.prod(1 - p for p, _ in alone.values()))
    two = rules.at_least(every, 2)
    pb, pc, pd_ = (one[x][0] for x in gaps)
    at_least_two = pb * pc + pb * pd_ + pc * pd_ - 2 * pb * pc * pd_
    assert sp.verdict_chances(two, 6)[0] == pytest.approx(at_least_two)
    # a pass under "some" asks the family level: its chance per comparison is below that under "every"
    assert all(alone[x][0] < one[x][0] for x in gaps)


def test_fresh_seeds_are_the_fewest_that_decide_and_none_beyond_the_cap():
    from repro import rules

    j = rules.direction(_frame({"B": [0.0, 1.0, 2.0]}), [("R", "B")])
    plan = sp.fresh_seeds(j)
    assert plan["n"] == sp.seeds_needed(1.0, 1.0) == 10 and plan["route"] == "for"
    against = sp.fresh_seeds(rules.direction(_frame({"B": [0.0, 1.0, 2.0]}), [("R", "B")], side=-1))
    assert against["n"] == 10 and against["route"] == "against"
    small = sp.fresh_seeds(rules.direction(_frame({"B": [-0.9, 0.1, 1.1]}), [("R", "B")]))  # 0.1 sd
    assert small["n"] is None and sum(small["chances"]) < sp.POWER


def test_beyond_the_cap_the_fewest_seeds_are_those_a_search_from_two_finds_and_none_for_a_zero_gap():
    from repro import rules

    j = rules.direction(_frame({"B": [0.0, 1.0, 2.0]}), [("R", "B")])  # gap 1, sd 1
    point = sp.beyond_cap(j, draws=0, counts=(5, 20), most=50)
    assert point["n"] == sp.fresh_seeds(j, cap=50)["n"] == sp.seeds_needed(1.0, 1.0)
    assert point["chances"] == {n: sp.verdict_chances(j, n) for n in (5, 20)}
    sure = sp.beyond_cap(j, draws=200, seed=3, counts=(5,), most=400)  # the pilot's uncertainty asks for more
    assert sure["n"] == sp.fresh_seeds(j, cap=400, draws=200, seed=3)["n"] > point["n"]
    flat = rules.direction(_frame({"B": [-1.0, 0.0, 1.0]}), [("R", "B")])  # gap 0: a pass or a miss at chance alpha
    assert sp.beyond_cap(flat, draws=0, counts=(5,), most=200)["n"] is None
    with pytest.raises(ValueError, match=r"most.*an integer >= 3000"):
        sp.beyond_cap(j, most=1000)


def test_seeds_per_comparison_go_where_a_comparison_is_close_to_its_boundary():
    from repro import rules

    # R - B: mean 1, sd 1 (10 seeds alone for power 0.8); R - C: mean 10, sd 1 (decided with a handful)
    j = rules.direction(_frame({"B": [0.0, 1.0, 2.0], "C": [9.0, 10.0, 11.0]}), [("R", "B"), ("R", "C")])
    keys = {k[1]: k for k in (sp.comparison_key(v) for v in j.comparisons())}
    assert set(keys) == {"R - B", "R - C"}
    even = {k: 10 for k in keys.values()}
    assert sp.verdict_chances(j, even) == pytest.approx(sp.verdict_chances(j, 10))
    with pytest.raises(ValueError, match=r"n.*one for every comparison"):
        sp.verdict_chances(j, {keys["R - B"]: 10})
    plan = sp.fresh_seeds_per_comparison(j)
    n = {name: plan["n"][k] for name, k in keys.items()}
    assert plan["route"] == "for" and plan["chances"][0] >= sp.POWER
    assert n["R - C"] < 5 < n["R - B"] and sum(n.values()) < 2 * sp.fresh_seeds(j)["n"]
    one_fewer = {**plan["n"], keys["R - B"]: n["R - B"] - 1}  # the close comparison's seeds are all needed
    assert sp.verdict_chances(j, one_fewer)[0] < sp.POWER
    # one comparison alone: the same seeds as one number for the statement; none where the cap falls short
    alone = rules.direction(_frame({"B": [0.0, 1.0, 2.0]}), [("R", "B")])
    assert list(sp.fresh_seeds_per_comparison(alone)["n"].values()) == [sp.fresh_seeds(alone)["n"]]
    small = rules.direction(_frame({"B": [-0.9, 0.1, 1.1]}), [("R", "B")])
    assert sp.fresh_seeds_per_comparison(small)["n"] is None


def test_the_chance_with_seeds_per_comparison_is_what_the_rule_does_on_simulated_seeds():
    """Draw each comparison's seed-paired gaps from the normal the plan assumes, with its own number of seeds, judge
    them with the rule, and count: the share that passes matches verdict_chances."""
    import numpy as np
    import pandas as pd

    from repro import rules

    pairs = [("R", "B"), ("R", "C")]
    j = rules.direction(_frame({"B": [0.0, 1.0, 2.0], "C": [9.0, 10.0, 11.0]}), pairs)
    n = {k[1].split(" - ")[1]: v for k, v in sp.fresh_seeds_per_comparison(j)["n"].items()}
    rng, reps, passed = np.random.default_rng(7), 1000, 0
    for _ in range(reps):
        rows = [{"method": "R", "seed": s, "value": 0.0} for s in range(max(n.values()))]
        for x, mean in (("B", 1.0), ("C", 10.0)):
            rows += [{"method": x, "seed": s, "value": -g} for s, g in enumerate(rng.normal(mean, 1.0, n[x]))]
        passed += rules.direction(pd.DataFrame(rows), pairs).verdict == rules.REPRODUCES
    chance = sp.verdict_chances(j, {("all settings", f"R - {x}"): k for x, k in n.items()})[0]
    assert abs(passed / reps - chance) < 4 * math.sqrt(chance * (1 - chance) / reps)


def test_the_assurance_is_what_the_rule_does_on_seeds_drawn_from_truths_the_pilot_allows():
    """Draw the true gap and spread from the pilot's posterior (flat priors), then fresh seeds from that normal,
    judge them with the rule, and count: the share that passes matches verdict_chances with draws."""
    import numpy as np
    import pandas as pd

    from repro import rules

    j = rules.direction(_frame({"B": [0.0, 1.0, 2.0]}), [("R", "B")])  # R - B: mean 1, sd 1 over 3 seeds
    rng, reps, passed, n = np.random.default_rng(11), 1500, 0, 12
    for _ in range(reps):
        sd = math.sqrt(2 / rng.chisquare(2))  # the pilot's sd 1 over the scaled inverse chi-square of 2 df
        gaps = rng.normal(1.0 + sd / math.sqrt(3) * rng.standard_normal(), sd, n)
        rows = [{"method": "R", "seed": s, "value": 0.0} for s in range(n)]
        rows += [{"method": "B", "seed": s, "value": -g} for s, g in enumerate(gaps)]
        passed += rules.direction(pd.DataFrame(rows), [("R", "B")]).verdict == rules.REPRODUCES
    chance = sp.verdict_chances(j, n, draws=4000, seed=3)[0]
    assert abs(passed / reps - chance) < 4 * math.sqrt(chance * (1 - chance) / reps)
    # a 3-seed pilot may have met a large gap by chance: the assurance is below the power at its estimate
    assert chance < sp.verdict_chances(j, n)[0] - 0.05
    assert sp.verdict_chances(j, n, draws=500, seed=3) == sp.verdict_chances(j, n, draws=500, seed=3)
    with pytest.raises(ValueError, match=r"draws.*-1.*an integer >= 0"):
        sp.verdict_chances(j, n, draws=-1)


def test_seeds_per_comparison_may_decide_either_way_where_neither_way_alone_is_likely_enough():
    """A 3-seed pilot of mean 0.6 and sd 1 allows a true gap of either sign: on many fresh seeds a pass and a miss
    are each below the power while together above it; planned as one seed count for the lone comparison."""
    from repro import rules

    j = rules.direction(_frame({"B": [-0.4, 0.6, 1.6]}), [("R", "B")])
    plan = sp.fresh_seeds_per_comparison(j, cap=100, draws=1000, seed=1)
    (n,) = plan["n"].values()
    passes, misses = plan["chances"]
    assert passes < sp.POWER and misses < sp.POWER <= passes + misses and plan["route"] == "for"
    assert n == sp.fresh_seeds(j, cap=100, draws=1000, seed=1)["n"]


def test_the_assurance_of_a_long_pilot_is_the_chance_at_its_estimates():
    import numpy as np

    from repro import rules

    gaps = np.random.default_rng(5).normal(1.0, 1.0, 400)
    j = rules.direction(_frame({"B": list(gaps)}, seeds=range(400)), [("R", "B")])
    assert sp.verdict_chances(j, 10, draws=2000, seed=1)[0] == pytest.approx(sp.verdict_chances(j, 10)[0], abs=0.02)
    plan = sp.fresh_seeds(j, draws=2000, seed=1)
    assert abs(plan["n"] - sp.fresh_seeds(j)["n"]) <= 1


def test_a_withdrawn_plan_runs_nothing_judges_nothing_and_keeps_its_seeds_out():
    """The subset tier's withdrawn plans: none of their cells is run any more, no statement is judged on their
    seeds, those seeds stay out of every other judgement, and no run of theirs was stored after the withdrawal."""
    from repro import results

    gone = tiers.withdrawn("subset")
    assert gone, "the subset tier records its withdrawn plans"
    confirm, running = tiers.confirmatory("subset"), tiers.seed_plan_cells("subset")
    labels = {}
    for number, record in gone.items():
        fresh, judges = confirm.plans[number - 1]
        assert not judges and fresh <= confirm.seeds
        assert not any(fresh & set(seeds) for seeds in running.values())
        plan = sp.read_plan("subset", number)
        stored = 0
        for cell in plan["cells"]:
            if cell["group"] not in labels:
                folder = results.group_dir(None, "subset", cell["group"])
                labels[cell["group"]] = [json.loads(f.read_text())["label"] for f in folder.glob("*.json")]
            want = {k: str(v) for k, v in cell["label"].items()}
            stored += sum(
                lab["seed"] in fresh and all(str(lab.get(k)) == v for k, v in want.items())
                for lab in labels[cell["group"]]
            )
        assert stored <= record["runs_stored"][number], f"plan {number}: runs stored after its withdrawal"


def test_the_cells_a_statement_reads_are_those_its_numbers_depend_on():
    """V-B1/kl_low compares FedAvg with KL: of Table I's cells it reads those two methods in both partitions."""
    from repro import quantities, statements

    table = statements.load_table()
    s = table.by_id("V-B1/kl_low")
    groups = quantities.stand_in_groups("subset", seed=1)
    cells = sp.cell_comparisons(quantities.TRAINING[s.id], s, table, "subset", groups)
    assert sorted((lab["method"], lab["partition"]) for _, lab, _ in cells) == [
        ("FedAvg", "C=2"),
        ("FedAvg", "Dir(0.1)"),
        ("KL", "C=2"),
        ("KL", "Dir(0.1)"),
    ]
    for _, lab, comparisons in cells:  # each cell read by the one comparison of its own partition
        assert [(setting.split("partition=")[1], c) for setting, c in comparisons] == [
            (lab["partition"], "FedAvg - KL")
        ]
    assert [(g, lab) for g, lab, _ in cells] == sp.cells_read(quantities.TRAINING[s.id], s, table, "subset", groups)


def test_a_participation_statement_plans_table1s_cells_for_its_full_rate_point(monkeypatch):
    """V-B3/keeps_accuracy compares FedEntOpt at each lower rate with its 10 % point, Table I's run: of Table I's
    cells it reads FedEntOpt's in both partitions, each by the comparisons of its own partition."""
    import functools

    from repro import participation, quantities, statements
    from repro.results import StoredGroup

    # the tier's planned runs do not change within the test: their Table I twins are listed once, not per cell
    monkeypatch.setattr(participation, "full_rate_runs", functools.cache(participation.full_rate_runs))

    table = statements.load_table()
    s = table.by_id("V-B3/keeps_accuracy")
    assert tuple(s.groups) == ("participation",) and quantities.read_groups(s.groups) == ["participation", "table1"]
    groups = {}  # FedEntOpt's stand-in runs at three seeds: what the quantity reads, small enough to be quick
    stand_in = quantities.stand_in_groups("subset", seed=1)
    for name in ("participation", "table1"):
        g = stand_in[name]
        keys = set(g.meta.loc[(g.meta["method"] == "FedEntOpt") & (g.meta["seed"] < 3), "key"])
        groups[name] = StoredGroup(g.tier, name, g.frame[g.frame["key"].isin(keys)], g.meta[g.meta["key"].isin(keys)])
    cells = sp.cell_comparisons(quantities.TRAINING[s.id], s, table, "subset", groups)
    full = {lab["partition"]: comps for g, lab, comps in cells if g == "table1"}
    assert {(lab["method"], lab["partition"]) for g, lab, _ in cells if g == "table1"} == {
        ("FedEntOpt", "C=2"),
        ("FedEntOpt", "Dir(0.1)"),
    }
    for partition, comps in full.items():
        assert len(comps) == 6 and all(f"partition={partition}," in setting + "," for setting, _ in comps)
        assert {c.split(" - ")[1] for _, c in comps} == {"10"}


def test_the_committed_confirmatory_plans_run_fresh_seeds_for_their_statements_alone():
    from repro import statements

    paths, confirm = tiers.written_confirmatory_plans("subset"), tiers.confirmatory("subset")
    assert paths and len(confirm.plans) == len(paths)
    first = {s for seeds in tiers._read_plan(tiers.get_tier("subset").seed_plan).values() for s in seeds}
    ids, judged, gone = {s.id: s for s in statements.load()}, set(), tiers.withdrawn("subset")
    for number, (path, (fresh, judges)) in enumerate(zip(paths, confirm.plans), start=1):
        plan = yaml.safe_load((tiers.ROOT / path).read_text())
        if number in gone:  # runs nothing more, judges nothing (test_a_withdrawn_plan_...)
            assert plan["first_seed"] == sp.first_fresh_seed("subset", number) and not judges
            continue
        assert plan.get("number", 1) == number  # the first plan predates the field
        assert plan["first_seed"] == sp.first_fresh_seed("subset", number) and min(fresh) == plan["first_seed"]
        assert max(fresh) < plan["first_seed"] + plan["cap"]
        assert not fresh & first  # clear of the seed plan's seeds
        assert set(plan["judges"]) == set(judges) and all("subset" in ids[i].tiers for i in plan["judges"])
        planned = {r["statement"]: r["seeds"] for r in plan["statements"]}
        assert {i for i, n in planned.items() if n is not None} == set(plan["judges"])
        assert not judged & set(planned), "a statement an earlier plan judges is not planned again"
        judged |= set(plan["judges"])
        for cell in plan["cells"]:  # every cell runs at least the seeds of the statements that read it
            runs = tiers.group_configs("subset", cell["group"])
            have = {
                r.label["seed"]
                for r in runs
                if tiers.cell_key(cell["group"], r.label) == tiers.cell_key(cell["group"], cell["label"])
            }
            assert set(range(plan["first_seed"], plan["first_seed"] + cell["seeds"])) <= have
        assert plan["totals"]["runs"] == sum(c["seeds"] for c in plan["cells"])


def test_a_plans_missing_cells_are_those_its_own_asks_need_beyond_what_it_lists(monkeypatch):
    """A plan judging one statement asked 37 fresh seeds for comparison A and 2 for B; the cells its comparisons
    read: a (by A and B), b (by B), c (by none: the statement's 37).  Its cells hold a with 2 seeds and b with 2:
    a and c are missing, each with the most a comparison reading it asked, from the plan's first seed."""
    from repro import quantities

    class NoRuns:
        def __init__(self, *a, **kw):
            pass

        def stored(self, group):
            return None

    row = {"statement": "V-B3/others_degrade", "seeds": 37, "seeds_per_comparison": {"s: A": 37, "s: B": 2}}
    plan = {"judges": [row["statement"]], "first_seed": 1000, "statements": [row]}
    cells = [
        ("table1", {"method": "a"}, frozenset({("s", "A"), ("s", "B")})),
        ("table1", {"method": "b"}, frozenset({("s", "B")})),
        ("table1", {"method": "c"}, frozenset()),
    ]
    monkeypatch.setattr(sp, "read_plan", lambda tier, which: plan)
    monkeypatch.setattr(sp, "cell_comparisons", lambda *a: cells)
    monkeypatch.setattr(quantities, "Runs", NoRuns)
    listed = {tiers.cell_key("table1", {"method": m}): (1000, 1001) for m in "ab"}
    monkeypatch.setattr(tiers, "plan_cells", lambda tier, number: listed)
    assert sp.missing_cells("subset", 10) == [
        {"group": "table1", "label": {"method": m}, "seeds": 37, "first_seed": 1000} for m in "ac"
    ]
    assert sp.asked(row, ("s", "B")) == 2 and sp.asked(row, ("s", "Z")) == 37


def test_a_plans_completion_runs_its_cells_on_the_plans_seeds_and_counts_them_as_the_plans(monkeypatch):
    """A completion of plan 12 gives one of its cells three seeds more: the plan's cells, the tier's planned runs
    and the seeds plan 12's statements are judged on all take them; no other plan's cells change."""
    number = 12
    before, cells_before = tiers.confirmatory("subset"), tiers.plan_cells("subset", number)
    key, seeds = sorted(cells_before.items())[0]
    more = tuple(range(seeds[0], seeds[-1] + 4))
    monkeypatch.setattr(tiers, "completions", lambda tier: {number: {key: more}})
    assert tiers.plan_cells("subset", number) == {**cells_before, key: more}
    assert set(tiers.seed_plan_cells("subset")[key]) >= set(more)
    group = json.loads(key)["group"]
    runs = {r.label["seed"] for r in tiers.group_configs("subset", group) if tiers.cell_key(group, r.label) == key}
    assert set(more) <= runs
    after = tiers.confirmatory("subset")
    assert after.plans[number - 1][0] == before.plans[number - 1][0] | set(more)
    assert after.plans[: number - 1] == before.plans[: number - 1]


def test_the_repositorys_plan_completions_add_only_seeds_their_plans_asked_for():
    """Each completion belongs to a live plan, once; each of its cells runs the plan's first seed on, no more seeds
    than the plan's cap, more than the plan's file gives the cell, and exactly what one of the statements the plan
    judges asked for a comparison (or its seeds): the plan's own asks, none added after its runs."""
    records = sp.completion_records("subset")
    assert records, "the subset tier completes plan 10"
    numbers = [r["plan"] for r in records]
    assert len(numbers) == len(set(numbers)) and not set(numbers) & set(tiers.withdrawn("subset"))
    for record in records:
        plan = sp.read_plan("subset", record["plan"])
        own = dict(tiers._read_plan(tiers.written_confirmatory_plans("subset")[record["plan"] - 1]))
        rows = [r for r in plan["statements"] if r["statement"] in plan["judges"]]
        asks = {int(r["seeds"]) for r in rows} | {
            int(n) for r in rows for n in r.get("seeds_per_comparison", {}).values()
        }
        assert record["cells"] and record["why"]
        for cell in record["cells"]:
            assert cell["first_seed"] == plan["first_seed"] and cell["seeds"] <= plan["cap"]
            assert cell["seeds"] > len(own.get(tiers.cell_key(cell["group"], cell["label"]), ()))
            assert cell["seeds"] in asks
        added = sum(c["seeds"] - len(own.get(tiers.cell_key(c["group"], c["label"]), ())) for c in record["cells"])
        assert record["runs"] == added


def test_a_plans_fresh_seeds_start_past_every_earlier_plans_whatever_its_cap(monkeypatch):
    """Plans of caps 100, 100, 700 and 20: the third takes 300..999, so the fourth starts at 1000 (not 400) and the
    fifth at 1100; with caps of at most 100 the n-th plan starts at 100 n.  The repository's plans never share a
    seed."""
    caps = {1: 100, 2: 100, 3: 700, 4: 20}
    firsts = {}

    def read(tier, n):
        return {"first_seed": firsts[n], "cap": caps[n]}

    monkeypatch.setattr(sp, "read_plan", read)
    for n in range(1, 6):
        firsts[n] = sp.first_fresh_seed("subset", n)
    assert firsts == {1: 100, 2: 200, 3: 300, 4: 1000, 5: 1100}
    monkeypatch.undo()
    spans = [
        range(p["first_seed"], p["first_seed"] + p["cap"])
        for p in (sp.read_plan("subset", n) for n in range(1, len(tiers.written_confirmatory_plans("subset")) + 1))
    ]
    assert all(a.stop <= b.start for a, b in zip(spans, spans[1:]))


def test_a_confirmatory_plan_is_the_next_one_and_skips_the_statements_earlier_plans_judge():
    from repro import statements

    written = len(tiers.written_confirmatory_plans("subset"))
    with pytest.raises(ValueError, match=rf"number.*{written}.*the next plan's number, {written + 1}"):
        sp.confirmatory_plan("subset", [], number=written)
    table = statements.load_table()
    gone = tiers.withdrawn("subset")
    live = next(n for n in range(1, written + 1) if n not in gone)
    first = sp.read_plan("subset", live)["judges"][0]
    undecided = [(table.by_id(first), None)]  # judged by a live plan: never planned again, so never read here
    plan = sp.confirmatory_plan("subset", undecided, number=written + 1, table=table)
    assert plan["statements"] == [] and plan["judges"] == [] and plan["cells"] == []
    assert plan["first_seed"] == sp.first_fresh_seed("subset", written + 1)
    # a withdrawn plan's statements may be planned again; a live plan's never
    judges = {n: set(sp.read_plan("subset", n)["judges"]) for n in range(1, written + 1)}
    assert sp.judged_before("subset", written + 1) == set().union(*(j for n, j in judges.items() if n not in gone))
    assert sp.judged_before("subset", live + 1) == judges[live]


def test_plan_notes_say_which_plan_judges_a_statement_or_why_the_latest_left_it_out(monkeypatch):
    """Plan 1 judges A and leaves B and D beyond its cap; plan 2 (withdrawn) judges B; plan 3 judges C, leaves B
    out for its budget and D beyond its cap: A and C name the plan that judges them, B and D plan 3's reason, and
    the withdrawn plan says nothing."""

    def row(sid, seeds=None, route=None, chances=(0.0, 0.0), note=None):
        return {
            "statement": sid,
            "seeds": seeds,
            "route": route,
            "chances": list(chances),
            **({"note": note} if note else {}),
        }

    plans = {
        1: {"judges": ["A"], "statements": [row("A", 5, "for"), row("B", chances=(0.1, 0.2)), row("D")]},
        2: {"judges": ["B"], "statements": [row("B", 9, "against")]},
        3: {
            "judges": ["C"],
            "statements": [
                row("B", route="for", note="beyond the budget"),
                row("C", 40, "for"),
                row("D", chances=(0.25, 0.25)),
            ],
        },
    }
    monkeypatch.setattr(tiers, "written_confirmatory_plans", lambda tier: ["p1", "p2", "p3"])
    monkeypatch.setattr(tiers, "withdrawn", lambda tier: {2: {"reason": "test"}})
    monkeypatch.setattr(sp, "read_plan", lambda tier, n: {"cap": 100, "power": 0.8, **plans[n]})
    notes = sp.plan_notes("subset")
    fixed = "fixed before its runs: no seeds are added"
    assert notes == {
        "A": f"judged once on confirmatory plan 1's fresh seeds (5 at most a cell), {fixed}",
        "B": "left out of confirmatory plan 3: beyond the budget",
        "C": f"judged once on confirmatory plan 3's fresh seeds (40 at most a cell), {fixed}",
        "D": "left out of confirmatory plan 3: 100 fresh seeds would decide it with chance 0.5 (< 0.8)",
    }


def test_the_repositorys_plan_notes_name_live_plans_only():
    gone, notes = tiers.withdrawn("subset"), sp.plan_notes("subset")
    for n in range(1, len(tiers.written_confirmatory_plans("subset")) + 1):
        for sid in sp.read_plan("subset", n)["judges"]:
            judged = notes.get(sid, "").startswith(f"judged once on confirmatory plan {n}'s fresh seeds")
            assert judged == (n not in gone), sid
    assert not [v for v in notes.values() for n in gone if f"plan {n}'s" in v or f"plan {n}:" in v]


def test_a_statement_beyond_the_cap_gets_the_chance_and_whether_more_seeds_would_decide_it():
    """A gap of 0.1 sd decides in no fresh seed count a plan has room for: at the cap of room
    (FIRST_FRESH_SEED) the note gives the chance alone; at a smaller cap it also says that not even that many would;
    a gap of 1 sd beyond a cap of 5 decides with the 10 seeds the note names."""
    from repro import rules, statements

    table, nxt = statements.load_table(), len(tiers.written_confirmatory_plans("subset")) + 1
    s = table.by_id("V-B1/kl_low")  # judged by no live plan

    def note(gaps, cap):
        j = rules.direction(_frame({"B": gaps}), [("R", "B")])
        (row,) = sp.confirmatory_plan("subset", [(s, j)], number=nxt, table=table, cap=cap)["statements"]
        assert row["seeds"] is None and row["route"] is None
        return row["note"], sum(row["chances"])

    text, chance = note([-0.9, 0.1, 1.1], sp.FIRST_FRESH_SEED)
    assert text == f"{sp.FIRST_FRESH_SEED} fresh seeds decide it with chance {chance:.3g} (< {sp.POWER}): not planned"
    text, _ = note([-0.9, 0.1, 1.1], 5)
    assert text.endswith(f"not planned; not even {sp.FIRST_FRESH_SEED} would")
    text, _ = note([0.0, 1.0, 2.0], 5)
    assert text.endswith(f"not planned; {sp.seeds_needed(1.0, 1.0)} would")


def test_a_budget_takes_the_cheapest_statements_first_and_counts_a_shared_cell_once():
    def cell(method, seeds):
        return ("table1", {"method": method}, seeds)

    wants = {  # own runs: A 20, B 60, C 30 (C shares A's cell and asks more seeds of it)
        "A": [cell("X", 10), cell("Y", 10)],
        "B": [cell("Z", 30), cell("W", 30)],
        "C": [cell("X", 15), cell("V", 15)],
    }
    three = {**wants, "D": wants["B"], "E": wants["B"]}  # B, D, E ask for the same runs: 20 a statement
    rows = [{"statement": i, "seeds": 10, "chances": [0.8, 0.0]} for i in three]
    asks = sp._within_budget(rows, three, 80, per_run=360.0)  # B, D, E (60), then A (20); C beyond
    assert [r["statement"] for r in rows if r["seeds"] is None] == ["C"] and len(asks) == 4

    def plan(budget_runs):
        rows = [{"statement": i, "seeds": 10, "chances": [0.8, 0.0]} for i in wants]
        asks = sp._within_budget(rows, wants, budget_runs, per_run=360.0)
        return {r["statement"]: r for r in rows}, {a[1]["method"]: a[2] for a in asks.values()}

    rows, asks = plan(None)
    assert asks == {"X": 15, "Y": 10, "Z": 30, "W": 30, "V": 15} and all(r["seeds"] == 10 for r in rows.values())
    rows, asks = plan(40)  # A (20), then C adds 5 to X and 15 for V: 40; B (60 more) is beyond
    assert asks == {"X": 15, "Y": 10, "V": 15}
    assert rows["B"]["seeds"] is None and "60 runs, 6.0 CPU hours" in rows["B"]["note"]
    assert "beyond the plan's budget" in rows["B"]["note"] and rows["A"]["seeds"] == rows["C"]["seeds"] == 10
    rows, asks = plan(39)  # C no longer fits
    assert asks == {"X": 10, "Y": 10} and rows["C"]["seeds"] is None
    with pytest.raises(ValueError, match=r"budget_hours.*-1.*None or a number of CPU hours > 0"):
        sp.confirmatory_plan("subset", [], number=len(tiers.written_confirmatory_plans("subset")) + 1, budget_hours=-1)


def test_the_seeds_table_counts_planned_and_stored_runs_per_cell(tmp_path):
    import pandas as pd

    from repro import results

    empty = sp.seeds_table("quick", ["table1"], tmp_path)
    runs = tiers.group_configs("quick", "table1")
    assert empty["planned"].sum() == len(runs) and empty["stored"].sum() == 0
    assert (empty["fresh planned"] == 0).all()  # the quick tier has no confirmatory plan
    one = runs[0]
    table = pd.DataFrame({"round": [0, 1], "test_accuracy": [0.1, 0.2]})
    results.store_run(table, one.config, "quick", "table1", one.label, results_dir=tmp_path)
    after = sp.seeds_table("quick", ["table1"], tmp_path)
    stored = after[after["stored"] > 0]
    assert len(stored) == 1 and stored.iloc[0]["method"] == one.label["method"] and stored.iloc[0]["stored"] == 1


def test_at_most_is_the_poisson_binomial_tail_counted_by_hand():
    import itertools

    chances = [0.9, 0.6, 0.3]
    for k in range(len(chances) + 1):
        by_hand = sum(
            math.prod(p if hit else 1 - p for p, hit in zip(chances, hits))
            for hits in itertools.product((0, 1), repeat=len(chances))
            if sum(hits) <= k
        )
        assert sp.at_most(chances, k) == pytest.approx(by_hand)
    assert sp.at_most([], 0) == 1.0
