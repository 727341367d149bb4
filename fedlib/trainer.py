"""The federated trainer: ``run_experiment(config) -> RunResult``.

One round r = 1…R (``Experiment.run_round``):

1. the selector picks M clients from the label counts the *server* sees (the true counts, or their Laplace-noised
   version when ``label_dp_epsilon`` is set -- DP never touches training);
2. availability: each picked client drops out with probability ``dropout_prob`` (it neither trains nor uploads);
   a straggler (a fixed random ``straggler_fraction`` of the pool, drawn once per run) trains a uniform random
   1…E epochs instead of E;
3. every remaining client trains locally (``fedlib.local.local_train``) from the global model with learning rate
   ``lr · lr_decay^(r−1)``, on its own data held on the device, augmented on the device (``fedlib.augment``);
4. the algorithm aggregates the uploads with FedAvg weights n_k/Σn_j (``Algorithm.aggregate``);
5. the global model is evaluated on the (never augmented) test set in large batches.

Randomness: every stream is derived from ``config.seed`` with ``np.random.SeedSequence([seed, stream])``, so
changing e.g. the selector does not change the partition: ``partition``, ``selection``, ``availability``
(dropout and straggler epochs), ``stragglers`` (the straggler set), ``label_dp``, ``model_init``; local training
uses per-(round, client) torch generators (``fedlib.local.client_seed``).

The per-round table (``RunResult.table``) has one row per round plus a row for round 0 (the initial model; it
carries the one-time label upload of 4·C·K bytes when the selector or the algorithm needs label counts):
``round, lr, test_accuracy, test_loss, train_loss, picked, num_picked, num_trained, num_dropped, entropy_bits,
covers_all_classes, entropy_bits_trained, bytes_uploaded, cumulative_bytes, seconds``.  ``picked`` is the
space-separated client ids in pick order; ``entropy_bits``/``covers_all_classes`` are computed on the pooled TRUE
label counts of the picked clients (``entropy_bits_trained`` on those that trained); ``bytes_uploaded`` is
``4 · p · upload_factor`` per client that uploaded (p = trainable parameters).  Columns added after ``seconds``:
``kept`` (space-separated ids, in pick order, of the clients whose models entered the aggregation),
``reselection_entropy_bits`` (entropy of the pooled TRUE label counts of the ``kept`` clients; 0.0 when none) and
``phase`` (``"init"`` for round 0, ``"global"`` for rounds that train one global model, ``"encoder"`` /
``"classifier"`` for FedConcat's two stages).  For the per-round algorithms every client that trained on at least
one sample uploads, so ``kept`` = the trained clients and ``reselection_entropy_bits`` = ``entropy_bits_trained``.

Round flows.  An algorithm's ``flow`` attribute picks the round driver (``Experiment.run_round``):

* ``None`` -- the per-round contract of ``fedlib.algorithms.base`` (FedAvg, FedProx, FedNova, SCAFFOLD, FedRS,
  FedLC), as described above.
* ``"fedentropy"`` -- FedEntropy (``fedlib.algorithms.fedentropy``, Algorithm 2 of Ling et al.).  With
  ``selector="random"`` the round's clients S_t come from FedEntropy's own ε-greedy positive/negative pools
  (``FedEntropy.sample`` on the ``selection`` stream; this *is* the paper's device selection); with any other
  selector (e.g. ``"fedentopt"``) that selector picks S_t and FedEntropy only judges (the pools are still updated
  but not used).  All of S_t that do not drop out train as usual; every trained client with data reports its mean
  soft label (Eq. 2: softmax of its *trained* model in eval mode over its un-augmented training inputs); the
  maximum entropy judgement (``FedEntropy.judge``) keeps a subset, moves each judged client to the pool of its
  verdict, and only the kept clients' models are FedAvg-averaged (weights n_k renormalised over the kept clients).
  Bytes: in FedEntropy's step 2 every trained client uploads only its soft label (C float32 = 4·C bytes), and in
  step 3 only the kept clients upload their models (§3.1 and "Communication Overhead" of the paper), so a round
  costs ``4·C·(#trained with data) + 4·p·(#kept)``.  ``train_loss`` averages over all trained clients (they all
  trained); ``kept`` is the judgement's positive set.
* ``"fedconcat"`` -- FedConcat (``fedlib.algorithms.fedconcat``).  ``config.rounds`` is the *FedAvg-equivalent
  communication budget* T (FedEntOpt §V-A5: "the same total communication budget as FedAvg"); FedConcat derives
  its encoder rounds T_e from it (``FedConcat.round_split``; e.g. T = 500, M/N = 10 %, K = 5, LeNet-5 gives
  T_e = 461) and adds ``classifier_rounds`` T_c, so the run lasts ``Experiment.total_rounds`` = T_e + T_c table
  rounds (661 in the paper's setting), not ``config.rounds`` (unless ``encoder_rounds`` is given explicitly, then
  T_e + T_c regardless of ``config.rounds``).  Clusters come from K-means on the label counts the server sees
  (DP-noised if ``label_dp_epsilon`` is set; new stream ``clustering``).  Every round the selector picks M clients
  (availability as above); in the encoder stage each trained client trains its own cluster's full model and each
  cluster is FedAvg-averaged over its trained members; in the classifier stage the trained clients train the head
  of the concatenated model (frozen encoders; head initialised from the new stream ``head_init``).  Learning rate:
  ``lr · lr_decay^(phase_round)``, i.e. the decay restarts at the first classifier round (the classifier is a fresh
  model; continuing the decay past round 461 would leave lr ≈ 1e-6).  Evaluation: there is no single global model
  in the encoder stage, so ``test_accuracy``/``test_loss`` are NaN there (this also keeps encoder rounds out of
  ``last_rounds_mean``); the concatenated model is evaluated after classifier rounds (``eval_every`` rule, last
  round always).  Bytes: 4·p per trained client in encoder rounds, 4·s per trained client in classifier rounds
  (s = K·d·C + C, the concatenated head), plus the one-time label upload 4·C·K at round 0; downloads (including
  the one-time broadcast of the K encoders) are not counted, as for every algorithm.  ``RunResult.global_params``
  is the concatenated model's state (``encoders.<j>.*``, ``head.*``) once the classifier stage has started.
"""
from __future__ import annotations

import dataclasses
import math
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch.func import functional_call

from .algorithms import make_algorithm
from .config import ExperimentConfig
from .local import LocalHyperParams, client_seed, local_train, make_generator, model_state, trainable_keys
from .runs import TABLE_COLUMNS, RunDir, RunResult, last_rounds_mean, make_table
from .seeds import stream_rng

__all__ = ["run_experiment", "Experiment", "TrainState"]

#: Round drivers ``Experiment.run_round`` knows (an algorithm's ``flow`` attribute; None = the per-round hooks).
FLOWS = (None, "fedentropy", "fedconcat")


@dataclass
class TrainState:
    """Everything that changes during a run (what a checkpoint holds)."""

    round: int
    global_params: dict
    server_state: dict
    client_states: dict
    selector_state: tuple
    selection_rng: np.random.Generator
    availability_rng: np.random.Generator
    rows: list
    #: State of an algorithm with its own round driver (FedConcat: a ``FedConcatState``); None otherwise.
    flow_state: object = None

    def to_checkpoint(self) -> dict:
        ckpt = {
            "round": int(self.round),
            "global_params": self.global_params,
            "server_state": self.server_state,
            "client_states": {int(k): v for k, v in self.client_states.items()},
            "selector_state": list(self.selector_state),
            "selection_rng": self.selection_rng.bit_generator.state,
            "availability_rng": self.availability_rng.bit_generator.state,
            "torch_rng": torch.get_rng_state(),
            "rows": list(self.rows),
        }
        if self.flow_state is not None:
            ckpt["flow_state"] = _fedconcat_to_checkpoint(self.flow_state)
        return ckpt


def _fedconcat_to_checkpoint(fc) -> dict:
    """A ``FedConcatState`` as tensors and plain containers (``torch.load(weights_only=True)`` reads it back; the
    ``ConcatModel`` itself is rebuilt from the architecture)."""
    return {
        "kind": "fedconcat",
        "assignment": torch.as_tensor(np.asarray(fc.assignment, dtype=np.int64)),
        "encoder_rounds": int(fc.encoder_rounds), "classifier_rounds": int(fc.classifier_rounds),
        "cluster_params": [dict(p) for p in fc.cluster_params],
        "round": int(fc.round),
        "params": None if fc.params is None else dict(fc.params),
        "history": [dict(h) for h in fc.history],
    }


def _restore_rng(state: dict) -> np.random.Generator:
    bitgen = getattr(np.random, state["bit_generator"])()
    bitgen.state = state
    return np.random.Generator(bitgen)


def _py(v):
    """numpy scalars -> Python scalars (checkpoints are loaded with ``weights_only=True``)."""
    return v.item() if isinstance(v, np.generic) else v


class Experiment:
    """All deterministic set-up of one configuration (data on the device, partition, model, algorithm, selector).

    ``initial_state()`` gives round 0; ``run_round(state)`` advances ``state`` by one round in place.
    """

    def __init__(self, config: ExperimentConfig):
        from . import augment, datasets, partition, selection

        config.validate()
        _check_supported(config)
        self.config = c = config
        self.device = torch.device(c.device)
        # data, once on the device (uint8, channels first; the preprocessor scales/augments per batch)
        ds = datasets.load_dataset(c.dataset, data_root=c.data_root, download=c.download, **c.dataset_options)
        self.dataset = ds
        self.num_classes = ds.num_classes
        splits = ds.to_tensors(self.device, dtype=torch.uint8)
        self.x_train, self.y_train, self.x_test, self.y_test = splits
        self.preprocessor = augment.Preprocessor.from_dataset(ds, augment=c.augment)
        # partition and label counts
        parts = partition.partition(ds.y_train, c.partition, c.num_clients, rng=stream_rng(c.seed, "partition"),
                                    beta=c.beta if c.partition == "dirichlet" else None,
                                    classes_per_client=c.classes_per_client if c.partition == "quantity" else None,
                                    min_partition_size=c.min_partition_size)
        self.parts = [np.asarray(p, dtype=np.int64) for p in parts]
        self.client_index = [torch.as_tensor(p, device=self.device) for p in self.parts]
        self.true_counts = partition.label_count_matrix(ds.y_train, self.parts, self.num_classes).astype(np.float64)
        self.true_counts_t = torch.as_tensor(self.true_counts, dtype=torch.float32)
        if c.label_dp_epsilon is not None:
            from . import privacy

            self.server_counts = np.asarray(privacy.laplace_counts(
                self.true_counts, c.label_dp_epsilon, rng=stream_rng(c.seed, "label_dp"), negative=c.dp_negative),
                dtype=np.float64)
        else:
            self.server_counts = self.true_counts
        # availability
        n_str = int(math.floor(c.straggler_fraction * c.num_clients + 0.5))
        chosen = stream_rng(c.seed, "stragglers").choice(c.num_clients, size=n_str, replace=False)
        self.stragglers = np.zeros(c.num_clients, dtype=bool)
        self.stragglers[chosen] = True
        # model, algorithm, selector
        from .models import make_model

        h, w, ch = ds.image_shape
        init_seed = int(stream_rng(c.seed, "model_init").integers(2**62))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(init_seed)
            self.model = make_model(c.model, self.num_classes, in_channels=ch, image_size=h)
        self.model.to(self.device)
        self.trainable = trainable_keys(self.model)
        self.num_params = int(sum(p.numel() for p in self.model.parameters() if p.requires_grad))
        self.algorithm = make_algorithm(c.algorithm, **c.algorithm_params).bind(self.trainable)
        self.selector = selection.make_selector(c.selector, **c.selector_params)
        self.label_upload = c.label_based_selection or bool(getattr(self.algorithm, "uploads_label_counts", False))
        self.flow = getattr(self.algorithm, "flow", None)
        #: table rounds of the run: ``config.rounds``, except FedConcat (T_e + T_c; see the module docstring)
        self.total_rounds = c.rounds
        if self.flow == "fedconcat":
            from .config import ConfigError

            try:
                t_e, t_c = self.algorithm.round_split(c.rounds, self.model, num_clients=c.num_clients,
                                                      num_selected=c.clients_per_round)
            except ValueError as exc:
                raise ConfigError(f"config field 'rounds': got {c.rounds}; too small a FedAvg budget for FedConcat "
                                  f"({exc})") from exc
            self.total_rounds = int(t_e + t_c)

    # ------------------------------------------------------------------------------------------------
    def initial_state(self) -> TrainState:
        c = self.config
        params = model_state(self.model)
        state = TrainState(
            round=0, global_params=params,
            server_state=self.algorithm.init_server_state(params, num_clients=c.num_clients),
            client_states={}, selector_state=self.selector.initial_state(c.num_clients),
            selection_rng=stream_rng(c.seed, "selection"), availability_rng=stream_rng(c.seed, "availability"),
            rows=[])
        t0 = time.perf_counter()
        if self.flow == "fedconcat":
            state.flow_state = self.algorithm.plan(
                self.model, params, label_counts=self.server_counts, total_rounds=c.rounds,
                num_selected=c.clients_per_round, rng=stream_rng(c.seed, "clustering"))
            assert state.flow_state.total_rounds == self.total_rounds
        acc, loss = self.evaluate(params)
        label_bytes = 4 * self.num_classes * c.num_clients if self.label_upload else 0
        state.rows.append(self._row(0, float("nan"), acc, loss, float("nan"), [], [], 0, label_bytes, 0,
                                    time.perf_counter() - t0, kept=[], phase="init"))
        return state

    def state_from_checkpoint(self, ckpt: dict) -> TrainState:
        torch.set_rng_state(ckpt["torch_rng"])
        dev = self.device
        to = lambda d: {k: v.to(dev) for k, v in d.items()}  # noqa: E731
        state = TrainState(
            round=int(ckpt["round"]), global_params=to(ckpt["global_params"]),
            server_state=to(ckpt["server_state"]),
            client_states={int(k): to(v) for k, v in ckpt["client_states"].items()},
            selector_state=tuple(ckpt["selector_state"]),
            selection_rng=_restore_rng(ckpt["selection_rng"]),
            availability_rng=_restore_rng(ckpt["availability_rng"]), rows=list(ckpt["rows"]))
        if ckpt.get("flow_state") is not None:
            state.flow_state = self._fedconcat_from_checkpoint(ckpt["flow_state"])
        return state

    def _fedconcat_from_checkpoint(self, d: dict):
        from .algorithms.fedconcat import FedConcatState

        dev = self.device
        to = lambda p: {k: v.to(dev) for k, v in p.items()}  # noqa: E731
        fc = FedConcatState(assignment=d["assignment"].cpu().numpy().astype(np.int64),
                            encoder_rounds=int(d["encoder_rounds"]), classifier_rounds=int(d["classifier_rounds"]),
                            cluster_params=[to(p) for p in d["cluster_params"]], round=int(d["round"]),
                            history=[dict(h) for h in d["history"]])
        if d["params"] is not None:
            # rebuild the architecture only; its head initialisation (from a throw-away generator) is discarded
            fc.model, _ = self.algorithm.build_concat_model(self.model, fc.cluster_params, torch.Generator())
            fc.model.to(dev)
            fc.params = to(d["params"])
        return fc

    # ------------------------------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self, params, model: torch.nn.Module | None = None) -> tuple[float, float]:
        """(accuracy, mean cross-entropy) of ``params`` on the test set, in batches of ``eval_batch_size``
        (``model``: the architecture, default the experiment's model)."""
        model = self.model if model is None else model
        was = model.training
        model.eval()
        correct = torch.zeros((), dtype=torch.int64, device=self.device)
        loss = torch.zeros((), dtype=torch.float64, device=self.device)
        n = int(self.y_test.shape[0])
        try:
            for start in range(0, n, self.config.eval_batch_size):
                xb = self.preprocessor.test(self.x_test[start:start + self.config.eval_batch_size])
                yb = self.y_test[start:start + self.config.eval_batch_size]
                logits = functional_call(model, params, (xb,))
                loss += F.cross_entropy(logits, yb, reduction="sum").to(torch.float64)
                correct += (logits.argmax(dim=1) == yb).sum()
        finally:
            model.train(was)
        return float(correct) / n, float(loss) / n

    def _row(self, rnd, lr, acc, loss, train_loss, picked, trained, num_dropped, nbytes, cum_prev, seconds, *,
             kept, phase):
        from .metrics import covers_all_classes, pooled_entropy

        picked = [int(k) for k in picked]
        trained = [int(k) for k in trained]
        kept = [int(k) for k in kept]
        return {
            "round": int(rnd), "lr": float(lr), "test_accuracy": float(acc), "test_loss": float(loss),
            "train_loss": float(train_loss), "picked": " ".join(map(str, picked)), "num_picked": len(picked),
            "num_trained": len(trained), "num_dropped": int(num_dropped),
            "entropy_bits": float(pooled_entropy(self.true_counts, picked)) if picked else 0.0,
            "covers_all_classes": bool(covers_all_classes(self.true_counts, picked)) if picked else False,
            "entropy_bits_trained": float(pooled_entropy(self.true_counts, trained)) if trained else 0.0,
            "bytes_uploaded": int(nbytes), "cumulative_bytes": int(cum_prev + nbytes), "seconds": float(seconds),
            "kept": " ".join(map(str, kept)),
            "reselection_entropy_bits": float(pooled_entropy(self.true_counts, kept)) if kept else 0.0,
            "phase": str(phase),
        }

    def train_client(self, state: TrainState, k: int, rnd: int, lr: float, epochs: int):
        """Local training of client ``k`` in round ``rnd``; returns its ``LocalResult`` (state_delta filled) and
        its new client state."""
        c, alg, dev = self.config, self.algorithm, self.device
        cs = state.client_states.get(k)
        if cs is None:
            cs = alg.init_client_state(state.global_params)
        ctx = alg.client_context(k, self.true_counts_t[k], state.server_state, cs)
        ctx = {key: v.to(dev) for key, v in ctx.items()}
        hp = LocalHyperParams(lr=lr, momentum=c.momentum, weight_decay=c.weight_decay, batch_size=c.batch_size,
                              epochs=epochs)
        gen = make_generator(client_seed(c.seed, rnd, k, 0), "cpu")
        aug_gen = make_generator(client_seed(c.seed, rnd, k, 1), dev)
        idx = self.client_index[k]
        # layers that draw from the global torch RNG (dropout) get a per-(round, client) seed; the caller's
        # global RNG state is restored afterwards
        with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
            torch.manual_seed(client_seed(c.seed, rnd, k, 2))
            res = local_train(self.model, state.global_params, self.x_train[idx], self.y_train[idx], ctx, alg, hp,
                              gen, transform=self.preprocessor.train, aug_generator=aug_gen, client_id=k)
        new_cs, delta = alg.update_client_state(cs, res, global_params=state.global_params,
                                                server_state=state.server_state, ctx=ctx, hp=hp)
        res.state_delta = delta
        return res, new_cs

    def train_clients_batched(self, state: TrainState, ks: list[int], rnd: int, lr: float,
                              epochs: list[int]) -> list:
        """``train_client`` for all clients ``ks`` of round ``rnd`` in one call of
        ``fedlib.batched.train_clients_batched`` (same generators, so the same results); returns the list of
        ``(LocalResult, new client state)``."""
        from .batched import BatchedOptions, train_clients_batched

        c, alg, dev = self.config, self.algorithm, self.device
        css = [state.client_states.get(k) for k in ks]
        css = [alg.init_client_state(state.global_params) if cs is None else cs for cs in css]
        ctxs = [{key: v.to(dev) for key, v in alg.client_context(k, self.true_counts_t[k], state.server_state,
                                                                 cs).items()} for k, cs in zip(ks, css)]
        hps = [LocalHyperParams(lr=lr, momentum=c.momentum, weight_decay=c.weight_decay, batch_size=c.batch_size,
                                epochs=e) for e in epochs]
        gens = [make_generator(client_seed(c.seed, rnd, k, 0), "cpu") for k in ks]
        aug_gens = [make_generator(client_seed(c.seed, rnd, k, 1), dev) for k in ks]
        results = train_clients_batched(self.model, state.global_params, self.x_train, self.y_train,
                                        [self.client_index[k] for k in ks], ctxs, alg, hps, gens,
                                        transform=self.preprocessor.train, aug_generators=aug_gens,
                                        client_ids=ks, options=BatchedOptions())
        out = []
        for res, cs, ctx, hp in zip(results, css, ctxs, hps):
            new_cs, delta = alg.update_client_state(cs, res, global_params=state.global_params,
                                                    server_state=state.server_state, ctx=ctx, hp=hp)
            res.state_delta = delta
            out.append((res, new_cs))
        return out

    # ------------------------------------------------------------------------------------------------
    def _availability(self, state: TrainState, picked: list[int]):
        """(dropped mask, [(client, epochs)] of the clients that train) for the round's ``picked`` clients."""
        c = self.config
        avail = state.availability_rng
        dropped = avail.random(len(picked)) < c.dropout_prob
        straggler_epochs = avail.integers(1, c.local_epochs + 1, size=len(picked))
        todo = [(k, int(straggler_epochs[j]) if self.stragglers[k] else c.local_epochs)
                for j, k in enumerate(picked) if not dropped[j]]
        return dropped, todo

    def _train_todo(self, state: TrainState, todo: list, rnd: int, lr: float) -> list:
        """Local training of the clients ``todo`` (``[(client, epochs)]``) from the global model (reference or
        batched engine); stores the new client states and returns ``[(client, LocalResult)]`` in ``todo`` order."""
        c = self.config
        pairs = None
        if c.engine == "batched" and todo:
            from .batched import batching_unsupported_reason

            reason = batching_unsupported_reason(self.model, self.algorithm)
            if reason is None:
                pairs = self.train_clients_batched(state, [k for k, _ in todo], rnd, lr, [e for _, e in todo])
            else:
                warnings.warn(f"engine='batched': falling back to the reference path: {reason}.", UserWarning,
                              stacklevel=3)
        if pairs is None:
            pairs = [self.train_client(state, k, rnd, lr, e) for k, e in todo]
        out = []
        for (k, _), (res, new_cs) in zip(todo, pairs):
            if new_cs:
                state.client_states[k] = new_cs
            out.append((k, res))
        return out

    def run_round(self, state: TrainState) -> dict:
        """Advance ``state`` by one round; append and return its table row."""
        if self.flow == "fedconcat":
            return self._run_round_fedconcat(state)
        c = self.config
        t0 = time.perf_counter()
        rnd = state.round + 1
        lr = c.lr * c.lr_decay ** (rnd - 1)
        if self.flow == "fedentropy" and c.selector == "random":
            # FedEntropy's own ε-greedy draw from its positive/negative pools (Algorithm 2, lines 4-8)
            picked = self.algorithm.sample(state.server_state, c.clients_per_round, state.selection_rng)
        else:
            picked, state.selector_state = self.selector.select(self.server_counts, c.clients_per_round,
                                                                state.selector_state, state.selection_rng)
        picked = [int(k) for k in picked]
        dropped, todo = self._availability(state, picked)
        done = self._train_todo(state, todo, rnd, lr)
        trained = [k for k, _ in done]
        with_data = [(k, r) for k, r in done if r.num_samples > 0]
        factor = int(getattr(self.algorithm, "upload_factor", 1))
        extra_bytes = 0
        uploads = with_data
        if self.flow == "fedentropy" and with_data:
            uploads = self._fedentropy_judge(state, with_data)
            extra_bytes = 4 * self.num_classes * len(with_data)  # every trained client's soft label
        if uploads:
            n = np.array([r.num_samples for _, r in uploads], dtype=np.float64)
            state.global_params, state.server_state = self.algorithm.aggregate(
                state.global_params, [r for _, r in uploads], n / n.sum(), state.server_state)
        if with_data:
            n = np.array([r.num_samples for _, r in with_data], dtype=np.float64)
            train_loss = float(np.sum(n * np.array([r.train_loss for _, r in with_data])) / n.sum())
        else:
            train_loss = float("nan")
        state.round = rnd
        if rnd % c.eval_every == 0 or rnd == self.total_rounds:
            acc, loss = self.evaluate(state.global_params)
        else:
            acc, loss = float("nan"), float("nan")
        nbytes = 4 * self.num_params * factor * len(uploads) + extra_bytes
        cum_prev = state.rows[-1]["cumulative_bytes"] if state.rows else 0
        row = self._row(rnd, lr, acc, loss, train_loss, picked, trained, int(dropped.sum()), nbytes, cum_prev,
                        time.perf_counter() - t0, kept=[k for k, _ in uploads], phase="global")
        state.rows.append(row)
        return row

    def _fedentropy_judge(self, state: TrainState, with_data: list) -> list:
        """FedEntropy's maximum entropy judgement of the round's trained clients (``[(client, LocalResult)]``, all
        with data): soft labels of the trained models, ``FedEntropy.judge`` (updates the pools in
        ``state.server_state``); returns the kept ``(client, LocalResult)`` pairs in the same order."""
        from .algorithms.fedentropy import model_soft_label

        ks = [k for k, _ in with_data]
        soft = np.stack([model_soft_label(self.model, r.params,
                                          self.preprocessor.test(self.x_train[self.client_index[k]]),
                                          batch_size=self.config.eval_batch_size) for k, r in with_data])
        sizes = np.array([r.num_samples for _, r in with_data], dtype=np.float64)
        mask, state.server_state = self.algorithm.judge(ks, soft, sizes, state.server_state)
        return [pair for pair, keep in zip(with_data, mask) if keep]

    def _run_round_fedconcat(self, state: TrainState) -> dict:
        """One FedConcat round (encoder or classifier stage; see the module docstring)."""
        from .algorithms.fedconcat import make_local_trainer

        c, alg, fc = self.config, self.algorithm, state.flow_state
        t0 = time.perf_counter()
        rnd = state.round + 1
        info = fc.next_round()
        lr = c.lr * c.lr_decay ** info.phase_round
        picked, state.selector_state = self.selector.select(self.server_counts, c.clients_per_round,
                                                            state.selector_state, state.selection_rng)
        picked = [int(k) for k in picked]
        dropped, todo = self._availability(state, picked)
        epochs = dict(todo)
        done = []
        dev = self.device

        def client_data(k):
            idx = self.client_index[k]
            return self.x_train[idx], self.y_train[idx]

        def train_client(model, params, k, round_info, algorithm, max_batches):
            hp = LocalHyperParams(lr=lr, momentum=c.momentum, weight_decay=c.weight_decay, batch_size=c.batch_size,
                                  epochs=epochs[k])
            inner = make_local_trainer(client_data, lambda _info: hp, c.seed, transform=self.preprocessor.train)
            # the trainer's per-(round, client) generators: round index = table round, as for the other flows
            with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
                torch.manual_seed(client_seed(c.seed, rnd, k, 2))
                res = inner(model, params, k, dataclasses.replace(round_info, round_index=rnd), algorithm,
                            max_batches)
            done.append((int(k), res))
            return res

        head_gen = make_generator(int(stream_rng(c.seed, "head_init").integers(2**62)), "cpu")
        alg.step(fc, self.model, [k for k, _ in todo], train_client, head_generator=head_gen)
        if fc.model is not None:
            fc.model.to(dev)
            state.global_params = fc.params
        if info.phase == "classifier":
            kept = [(k, r) for k, r in done if r.num_steps > 0]
            head = fc.model.head
            per_upload = head.weight.numel() + head.bias.numel()
        else:
            kept = [(k, r) for k, r in done if r.num_samples > 0]
            per_upload = self.num_params
        if kept:
            n = np.array([r.num_samples for _, r in kept], dtype=np.float64)
            train_loss = float(np.sum(n * np.array([r.train_loss for _, r in kept])) / n.sum())
        else:
            train_loss = float("nan")
        state.round = rnd
        if info.phase == "classifier" and (rnd % c.eval_every == 0 or rnd == self.total_rounds):
            acc, loss = self.evaluate(fc.params, model=fc.model)
        else:
            acc, loss = float("nan"), float("nan")
        nbytes = 4 * int(per_upload) * len(kept)
        cum_prev = state.rows[-1]["cumulative_bytes"] if state.rows else 0
        row = self._row(rnd, lr, acc, loss, train_loss, picked, [k for k, _ in done], int(dropped.sum()), nbytes,
                        cum_prev, time.perf_counter() - t0, kept=[k for k, _ in kept], phase=info.phase)
        state.rows.append(row)
        return row


def _check_supported(config: ExperimentConfig) -> None:
    """Raise ``ConfigError`` (before any data is loaded) if the algorithm needs a round driver the trainer lacks.

    Every registered algorithm is supported: the per-round ones through the hooks of ``fedlib.algorithms.base``,
    FedEntropy and FedConcat through their own flows (see the module docstring)."""
    from .algorithms import algorithm_class
    from .config import ConfigError

    flow = getattr(algorithm_class(config.algorithm), "flow", None)
    if flow not in FLOWS:
        raise ConfigError(f"config field 'algorithm': got {config.algorithm!r}; its round flow {flow!r} is not "
                          f"one fedlib.trainer runs (known flows: {', '.join(repr(f) for f in FLOWS[1:])} and the "
                          f"per-round hooks).")


def run_experiment(config: ExperimentConfig, *, run_root=None, progress: bool = True,
                   stop_after: int | None = None) -> RunResult:
    """Run (or read back, or resume) one experiment.

    ``config`` is validated first (before any data is loaded).  Without ``run_root`` the run happens in memory.
    With ``run_root`` the run lives in ``<run_root>/<config_hash>`` (``fedlib.runs``): a finished run is read
    back (``from_cache=True``), an interrupted one resumes from its last checkpoint, and checkpoints are written
    every ``config.checkpoint_every`` rounds.  ``stop_after=r`` stops after round r *without* writing a checkpoint
    for it, as if the process had been killed then (for tests and for splitting long runs); the result is then
    ``finished=False``.  ``progress`` shows a tqdm bar over rounds.  The run lasts ``Experiment.total_rounds``
    rounds: ``config.rounds``, except for FedConcat (encoder + classifier rounds from the budget ``config.rounds``).
    A finished run read back from the cache gets the table dtypes of a fresh run (``_normalise_table``).
    """
    config.validate()
    _check_supported(config)
    run_dir = None
    if run_root is not None:
        run_dir = RunDir(run_root, config)
        if run_dir.is_finished():
            return run_dir.load_result()
        run_dir.prepare()
    exp = Experiment(config)
    total = exp.total_rounds
    ckpt = run_dir.load_checkpoint() if run_dir is not None else None
    state = exp.state_from_checkpoint(ckpt) if ckpt is not None else exp.initial_state()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, initial=state.round, desc=f"{config.selector}/{config.algorithm} "
                   f"seed {config.seed}", unit="round", leave=False)
    try:
        while state.round < total:
            row = exp.run_round(state)
            if bar is not None:
                bar.update(1)
                if not math.isnan(row["test_accuracy"]):
                    bar.set_postfix(acc=f"{row['test_accuracy']:.3f}", s=f"{row['seconds']:.1f}")
            if stop_after is not None and state.round >= stop_after and state.round < total:
                return RunResult(config, make_table(state.rows), run_dir.path if run_dir else None, finished=False,
                                 global_params=state.global_params)
            if run_dir is not None and state.round % config.checkpoint_every == 0 and state.round < total:
                run_dir.save_checkpoint(state.to_checkpoint())
    finally:
        if bar is not None:
            bar.close()
    table = make_table(state.rows)
    if run_dir is not None:
        run_dir.save_checkpoint(state.to_checkpoint())
        run_dir.write_result(table)
    return RunResult(config, table, run_dir.path if run_dir else None, finished=True,
                     global_params=state.global_params)
