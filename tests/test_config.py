"""ExperimentConfig: paper defaults, up-front validation with pinned messages, dict round trip, hash."""

import pytest

from fedlib._validate import ParameterError
from fedlib.training.config import DEFAULT_WEIGHT_DECAY, ExperimentConfig, config_hash


def test_paper_defaults_and_model_dependent_weight_decay():
    c = ExperimentConfig()
    assert (c.local_epochs, c.batch_size, c.lr, c.lr_decay, c.momentum) == (5, 64, 0.01, 0.98, 0.9)
    assert (c.num_clients, c.clients_per_round, c.partition, c.beta, c.augment) == (100, 10, "dirichlet", 0.1, True)
    assert c.weight_decay == 5e-4 == DEFAULT_WEIGHT_DECAY["lenet5"]
    assert ExperimentConfig(model="vgg11").weight_decay == 1e-3
    assert ExperimentConfig(model="vgg11", weight_decay=0.0025).weight_decay == 0.0025
    assert c.replace(model="vgg11").weight_decay == 1e-3
    q = c.replace(partition="quantity", classes_per_client=2)
    assert q.beta is None and q.validate() is q
    c.validate()


@pytest.mark.parametrize(
    "changes, message",
    [
        # the built-in selectors first; any registered from outside fedlib ('fedentopt-swap' by repro) follow
        (
            dict(selector="entopt"),
            "config parameter 'selector': got 'entopt'; allowed: 'random', 'fedentopt', 'kl', 'dc'",
        ),
        (dict(algorithm="fedavgg"), "config parameter 'algorithm': got 'fedavgg'; allowed: 'fedavg', 'fedprox'"),
        (dict(model="lenet"), "config parameter 'model': got 'lenet'; allowed: 'lenet5', 'vgg11'"),
        (dict(num_clients=0), "config parameter 'num_clients': got 0; allowed: an integer >= 1."),
        (
            dict(clients_per_round=101),
            "config parameter 'clients_per_round': got 101; allowed: an integer <= num_clients (100).",
        ),
        (dict(lr="0.01"), "config parameter 'lr': got '0.01'; allowed: a finite real number > 0.0."),
        (dict(rounds=2.5), "config parameter 'rounds': got 2.5; allowed: an integer >= 1."),
        (
            dict(dropout_prob=1.0),
            "config parameter 'dropout_prob': got 1.0; allowed: a finite real number >= 0.0 and < 1.0.",
        ),
        (dict(beta=-1.0), "config parameter 'beta': got -1.0; allowed: a finite real number > 0.0."),
        (dict(partition="quantity"), "config parameter 'classes_per_client': got None; allowed: an integer >= 1."),
        (
            dict(selector="fedentopt", selector_params={"buffer_fraction": 0.95}),
            "selector 'fedentopt' parameter 'buffer_size': got Q=95 (from buffer_fraction=0.95); allowed: "
            "0 <= Q <= K - M = 100 - 10 = 90",
        ),
        (
            dict(algorithm="fedprox", algorithm_params={"m": 1}),
            "algorithm 'fedprox' unknown parameter 'm': got 1; allowed: the parameters mu.",
        ),
        (dict(dataset="cifar11"), "config parameter 'dataset': got 'cifar11'; allowed: "),
        (dict(dp_negative="abs"), "config parameter 'dp_negative': got 'abs'; allowed: 'clip', 'keep'."),
        (dict(device="gpu"), "config parameter 'device': got 'gpu'; allowed: 'cpu', 'cuda' or 'cuda:N'."),
        (dict(augment="yes"), "config parameter 'augment': got 'yes'; allowed: True or False."),
        (dict(lr=float("inf")), "config parameter 'lr': got inf; allowed: a finite real number > 0.0."),
        (
            dict(label_dp_epsilon="1"),
            "config parameter 'label_dp_epsilon': got '1'; allowed: None or a finite real number > 0.0.",
        ),
        (dict(engine="gpu"), "config parameter 'engine': got 'gpu'; allowed: 'reference', 'batched'."),
    ],
)
def test_validate_names_field_value_and_allowed(changes, message):
    with pytest.raises(ParameterError) as info:
        ExperimentConfig(**changes).validate()
    assert str(info.value).startswith(message)


def test_dict_round_trip_and_unknown_fields():
    c = ExperimentConfig(
        selector="fedentopt",
        selector_params={"buffer_fraction": 0.5},
        algorithm="fedprox",
        algorithm_params={"mu": 1e-3},
        rounds=3,
    )
    assert ExperimentConfig.from_dict(c.to_dict()) == c
    with pytest.raises(
        ParameterError, match="config unknown parameter 'round': got 3; allowed: the parameters dataset, "
    ):
        ExperimentConfig.from_dict({"round": 3})


def test_config_hash_depends_on_config_and_code_version():
    c = ExperimentConfig()
    h = config_hash(c, "0.1.0")
    assert len(h) == 16 and h == config_hash(ExperimentConfig(), "0.1.0")
    assert h == config_hash(ExperimentConfig(weight_decay=5e-4), "0.1.0")  # the explicit default hashes alike
    assert h != config_hash(c, "0.1.1")
    assert h != config_hash(c.replace(seed=1), "0.1.0")


def test_a_config_builds_its_selector_and_algorithm_and_checks_them():
    c = ExperimentConfig(selector="fedentopt", selector_params={"buffer_fraction": 0.5})
    assert c.validate() is c
    selector, algorithm = c.build_selector_and_algorithm()
    assert selector.buffer_fraction == 0.5 and algorithm.name == "fedavg"
    c.selector_params["buffer_fraction"] = 2.0  # a changed field is checked again
    with pytest.raises(ParameterError, match=r"selector 'fedentopt' parameter 'buffer_fraction': got 2\.0; allowed: "):
        c.validate()


# ----------------------------------------------------------------------------------------------- engine options
def test_engine_options_reach_the_batched_engine():
    import torch

    from fedlib.training.batched import options_from_config

    c = ExperimentConfig(
        engine="batched",
        engine_options={
            "kernel": "vmap",
            "shrink": "mask",
            "compile": True,
            "cuda_graphs": True,
            "amp_dtype": "bfloat16",
            "chunk_size": 4,
            "tf32": True,
        },
    ).validate()
    opts = options_from_config(c.engine_options)
    got = (opts.kernel, opts.shrink, opts.compile, opts.cuda_graphs, opts.chunk_size)
    assert got == ("vmap", "mask", True, True, 4)
    assert opts.amp_dtype is torch.bfloat16
    assert ExperimentConfig.from_dict(c.to_dict()) == c  # JSON round trip (config.json, stored runs)


@pytest.mark.parametrize(
    "options, match",
    [
        (
            {"kernal": "vmap"},
            r"config engine_options unknown parameter 'kernal': got 'vmap'; allowed: the parameters kernel, ",
        ),
        (
            {"kernel": "fast"},
            r"config engine_options parameter 'kernel': got 'fast'; allowed: 'auto', 'vmap', 'loop', 'sequential'\.",
        ),
        ({"compile": 1}, r"config engine_options parameter 'compile': got 1; allowed: True, False\."),
        (
            {"amp_dtype": "bf16"},
            r"config engine_options parameter 'amp_dtype': got 'bf16'; allowed: None, 'bfloat16', 'float16'\.",
        ),
        ({"chunk_size": 0}, r"config engine_options parameter 'chunk_size': got 0; allowed: None or an integer >= 1\."),
        (
            {"cuda_graphs": True},
            r"config engine_options parameter 'cuda_graphs': got True; allowed: False unless compile=True \(CUDA",
        ),
        (
            {"compile": True, "kernel": "loop"},
            r"config engine_options parameter 'kernel': got 'loop'; allowed: 'vmap' or 'auto' with compile=True ",
        ),
    ],
)
def test_bad_engine_options_name_the_option_and_what_is_allowed(options, match):
    with pytest.raises(ParameterError, match="^" + match):
        ExperimentConfig(engine="batched", engine_options=options).validate()


def test_bf16_needs_the_batched_engine():
    allowed = "allowed: no amp_dtype unless engine='batched'"
    with pytest.raises(
        ParameterError, match=r"config parameter 'engine_options': got \{'amp_dtype': 'bfloat16'\}; " + allowed
    ):
        ExperimentConfig(engine_options={"amp_dtype": "bfloat16"}).validate()
