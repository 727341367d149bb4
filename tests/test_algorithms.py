"""Algorithms: reductions to FedAvg / plain cross-entropy, and the equations of each method."""

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedlib._validate import ParameterError
from fedlib.algorithms import ALGORITHMS, Algorithm, FedProx, algorithm_class, make_algorithm
from fedlib.algorithms.base import weighted_average
from fedlib.algorithms.fednova import fednova_normaliser
from fedlib.training.local import (
    LocalHyperParams,
    LocalResult,
    local_train,
    make_generator,
    model_state,
    trainable_keys,
)


def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 4))


def _clients(n_clients=3, seed=1):
    g = torch.Generator().manual_seed(seed)
    out = []
    for k in range(n_clients):
        n = 20 + 7 * k
        out.append((torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 4, (n,), generator=g)))
    return out


def _round(name, params=None, momentum=0.9, epochs=2, server_state=None, **alg_params):
    """One FedAvg-style round of algorithm ``name`` on three tiny clients; returns (new_global, results, alg)."""
    model = _mlp()
    alg = make_algorithm(name, **alg_params).bind(trainable_keys(model))
    g = model_state(model) if params is None else params
    ss = alg.init_server_state(g, num_clients=5) if server_state is None else server_state
    hp = LocalHyperParams(lr=0.05, momentum=momentum, weight_decay=5e-4, batch_size=8, epochs=epochs)
    results = []
    for k, (x, y) in enumerate(_clients()):
        counts = torch.bincount(y, minlength=4).float()
        cs = alg.init_client_state(g)
        ctx = alg.client_context(k, counts, ss, cs)
        r = local_train(model, g, x, y, ctx, alg, hp, make_generator(100 + k), client_id=k)
        _, r.state_delta = alg.update_client_state(cs, r, global_params=g, server_state=ss, ctx=ctx, hp=hp)
        results.append(r)
    n = np.array([r.num_samples for r in results], dtype=float)
    new, new_ss = alg.aggregate(g, results, n / n.sum(), ss)
    return new, results, alg, new_ss


def _equal(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_registry_names_and_errors():
    assert {"fedavg", "fedprox", "fednova", "scaffold", "fedrs", "fedlc", "fedconcat", "fedentropy"} <= set(ALGORITHMS)
    with pytest.raises(ValueError, match="algorithm parameter 'name': got 'fedavgg'; allowed: 'fedavg', 'fedprox'"):
        make_algorithm("fedavgg")
    with pytest.raises(ValueError, match=r"unknown parameter 'beta': got 0.5; allowed: the parameters alpha, variant"):
        make_algorithm("fedrs", beta=0.5)
    with pytest.raises(ValueError, match="algorithm 'fedprox' parameter 'mu': got -1.0; allowed: a finite real"):
        make_algorithm("fedprox", mu=-1.0)
    assert isinstance(make_algorithm("fedlc", tau=0.5), Algorithm)


@pytest.mark.parametrize(
    "name, params, message",
    [
        ("fedavgg", {}, "algorithm parameter 'name': got 'fedavgg'; allowed: 'fedavg', 'fedprox', 'fednova', "),
        (
            "fedrs",
            {"beta": 0.5},
            "algorithm 'fedrs' unknown parameter 'beta': got 0.5; allowed: the parameters alpha, variant.",
        ),
        ("fedavg", {"mu": 0.1}, "algorithm 'fedavg' unknown parameter 'mu': got 0.1; allowed: no parameters."),
        (
            "fedprox",
            {"mu": -1.0},
            "algorithm 'fedprox' parameter 'mu': got -1.0; allowed: a finite real number >= 0.0.",
        ),
        ("fedprox", {"mu": "0.1"}, "algorithm 'fedprox' parameter 'mu': got '0.1'; allowed: a finite real number >= "),
        (
            "fedlc",
            {"zero_count": 0.0},
            "algorithm 'fedlc' parameter 'zero_count': got 0.0; allowed: a finite real number > 0.0.",
        ),
        (
            "fedrs",
            {"alpha": 2},
            "algorithm 'fedrs' parameter 'alpha': got 2; allowed: a finite real number >= 0.0 and <= 1.0.",
        ),
        (
            "scaffold",
            {"normaliser": "adam"},
            "algorithm 'scaffold' parameter 'normaliser': got 'adam'; allowed: 'momentum', 'steps'.",
        ),
        (
            "fedconcat",
            {"encoder_rounds": -1},
            "algorithm 'fedconcat' parameter 'encoder_rounds': got -1; allowed: None or an integer >= 0.",
        ),
        ("fedentropy", {"use_pools": 1}, "algorithm 'fedentropy' parameter 'use_pools': got 1; allowed: True, False."),
    ],
)
def test_make_algorithm_reports_one_error_shape(name, params, message):
    # one type (a TypeError and a ValueError) and one message shape: part, parameter, value given, what is allowed
    with pytest.raises(ParameterError) as info:
        make_algorithm(name, **params)
    assert isinstance(info.value, TypeError) and isinstance(info.value, ValueError)
    assert str(info.value).startswith(message)
    assert info.value.value == (name if "name" in message.split(":")[0] else next(iter(params.values())))


def test_hyper_parameters_are_declared_once_as_a_frozen_dataclass():
    for name in ALGORITHMS:
        cls = algorithm_class(name)
        assert dataclasses.is_dataclass(cls.HParams) and cls.HParams.__dataclass_params__.frozen, name
        alg = make_algorithm(name)
        assert alg.params_dict() == dataclasses.asdict(alg.hparams), name  # derived from the fields
        assert all(getattr(alg, k) == v for k, v in alg.params_dict().items()), name
    prox = make_algorithm("fedprox", mu=1)
    assert prox.hparams == FedProx.HParams(mu=1.0) and repr(prox) == "FedProx(mu=1.0)"
    with pytest.raises(dataclasses.FrozenInstanceError):
        prox.hparams.mu = 0.5
    with pytest.raises(AttributeError, match="mu is a hyper-parameter of FedProx"):
        prox.mu = 0.5
    # the per-run state (the trainable keys) lives on the algorithm, not in its frozen hyper-parameters
    assert prox.bind(["w"]).trainable == ("w",)
    assert make_algorithm("scaffold", correction="after_step").params_dict() == {
        "normaliser": "steps",
        "correction": "after_step",
    }


def test_fedavg_of_identical_models_is_that_model():
    # Tolerance: exact.
    p = model_state(_mlp())
    res = [LocalResult({k: v.clone() for k, v in p.items()}, 1, n, 1, 0.0, 0.1, 0.9, 0.0) for n in (2, 3, 5)]
    new, _ = make_algorithm("fedavg").bind(trainable_keys(_mlp())).aggregate(p, res, [0.2, 0.3, 0.5], {})
    assert _equal(new, p)


def test_fedavg_weights_by_data_size():
    a = {"w": torch.tensor([0.0, 1.0])}
    b = {"w": torch.tensor([4.0, 1.0])}
    assert torch.allclose(weighted_average([a, b], [0.25, 0.75])["w"], torch.tensor([3.0, 1.0]))


@pytest.mark.slow
def test_fedprox_mu_zero_equals_fedavg():
    # Tolerance: exact (the proximal gradient is exactly 0).
    assert _equal(_round("fedprox", mu=0.0)[0], _round("fedavg")[0])
    assert not _equal(_round("fedprox", mu=1.0)[0], _round("fedavg")[0])


def test_fedprox_loss_adds_proximal_term():
    alg = make_algorithm("fedprox", mu=0.5).bind(["w"])
    logits, y = torch.randn(4, 3), torch.tensor([0, 1, 2, 0])
    loss = alg.loss(logits, y, params={"w": torch.tensor([1.0, 2.0])}, global_params={"w": torch.zeros(2)}, ctx={})
    assert torch.allclose(loss, F.cross_entropy(logits, y) + 0.25 * 5.0)


@pytest.mark.slow
@pytest.mark.parametrize("normaliser", ["momentum", "steps"])
def test_scaffold_first_round_equals_fedavg_and_updates_control_variates(normaliser):
    # Zero control variates: the corrected gradient equals the plain one. Tolerance: exact.
    new, results, alg, ss = _round("scaffold", normaliser=normaliser)
    assert _equal(new, _round("fedavg")[0])
    g = model_state(_mlp())
    for r in results:  # option II: Δc_i = c_i+ - c_i = -c + (x - y_i)/(a_i lr) with c = c_i = 0
        a = fednova_normaliser(r.num_steps, r.momentum) if normaliser == "momentum" else r.num_steps
        assert (a > r.num_steps) == (normaliser == "momentum")  # momentum 0.9 counts each step more than once
        for k in alg.trainable:
            assert torch.allclose(r.state_delta[k], (g[k] - r.params[k]) / (a * r.lr))
    for k in alg.trainable:  # c += (|S|/N) mean Δc = sum Δc / N, N = 5
        assert torch.allclose(ss["c:" + k], sum(r.state_delta[k] for r in results) / 5)
    # second round with non-zero control variates differs from FedAvg
    assert not _equal(_round("scaffold", params=new, server_state=ss)[0], _round("fedavg", params=new)[0])


@pytest.mark.slow
def test_scaffold_normalisers_agree_without_momentum_and_reject_unknown():
    # With momentum 0, a_i = K_i, so both normalisers give the same control variates. Tolerance: exact.
    one = _round("scaffold", momentum=0.0, normaliser="momentum")[1]
    two = _round("scaffold", momentum=0.0, normaliser="steps")[1]
    assert all(_equal(a.state_delta, b.state_delta) for a, b in zip(one, two))
    with pytest.raises(ValueError, match="parameter 'normaliser': got 'adam'; allowed: 'momentum', 'steps'"):
        make_algorithm("scaffold", normaliser="adam")


def test_scaffold_correct_grads():
    alg = make_algorithm("scaffold").bind(["w"])
    ctx = alg.client_context(0, None, {"c:w": torch.tensor([1.0, 2.0])}, {"w": torch.tensor([0.5, 0.5])})
    out = alg.correct_grads({"w": torch.tensor([0.0, 1.0])}, ctx=ctx)
    assert torch.equal(out["w"], torch.tensor([0.5, 2.5]))


def _nonzero_scaffold_state(alg, g, seed=5):
    gen = torch.Generator().manual_seed(seed)
    ss = alg.init_server_state(g, num_clients=5)
    ss.update({"c:" + k: 0.1 * torch.randn(g[k].shape, generator=gen) for k in alg.trainable})
    cs = {k: 0.1 * torch.randn(g[k].shape, generator=gen) for k in alg.trainable}
    return ss, cs


def test_scaffold_after_step_matches_niid_bench_loop():
    # Reference: NIID-Bench's client loop written with torch.optim.SGD -- optimiser step on the plain gradient,
    # then y <- y - lr (c - c_i) outside the momentum buffer; c_i+ = c_i - c + (x - y)/(K lr). Tolerance: exact.
    model = _mlp()
    keys = trainable_keys(model)
    alg = make_algorithm("scaffold", correction="after_step").bind(keys)
    assert (alg.normaliser, alg.has_after_step) == ("steps", True)
    g = model_state(model)
    ss, cs = _nonzero_scaffold_state(alg, g)
    x, y = _clients()[1]
    hp = LocalHyperParams(lr=0.05, momentum=0.9, weight_decay=5e-4, batch_size=8, epochs=2)
    ctx = alg.client_context(0, None, ss, cs)
    res = local_train(model, g, x, y, ctx, alg, hp, make_generator(7))
    ref = _mlp()
    ref.load_state_dict(g)
    opt = torch.optim.SGD(ref.parameters(), lr=hp.lr, momentum=hp.momentum, weight_decay=hp.weight_decay)
    from fedlib.training.local import client_batch_order

    steps = 0
    for idx in client_batch_order(len(y), hp.batch_size, hp.epochs, make_generator(7)):
        opt.zero_grad()
        F.cross_entropy(ref(x[idx]), y[idx]).backward()
        opt.step()
        with torch.no_grad():
            for k, p in ref.named_parameters():
                p.add_(ss["c:" + k] - cs[k], alpha=-hp.lr)
        steps += 1
    assert res.num_steps == steps
    assert all(torch.equal(res.params[k], v) for k, v in ref.state_dict().items())
    new, delta = alg.update_client_state(cs, res, global_params=g, server_state=ss, ctx=ctx, hp=hp)
    for k in keys:
        assert torch.allclose(new[k], cs[k] - ss["c:" + k] + (g[k] - res.params[k]) / (steps * hp.lr))
        assert torch.equal(delta[k], new[k] - cs[k])


def test_scaffold_corrections_agree_for_plain_sgd_and_differ_with_momentum():
    # Without momentum and weight decay, p - lr (g + corr) and (p - lr g) - lr corr are the same update
    # (up to float rounding: atol 1e-6); with momentum the gradient-side correction is amplified by the buffer.
    model = _mlp()
    keys = trainable_keys(model)
    g = model_state(model)
    x, y = _clients()[0]
    out = {}
    for momentum in (0.0, 0.9):
        hp = LocalHyperParams(lr=0.05, momentum=momentum, weight_decay=0.0, batch_size=8, epochs=2)
        for corr in ("gradient", "after_step"):
            alg = make_algorithm("scaffold", correction=corr).bind(keys)
            ss, cs = _nonzero_scaffold_state(alg, g)
            ctx = alg.client_context(0, None, ss, cs)
            out[momentum, corr] = local_train(model, g, x, y, ctx, alg, hp, make_generator(3)).params
    assert all(torch.allclose(out[0.0, "gradient"][k], out[0.0, "after_step"][k], atol=1e-6) for k in keys)
    assert not all(torch.allclose(out[0.9, "gradient"][k], out[0.9, "after_step"][k], atol=1e-3) for k in keys)
    with pytest.raises(ValueError, match="parameter 'correction': got 'inside'; allowed: 'gradient', 'after_step'"):
        make_algorithm("scaffold", correction="inside")


def test_fednova_equal_steps_no_momentum_equals_fedavg():
    # Clients with equal step counts and ρ = 0: a_i cancels. Tolerance: atol 1e-6 (float32 params, float64 math).
    model = _mlp()
    keys = trainable_keys(model)
    g = model_state(model)
    res = []
    for s in range(3):
        p = model_state(_mlp(seed=10 + s))
        res.append(LocalResult(p, 7, 10 + s, 1, 0.0, 0.05, 0.0, 0.0))
    w = np.array([10, 11, 12]) / 33
    nova, _ = make_algorithm("fednova").bind(keys).aggregate(g, res, w, {})
    avg, _ = make_algorithm("fedavg").bind(keys).aggregate(g, res, w, {})
    for k in g:
        torch.testing.assert_close(nova[k], avg[k], atol=1e-6, rtol=0)
    # the same through local training of three clients with equal data sizes is covered by the formula; with
    # momentum and unequal steps FedNova differs from FedAvg:
    assert not _equal(_round("fednova")[0], _round("fedavg")[0])


def test_fednova_normaliser():
    assert fednova_normaliser(5, 0.0) == 5
    rho, tau = 0.9, 13
    brute = sum((1 - rho**t) / (1 - rho) for t in range(1, tau + 1))
    assert fednova_normaliser(tau, rho) == pytest.approx(brute, rel=1e-12)


@pytest.mark.slow
def test_fedrs_alpha_one_and_fedlc_tau_zero_are_cross_entropy():
    # Tolerance: exact (scale 1 and margin 0 leave the logits unchanged).
    logits, y = torch.randn(6, 4), torch.tensor([0, 1, 2, 3, 0, 1])
    counts = torch.tensor([3.0, 0.0, 5.0, 0.0])
    ce = F.cross_entropy(logits, y)
    for name, kw in [("fedrs", {"alpha": 1.0}), ("fedlc", {"tau": 0.0})]:
        alg = make_algorithm(name, **kw)
        ctx = alg.client_context(0, counts, {}, {})
        assert torch.equal(alg.loss(logits, y, params={}, global_params={}, ctx=ctx), ce), name
    assert _equal(_round("fedrs", alpha=1.0)[0], _round("fedavg")[0])
    assert _equal(_round("fedlc", tau=0.0)[0], _round("fedavg")[0])


def test_fedrs_reference_code_variant_soft_factor_on_bias_free_logits():
    # FedRepo's FedRS: s_c = alpha + (1 - alpha) n_c / max n_c on h W^T (no bias). Hand case: counts [4, 2, 0, 0],
    # alpha 0.5 -> s = [1, 0.75, 0.5, 0.5]. Tolerance: 1e-6 ((hW + b) - b vs hW in float32).
    model = nn.Sequential(nn.Flatten(), nn.Linear(6, 4))
    torch.manual_seed(0)
    nn.init.normal_(model[1].bias)
    keys = trainable_keys(model)
    alg = make_algorithm("fedrs", alpha=0.5, variant="reference-code").bind(keys)
    counts = torch.tensor([4.0, 2.0, 0.0, 0.0])
    ctx = alg.client_context(0, counts, {}, {})
    assert torch.equal(ctx["scale"], torch.tensor([1.0, 0.75, 0.5, 0.5]))
    x, y = torch.randn(5, 6), torch.tensor([0, 1, 1, 0, 0])
    params = {k: v.detach().clone().requires_grad_(True) for k, v in model_state(model).items()}
    logits = torch.func.functional_call(model, params, (x,))
    loss = alg.loss(logits, y, params=params, global_params=params, ctx=ctx)
    ref = F.cross_entropy((x @ params["1.weight"].T) * ctx["scale"], y)
    assert torch.allclose(loss, ref, atol=1e-6)
    g_w, g_b = torch.autograd.grad(loss, [params["1.weight"], params["1.bias"]])
    assert torch.allclose(g_b, torch.zeros(4), atol=1e-7)  # the bias is outside the training logits
    assert torch.allclose(g_w, torch.autograd.grad(ref, params["1.weight"])[0], atol=1e-6)
    paper = make_algorithm("fedrs", alpha=0.5).bind(keys)  # the default: binary mask on the full logits
    assert torch.equal(paper.client_context(0, counts, {}, {})["scale"], torch.tensor([1.0, 1.0, 0.5, 0.5]))
    with pytest.raises(ValueError, match="'fedrs' parameter 'variant': got 'soft'; allowed: 'paper', 'reference-code'"):
        make_algorithm("fedrs", variant="soft")


def test_fedrs_scales_absent_classes_and_fedlc_calibrates():
    logits, y = torch.randn(5, 4), torch.tensor([0, 2, 2, 0, 0])
    counts = torch.tensor([3.0, 0.0, 16.0, 0.0])
    rs = make_algorithm("fedrs", alpha=0.5)
    ctx = rs.client_context(0, counts, {}, {})
    assert torch.equal(ctx["scale"], torch.tensor([1.0, 0.5, 1.0, 0.5]))
    assert torch.allclose(
        rs.loss(logits, y, params={}, global_params={}, ctx=ctx),
        F.cross_entropy(logits * torch.tensor([1.0, 0.5, 1.0, 0.5]), y),
    )
    lc = make_algorithm("fedlc", tau=1.0)
    margin = lc.client_context(0, counts, {}, {})["margin"]
    # z_c - τ n_c^{-1/4}; absent classes counted as 1e-8 -> margin 100 τ (finite)
    assert torch.allclose(margin, torch.tensor([3.0**-0.25, 100.0, 0.5, 100.0]))
    assert torch.allclose(
        lc.loss(logits, y, params={}, global_params={}, ctx={"margin": margin}), F.cross_entropy(logits - margin, y)
    )


def test_registry_and_averaging_errors_name_the_argument():
    from fedlib.algorithms import register_algorithm, unregister_algorithm

    with pytest.raises(ParameterError, match=r"^parameter 'cls': got <class 'int'>; allowed: a subclass of fedlib\."):
        register_algorithm("toy", int)
    with pytest.raises(ParameterError, match=r"^parameter 'name': got 'fedavg'; allowed: a name not registered yet "):
        register_algorithm("fedavg", FedProx)
    with pytest.raises(ParameterError, match=r"^parameter 'name': got 'fedprox'; allowed: a name added by register_"):
        unregister_algorithm("fedprox")
    with pytest.raises(
        ParameterError, match=r"^parameter 'weights': got 1 weights; allowed: one weight per dict \(2\)"
    ):
        weighted_average([{"w": torch.zeros(1)}] * 2, [1.0])
    with pytest.raises(ParameterError, match=r"^parameter 'dicts': got \[\]; allowed: at least one dict of tensors\.$"):
        weighted_average([], [])
