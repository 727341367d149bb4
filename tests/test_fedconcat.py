"""Tests for fedlib.algorithms.fedconcat: clustering, per-cluster FedAvg, concatenated encoders, round split."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.algorithms.base import Algorithm, weighted_average
from fedlib.algorithms.fedavg import FedAvg
from fedlib.algorithms.fedconcat import (
    ConcatModel,
    FedConcat,
    aggregate_clusters,
    cluster_clients,
    encoder_keys,
    fedconcat_round_split,
    label_distributions,
    last_linear_name,
    make_encoder,
)
from fedlib.training.local import (
    LocalHyperParams,
    LocalResult,
    cap_batches,
    client_generators,
    local_train,
    model_state,
    trainable_keys,
)
from fedlib.training.models import LeNet5


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 3))


def _clients(num_clients=6, per=12, seed=0):
    """Tiny 3-class data; clients 0-2 hold mostly class 0, clients 3-5 mostly class 2."""
    g = torch.Generator().manual_seed(seed)
    xs, ys, counts = [], [], []
    for c in range(num_clients):
        major = 0 if c < num_clients // 2 else 2
        y = torch.full((per,), major, dtype=torch.int64)
        y[: per // 4] = 1
        xs.append(torch.randn(per, 4, generator=g) + y[:, None].float())
        ys.append(y)
        counts.append(np.bincount(y.numpy(), minlength=3))
    return xs, ys, np.array(counts)


_CONFIG = SimpleNamespace(lr=0.05, lr_decay=1.0, seed=0)  # what plan_round reads of an ExperimentConfig


def _hp(epochs=1):
    return LocalHyperParams(lr=0.05, momentum=0.9, weight_decay=5e-4, batch_size=4, epochs=epochs)


def _selector(num_clients, m, seed):
    rng = np.random.default_rng(seed)
    return lambda rnd: rng.choice(num_clients, size=m, replace=False)


def _train(xs, ys, model, params, k, rnd, local, max_batches=None, seed=0):
    """Client ``k``'s local training in round ``rnd``, as the trainer runs it (its generators, the batch cap)."""
    x, y, hp = xs[k], ys[k], _hp()
    gen, aug_gen = client_generators(seed, rnd, k, x.device)
    if max_batches is not None:
        x, y, hp = cap_batches(x, y, hp, max_batches, gen)
    return local_train(model, params, x, y, {}, local, hp, gen, aug_generator=aug_gen, client_id=int(k))


def _run_stages(
    algo, model, init_params, xs, ys, *, label_counts, total_rounds, clients_per_round, select, evaluate=None
):
    """All three stages through the round hooks, as the trainer's round loop calls them: ``select(rnd)`` picks each
    round's clients; ``evaluate(concat_model, params, plan)`` after every classifier round (merged into the round's
    history record)."""
    algo.bind(trainable_keys(model))
    fc = algo.plan(
        model,
        init_params,
        label_counts=label_counts,
        total_rounds=total_rounds,
        clients_per_round=clients_per_round,
        rng=np.random.default_rng(0),
    )
    while not fc.done:
        plan, fc = algo.plan_round(fc.round + 1, fc, config=_CONFIG, model=model)
        local = plan.local or algo
        results = [
            _train(
                xs,
                ys,
                plan.model or model,
                algo.start_params(k, init_params, fc),
                k,
                plan.round,
                local,
                plan.max_batches,
            )
            for k in select(plan.round)
        ]
        kept = [r for r in results if r.num_samples > 0]
        n = np.array([r.num_samples for r in kept], dtype=np.float64)
        _, _, fc = algo.aggregate_round(plan, kept, n / n.sum(), init_params, {}, fc)
        if evaluate is not None and plan.phase == "classifier":
            fc.history[-1].update(evaluate(fc.model, fc.params, plan) or {})
    return fc


# --- clustering --------------------------------------------------------------------------------------------


def test_label_distributions_eq2_and_dp_clipping():
    np.testing.assert_allclose(label_distributions([[3, 1], [-2, 4], [-1, -1]]), [[0.75, 0.25], [0, 1], [0.5, 0.5]])


def test_cluster_clients_groups_similar_label_distributions():
    _, _, counts = _clients()
    assert cluster_clients(counts, 2, np.random.default_rng(0)).tolist() == [0, 0, 0, 1, 1, 1]


# --- encoders and the concatenated model ------------------------------------------------------------------


def test_lenet_encoder_is_the_84d_penultimate_layer():
    model = LeNet5(10, in_channels=1, image_size=16)
    assert last_linear_name(model) == "classifier.4"
    encoder, dim = make_encoder(model)
    assert dim == 84
    params = model_state(model)
    keys = encoder_keys(model, params)
    assert "classifier.4.weight" not in keys and "classifier.2.weight" in keys
    x = torch.randn(2, 1, 16, 16)
    feats = torch.func.functional_call(encoder, {k: params[k] for k in keys}, (x,))
    assert feats.shape == (2, 84)
    # the encoder's features fed to the model's own head reproduce the model's logits
    torch.testing.assert_close(model.classifier[4](feats), model(x))


@pytest.mark.parametrize("num_clusters", [1, 3, 5])
def test_concat_feature_dim_is_clusters_times_encoder_dim(num_clusters):
    model = LeNet5(10, in_channels=1, image_size=16)
    algo = FedConcat(num_clusters=num_clusters)
    cluster_params = [model_state(model) for _ in range(num_clusters)]
    concat, params = algo.build_concat_model(model, cluster_params, torch.Generator().manual_seed(0))
    assert concat.head.in_features == num_clusters * 84
    assert params["head.weight"].shape == (10, num_clusters * 84)
    x = torch.randn(3, 1, 16, 16)
    assert concat.features(x).shape == (3, num_clusters * 84)
    assert torch.func.functional_call(concat, params, (x,)).shape == (3, 10)


def test_concat_encoders_stay_in_eval_mode():
    encoder, dim = make_encoder(nn.Sequential(nn.Linear(4, 5), nn.Dropout(0.5), nn.Linear(5, 2)))
    concat = ConcatModel(encoder, 2, dim, 2).train()
    assert concat.head.training and not any(m.training for m in concat.encoders.modules())


def test_model_without_linear_layer_is_an_error():
    with pytest.raises(
        ValueError,
        match=r"^parameter 'model': got a Sequential without an nn\.Linear layer; allowed: a model with an nn\.Linear ",
    ):
        make_encoder(nn.Sequential(nn.ReLU()))


# --- stage 2: per-cluster FedAvg ---------------------------------------------------------------------------


def _result(client_id, value, n):
    return LocalResult(
        params={"w": torch.tensor([value])},
        num_steps=1,
        num_samples=n,
        epochs=1,
        train_loss=0.0,
        lr=0.1,
        momentum=0.0,
        weight_decay=0.0,
        client_id=client_id,
    )


def test_aggregate_clusters_averages_within_clusters_only():
    before = [{"w": torch.tensor([0.0])}, {"w": torch.tensor([5.0])}, {"w": torch.tensor([7.0])}]
    assignment = [0, 0, 1, 2]
    # clients 0, 1 (cluster 0) with sizes 1 and 3 -> (1*2 + 3*4) / 4 = 3.5; client 2 (cluster 1) alone -> 10
    after = aggregate_clusters(before, assignment, [_result(0, 2.0, 1), _result(1, 4.0, 3), _result(2, 10.0, 5)])
    assert [float(p["w"]) for p in after] == [3.5, 10.0, 7.0]  # cluster 2 not picked: unchanged


def test_one_cluster_encoder_phase_equals_fedavg():
    xs, ys, counts = _clients()
    model = _mlp()
    init = model_state(model)
    rounds, m = 3, 3
    algo = FedConcat(num_clusters=1, encoder_rounds=rounds, classifier_rounds=0)
    out = _run_stages(
        algo,
        model,
        init,
        xs,
        ys,
        label_counts=counts,
        total_rounds=rounds,
        clients_per_round=m,
        select=_selector(6, m, 5),
    )
    assert out.model is None and out.classifier_rounds == 0

    # reference FedAvg: same selection stream, same per-(round, client) generators, FedAvg weights n_k / sum n
    fedavg = FedAvg().bind(tuple(k for k, _ in model.named_parameters()))
    select = _selector(6, m, 5)
    glob = dict(init)
    for rnd in range(1, rounds + 1):
        res = [_train(xs, ys, model, glob, int(c), rnd, fedavg) for c in select(rnd)]
        sizes = np.array([r.num_samples for r in res], dtype=float)
        glob, _ = fedavg.aggregate(glob, res, sizes / sizes.sum(), {})
    for k in glob:
        torch.testing.assert_close(out.cluster_params[0][k], glob[k], rtol=1e-6, atol=1e-7)
    assert any(not torch.equal(glob[k], init[k]) for k in glob)  # training happened


def test_clients_train_their_own_cluster_and_unpicked_clusters_are_untouched():
    xs, ys, counts = _clients()
    model = _mlp()
    init = model_state(model)
    algo = FedConcat(num_clusters=2, encoder_rounds=1, classifier_rounds=0)
    select = lambda rnd: [0, 1]  # noqa: E731 -- both from cluster 0
    out = _run_stages(
        algo, model, init, xs, ys, label_counts=counts, total_rounds=1, clients_per_round=2, select=select
    )
    assert out.assignment.tolist() == [0, 0, 0, 1, 1, 1]
    assert out.history[0]["clusters_trained"] == [0]
    assert all(torch.equal(out.cluster_params[1][k], init[k]) for k in init)
    assert any(not torch.equal(out.cluster_params[0][k], init[k]) for k in init)


# --- stage 3: classifier phase -----------------------------------------------------------------------------


@pytest.mark.parametrize("local_batches", [None, 2])
def test_classifier_phase_trains_only_the_head(local_batches):
    xs, ys, counts = _clients()
    model = _mlp()
    algo = FedConcat(num_clusters=2, encoder_rounds=2, classifier_rounds=3, classifier_local_batches=local_batches)
    seen = []

    def evaluate(concat, params, plan):
        seen.append(plan.round)
        logits = torch.func.functional_call(concat, params, (torch.cat(xs),))
        return {"accuracy": float((logits.argmax(1) == torch.cat(ys)).float().mean())}

    out = _run_stages(
        algo,
        model,
        model_state(model),
        xs,
        ys,
        label_counts=counts,
        total_rounds=5,
        clients_per_round=3,
        select=_selector(6, 3, 1),
        evaluate=evaluate,
    )
    assert seen == [3, 4, 5]
    assert [h["phase"] for h in out.history] == ["encoder"] * 2 + ["classifier"] * 3
    assert [h["round_index"] for h in out.history] == [0, 1, 2, 3, 4]
    assert [h["phase_round"] for h in out.history] == [0, 1, 0, 1, 2]
    assert 0.0 <= out.history[-1]["accuracy"] <= 1.0
    keys = encoder_keys(model, out.cluster_params[0])
    for j in range(2):  # frozen encoders are exactly the cluster encoders
        for k in keys:
            assert torch.equal(out.params[f"encoders.{j}.{k}"], out.cluster_params[j][k])
    assert out.params["head.weight"].shape == (3, 2 * 6)


def test_local_batch_cap():
    xs, ys, _ = _clients()
    model = _mlp()
    algo = FedAvg().bind(tuple(k for k, _ in model.named_parameters()))
    res = _train(xs, ys, model, model_state(model), 0, 1, algo, max_batches=2)
    assert res.num_steps == 2 and res.num_samples == 8  # 2 batches of 4
    full = _train(xs, ys, model, model_state(model), 0, 1, algo)
    assert full.num_steps == 3  # 1 epoch of 12 samples in batches of 4


# --- round split -------------------------------------------------------------------------------------------

# Budget: T_e = floor(T - K/2 * N/M - s/w * T_c); LeNet-5/CIFAR-10: w = 62,006, s = 5*84*10 + 10 = 4,210.
SPLIT_CASES = [
    # T    participation  T_c   expected (T_e, T_c)   source
    (500, 0.1, 200, (461, 200)),  # FedEntOpt: 500 - 25 - 13.58
    (500, 1.0, 200, (483, 200)),  # full participation: 500 - 2.5 - 13.58
    (50, 1.0, 200, (33, 200)),  # FedConcat's setting (paper reports 31)
    (100, 0.1, 0, (75, 0)),  # no classifier rounds: 100 - 25
]


@pytest.mark.parametrize("total, participation, classifier_rounds, expected", SPLIT_CASES)
def test_round_split(total, participation, classifier_rounds, expected):
    assert (
        fedconcat_round_split(
            total,
            num_clusters=5,
            model_params=62_006,
            classifier_params=4_210,
            participation=participation,
            classifier_rounds=classifier_rounds,
        )
        == expected
    )


def test_round_split_from_the_model_matches_the_formula():
    algo = FedConcat()
    assert algo.round_split(500, LeNet5(10), num_clients=100, clients_per_round=10) == (461, 200)
    assert FedConcat(encoder_rounds=7, classifier_rounds=3).round_split(
        500, LeNet5(10), num_clients=100, clients_per_round=10
    ) == (7, 3)


def test_round_split_too_small_budget_is_an_error():
    with pytest.raises(
        ValueError,
        match=r"^parameter 'total_rounds': got 20 \(leaves -18\.58 encoder rounds\); allowed: an integer >= 40,",
    ):
        fedconcat_round_split(20, num_clusters=5, model_params=62_006, classifier_params=4_210, participation=0.1)


def test_registry_builds_fedconcat():
    from fedlib.algorithms import make_algorithm

    algo = make_algorithm("fedconcat", num_clusters=3)
    assert isinstance(algo, FedConcat) and algo.num_clusters == 3
    assert type(algo).plan_round is not Algorithm.plan_round  # its own round shape (two phases)
    with pytest.raises(ValueError, match="algorithm 'fedconcat' parameter 'num_clusters': got 0; allowed: an integer"):
        FedConcat(num_clusters=0)


def test_weighted_average_of_identical_heads_is_identity():
    # the classifier phase averages only the head; identical inputs must come back unchanged
    d = {"w": torch.randn(5)}
    torch.testing.assert_close(weighted_average([d, d, d], [0.2, 0.3, 0.5])["w"], d["w"])


def test_the_stages_are_reproducible_and_stop_at_the_end():
    xs, ys, counts = _clients()
    model = _mlp()
    kwargs = dict(label_counts=counts, total_rounds=2, clients_per_round=2)

    def run():
        algo = FedConcat(num_clusters=2, encoder_rounds=1, classifier_rounds=1, classifier_local_batches=1)
        return algo, _run_stages(algo, model, model_state(model), xs, ys, select=_selector(6, 2, 4), **kwargs)

    (algo, ran), (_, again) = run(), run()
    assert again.round == 2 and [h["picked"] for h in again.history] == [h["picked"] for h in ran.history]
    for k in ran.params:
        assert torch.equal(again.params[k], ran.params[k])
    with pytest.raises(ValueError, match="the run has had all its 2 rounds"):
        algo.plan_round(3, again, config=_CONFIG, model=model)
