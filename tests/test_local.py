"""fedlib.training.local: SGD step, batch order and local training against torch.optim.SGD (exact equality on CPU)."""

import torch
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.seeds import CLIENT_STREAMS
from fedlib.training.local import (
    LocalHyperParams,
    client_batch_order,
    client_generators,
    client_seed,
    local_train,
    make_generator,
    model_state,
    sgd_step,
    trainable_keys,
)


def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 4))


def _data(n=50, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 4, (n,), generator=g)


def test_sgd_step_matches_torch_optim_sgd_hand_case():
    # Tolerance: exact (torch.equal) -- same ops in the same order as PyTorch's single-tensor SGD.
    p0 = torch.tensor([1.0, -2.0, 0.5])
    grads = [torch.tensor([0.1, 0.2, -0.3]), torch.tensor([-0.5, 0.0, 0.25]), torch.tensor([0.3, -0.1, 0.05])]
    for momentum, wd in [(0.9, 5e-4), (0.0, 0.0), (0.0, 1e-3), (0.5, 0.0)]:
        ref = p0.clone().requires_grad_(True)
        opt = torch.optim.SGD([ref], lr=0.1, momentum=momentum, weight_decay=wd)
        params, bufs = {"w": p0.clone()}, {}
        for g in grads:
            ref.grad = g.clone()
            opt.step()
            params, bufs = sgd_step(params, {"w": g}, bufs, lr=0.1, momentum=momentum, weight_decay=wd)
        assert torch.equal(params["w"], ref.detach()), (momentum, wd)
    # first step with momentum: buf = g + wd*p, p -= lr*buf (hand computed)
    new, bufs = sgd_step(
        {"w": torch.tensor([1.0])}, {"w": torch.tensor([0.5])}, {}, lr=0.1, momentum=0.9, weight_decay=0.1
    )
    assert torch.allclose(bufs["w"], torch.tensor([0.6])) and torch.allclose(new["w"], torch.tensor([0.94]))


def test_client_batch_order_keeps_last_partial_batch_and_permutes_each_epoch():
    order = client_batch_order(10, 4, 2, make_generator(3))
    assert [len(b) for b in order] == [4, 4, 2, 4, 4, 2]
    for e in range(2):
        assert sorted(torch.cat(order[3 * e : 3 * e + 3]).tolist()) == list(range(10))
    again = client_batch_order(10, 4, 2, make_generator(3))
    assert all(torch.equal(a, b) for a, b in zip(order, again))
    assert client_batch_order(0, 4, 2, make_generator(3)) == []


def test_client_seed_streams_differ():
    seeds = {client_seed(0, r, k, s) for r in range(3) for k in range(3) for s in range(3)}
    assert len(seeds) == 27


def test_client_generators_are_the_streams_of_the_stored_runs():
    # the stream numbers are part of every stored run: batch order 0 (CPU), augmentation 1, torch RNG 2
    assert CLIENT_STREAMS == {"batch_order": 0, "augmentation": 1, "torch_rng": 2}
    order, augment = client_generators(7, 3, 5, "cpu")
    assert order.device.type == "cpu" and augment.device.type == "cpu"
    for gen, stream in ((order, 0), (augment, 1)):
        plain = make_generator(client_seed(7, 3, 5, stream))
        assert torch.equal(torch.rand(4, generator=gen), torch.rand(4, generator=plain))


def test_one_client_with_all_data_equals_centralised_sgd():
    # E epochs of local_train (FedAvg loss) == torch.optim.SGD on model(x) with the same batch order.
    # Tolerance: exact (torch.equal) on CPU.
    x, y = _data()
    model = _mlp()
    params = model_state(model)
    alg = make_algorithm("fedavg").bind(trainable_keys(model))
    hp = LocalHyperParams(lr=0.05, momentum=0.9, weight_decay=5e-4, batch_size=16, epochs=3)
    res = local_train(model, params, x, y, {}, alg, hp, make_generator(7))
    assert res.num_steps == 3 * 4 and res.num_samples == 50 and res.epochs == 3

    ref = _mlp()
    opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9, weight_decay=5e-4)
    for idx in client_batch_order(50, 16, 3, make_generator(7)):
        opt.zero_grad()
        nn.functional.cross_entropy(ref(x[idx]), y[idx]).backward()
        opt.step()
    for k, v in ref.state_dict().items():
        assert torch.equal(res.params[k], v), k
    # the input params are not modified
    for k, v in _mlp().state_dict().items():
        assert torch.equal(params[k], v)
