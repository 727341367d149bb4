"""The federated trainer: ``run_experiment(config) -> RunResult``.

``Experiment`` does the set-up of one configuration (data on the device, partition, label counts, availability,
model, algorithm, selector) and offers the services a round needs (selection, availability, local training,
evaluation).  One round loop, ``Experiment.run_round``, runs every algorithm; the round's shape is the
algorithm's (the round-shape hooks of ``fedlib.algorithms.base``, as Flower's strategies own
``configure_fit``/``aggregate_fit``):

1. ``Algorithm.configure_round`` plans round r = 1…R: its learning rate, phase and picked clients (by default
   ``lr · lr_decay^(r−1)`` and the selector's M clients, picked from the label counts the *server* sees: the true
   counts, or their Laplace-noised version when ``label_dp_epsilon`` is set -- DP never touches training);
2. availability: each picked client drops out with probability ``dropout_prob`` (it neither trains nor uploads);
   a straggler (a fixed random ``straggler_fraction`` of the pool, drawn once per run) trains a uniform random
   1…E epochs instead of E;
3. ``Algorithm.fit_round`` trains the remaining clients and aggregates.  By default every client trains locally
   (``fedlib.training.local.local_train``) from the global model, on its own data held on the device, augmented on the
   device (``fedlib.data.augment``), and the uploads are aggregated with FedAvg weights n_k/Σn_j
   (``Algorithm.aggregate``);
4. the trainer writes the round's row (one tail for every algorithm): the train loss, the test accuracy and loss
   of the global model (never augmented, in large batches; every ``eval_every`` rounds and the last), the bytes.

FedEntropy (``fedlib.algorithms.fedentropy``: own client draw, a judgement of the uploads) and FedConcat
(``fedlib.algorithms.fedconcat``: two phases, its own run length, state and models) document their rounds in
their modules.  The run lasts ``Experiment.total_rounds`` = ``Algorithm.num_rounds`` rounds (``config.rounds``
unless the algorithm says otherwise).

Randomness: every stream is derived from ``config.seed`` by ``fedlib.seeds`` (``partition``, ``selection``,
``availability``, ``stragglers``, ``label_dp``, ``model_init`` and the algorithms' own), so changing e.g. the
selector does not change the partition; local training uses per-(round, client) generators
(``fedlib.training.local.client_generators``; their streams are ``fedlib.seeds.CLIENT_STREAMS``).

The per-round table (``RunResult.table``, columns ``fedlib.training.runs.TABLE_COLUMNS``) has one row per round plus a
row for round 0 (the initial model; it carries the one-time label upload of 4·C·K bytes when the selector or the
algorithm needs label counts): ``round, lr, test_accuracy, test_loss, train_loss, picked, num_picked,
num_trained, num_dropped, entropy_bits, covers_all_classes, entropy_bits_trained, bytes_uploaded,
cumulative_bytes, seconds, kept, reselection_entropy_bits, phase``.  ``picked`` is the space-separated client ids
in pick order; ``entropy_bits``/``covers_all_classes`` are computed on the pooled TRUE label counts of the picked
clients (``entropy_bits_trained`` on those that trained); ``kept`` (ids in pick order) are the clients whose
models entered the aggregation and ``reselection_entropy_bits`` the entropy of their pooled TRUE label counts
(0.0 when none); ``bytes_uploaded`` is ``4 · p · upload_factor`` per uploading client (p = trainable parameters)
plus what the algorithm's round adds; ``phase`` is ``"init"`` for round 0, ``"global"`` for rounds that train
one global model, or the algorithm's phase.  For the per-round algorithms every client that trained on at least
one sample uploads, so ``kept`` = the trained clients and ``reselection_entropy_bits`` = ``entropy_bits_trained``.
"""

from __future__ import annotations

import contextlib
import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from fedlib.seeds import CLIENT_STREAMS, stream_rng
from fedlib.training.config import ConfigError, ExperimentConfig
from fedlib.training.local import (
    LocalHyperParams,
    client_generators,
    client_seed,
    local_train,
    model_state,
    trainable_keys,
)
from fedlib.training.runs import RunDir, RunResult, make_table

__all__ = ["run_experiment", "Experiment", "TrainState"]


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
    #: The algorithm's own state of the run (``Algorithm.init_round_state``; FedConcat: a ``FedConcatState``).
    algorithm_state: object = None

    def to_checkpoint(self) -> dict:
        """Everything but ``algorithm_state`` (``Experiment.checkpoint`` adds it) as tensors and plain values."""
        return {
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


def _restore_rng(state: dict) -> np.random.Generator:
    bitgen = getattr(np.random, state["bit_generator"])()
    bitgen.state = state
    return np.random.Generator(bitgen)


class Experiment:
    """All deterministic set-up of one configuration, and the services of a round (``RoundServices`` of
    ``fedlib.algorithms.base``).

    ``initial_state()`` gives round 0; ``run_round(state)`` advances ``state`` by one round in place.
    """

    def __init__(self, config: ExperimentConfig):
        from fedlib.data import augment, datasets, partition
        from fedlib.training.numerics import configure

        config.validate()
        self.config = c = config
        self.device = torch.device(c.device)
        self.numerics = configure(
            self.device,
            tf32=c.engine_options.get("tf32", False),
            deterministic=c.engine_options.get("deterministic", True),
        )
        # data, once on the device (uint8, channels first; the preprocessor scales/augments per batch)
        ds = datasets.load_dataset(c.dataset, data_root=c.data_root, download=c.download, **c.dataset_options)
        self.dataset = ds
        self.num_classes = ds.num_classes
        splits = ds.to_tensors(self.device, dtype=torch.uint8, one_gray_channel=True)  # gray sets: 1 channel
        self.x_train, self.y_train, self.x_test, self.y_test = splits
        self.preprocessor = augment.Preprocessor.from_dataset(ds, augment=c.augment, gray_to_rgb=ds.gray_rgb)
        # partition and label counts
        parts = partition.partition(
            ds.y_train,
            c.partition,
            c.num_clients,
            rng=stream_rng(c.seed, "partition"),
            beta=c.beta if c.partition == "dirichlet" else None,
            classes_per_client=c.classes_per_client if c.partition == "quantity" else None,
            min_partition_size=c.min_partition_size,
        )
        self.parts = [np.asarray(p, dtype=np.int64) for p in parts]
        self.client_index = [torch.as_tensor(p, device=self.device) for p in self.parts]
        self.true_counts = partition.label_count_matrix(ds.y_train, self.parts, self.num_classes).astype(np.float64)
        self.true_counts_t = torch.as_tensor(self.true_counts, dtype=torch.float32)
        if c.label_dp_epsilon is not None:
            from fedlib.selection import privacy

            self.server_counts = np.asarray(
                privacy.laplace_counts(
                    self.true_counts, c.label_dp_epsilon, rng=stream_rng(c.seed, "label_dp"), negative=c.dp_negative
                ),
                dtype=np.float64,
            )
        else:
            self.server_counts = self.true_counts
        # availability
        n_str = int(math.floor(c.straggler_fraction * c.num_clients + 0.5))
        chosen = stream_rng(c.seed, "stragglers").choice(c.num_clients, size=n_str, replace=False)
        self.stragglers = np.zeros(c.num_clients, dtype=bool)
        self.stragglers[chosen] = True
        # model, algorithm, selector
        from fedlib.training.models import make_model

        h, w, ch = ds.image_shape
        init_seed = int(stream_rng(c.seed, "model_init").integers(2**62))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(init_seed)
            self.model = make_model(c.model, self.num_classes, in_channels=ch, image_size=h)
        self.model.to(self.device)
        self.trainable = trainable_keys(self.model)
        self.num_params = int(sum(p.numel() for p in self.model.parameters() if p.requires_grad))
        self.selector, algorithm = c.build_selector_and_algorithm()
        self.algorithm = algorithm.bind(self.trainable)
        self.label_upload = c.label_based_selection or bool(getattr(self.algorithm, "uploads_label_counts", False))
        try:  # table rounds of the run
            self.total_rounds = int(self.algorithm.num_rounds(self))
        except ValueError as exc:
            raise ConfigError(f"config field 'rounds': got {c.rounds}; {exc}") from exc

    # ------------------------------------------------------------------------------------------------
    def initial_state(self) -> TrainState:
        c = self.config
        params = model_state(self.model)
        state = TrainState(
            round=0,
            global_params=params,
            server_state=self.algorithm.init_server_state(params, num_clients=c.num_clients),
            client_states={},
            selector_state=self.selector.initial_state(c.num_clients),
            selection_rng=stream_rng(c.seed, "selection"),
            availability_rng=stream_rng(c.seed, "availability"),
            rows=[],
        )
        t0 = time.perf_counter()
        state.algorithm_state = self.algorithm.init_round_state(self, params)
        acc, loss = self.evaluate(params)
        label_bytes = 4 * self.num_classes * c.num_clients if self.label_upload else 0
        state.rows.append(
            self._row(
                0,
                float("nan"),
                acc,
                loss,
                float("nan"),
                [],
                [],
                0,
                label_bytes,
                0,
                time.perf_counter() - t0,
                kept=[],
                phase="init",
            )
        )
        return state

    def checkpoint(self, state: TrainState) -> dict:
        """``state`` as a checkpoint (``torch.save``; ``torch.load(weights_only=True)`` reads it back)."""
        ckpt = state.to_checkpoint()
        if state.algorithm_state is not None:
            ckpt["algorithm_state"] = self.algorithm.round_state_to_checkpoint(state.algorithm_state)
        return ckpt

    def state_from_checkpoint(self, ckpt: dict) -> TrainState:
        torch.set_rng_state(ckpt["torch_rng"])
        to = lambda d: {k: v.to(self.device) for k, v in d.items()}  # noqa: E731
        state = TrainState(
            round=int(ckpt["round"]),
            global_params=to(ckpt["global_params"]),
            server_state=to(ckpt["server_state"]),
            client_states={int(k): to(v) for k, v in ckpt["client_states"].items()},
            selector_state=tuple(ckpt["selector_state"]),
            selection_rng=_restore_rng(ckpt["selection_rng"]),
            availability_rng=_restore_rng(ckpt["availability_rng"]),
            rows=list(ckpt["rows"]),
        )
        stored = ckpt.get("algorithm_state", ckpt.get("flow_state"))  # "flow_state": older checkpoints
        if stored is not None:
            state.algorithm_state = self.algorithm.round_state_from_checkpoint(self, stored)
        return state

    # ------------------------------------------------------------------------------------------------
    # the one round loop

    def run_round(self, state: TrainState) -> dict:
        """Advance ``state`` by one round (its shape is the algorithm's); append and return its table row."""
        c = self.config
        t0 = time.perf_counter()
        plan = self.algorithm.configure_round(self, state, state.round + 1)
        dropped, todo = self._availability(state, plan.picked)
        result = self.algorithm.fit_round(self, state, plan, todo)
        if result.losses:
            n = np.array([r.num_samples for r in result.losses], dtype=np.float64)
            train_loss = float(np.sum(n * np.array([r.train_loss for r in result.losses])) / n.sum())
        else:
            train_loss = float("nan")
        state.round = rnd = plan.round
        if result.evaluate and (rnd % c.eval_every == 0 or rnd == self.total_rounds):
            acc, loss = self.evaluate(state.global_params, model=result.model)
        else:
            acc, loss = float("nan"), float("nan")
        cum_prev = state.rows[-1]["cumulative_bytes"] if state.rows else 0
        row = self._row(
            rnd,
            plan.lr,
            acc,
            loss,
            train_loss,
            plan.picked,
            result.trained,
            int(dropped.sum()),
            result.bytes_uploaded,
            cum_prev,
            time.perf_counter() - t0,
            kept=result.kept,
            phase=plan.phase,
        )
        state.rows.append(row)
        return row

    def _row(
        self, rnd, lr, acc, loss, train_loss, picked, trained, num_dropped, nbytes, cum_prev, seconds, *, kept, phase
    ):
        from fedlib.selection.metrics import covers_all_classes, pooled_entropy

        picked = [int(k) for k in picked]
        trained = [int(k) for k in trained]
        kept = [int(k) for k in kept]
        return {
            "round": int(rnd),
            "lr": float(lr),
            "test_accuracy": float(acc),
            "test_loss": float(loss),
            "train_loss": float(train_loss),
            "picked": " ".join(map(str, picked)),
            "num_picked": len(picked),
            "num_trained": len(trained),
            "num_dropped": int(num_dropped),
            "entropy_bits": float(pooled_entropy(self.true_counts, picked)) if picked else 0.0,
            "covers_all_classes": bool(covers_all_classes(self.true_counts, picked)) if picked else False,
            "entropy_bits_trained": float(pooled_entropy(self.true_counts, trained)) if trained else 0.0,
            "bytes_uploaded": int(nbytes),
            "cumulative_bytes": int(cum_prev + nbytes),
            "seconds": float(seconds),
            "kept": " ".join(map(str, kept)),
            "reselection_entropy_bits": float(pooled_entropy(self.true_counts, kept)) if kept else 0.0,
            "phase": str(phase),
        }

    # ------------------------------------------------------------------------------------------------
    # services of a round (fedlib.algorithms.base.RoundServices)

    def select(self, state: TrainState) -> list[int]:
        """The round's clients from the selector, on the label counts the server sees."""
        picked, state.selector_state = self.selector.select(
            self.server_counts, self.config.clients_per_round, state.selector_state, state.selection_rng
        )
        return [int(k) for k in picked]

    def _availability(self, state: TrainState, picked: list[int]):
        """(dropped mask, [(client, epochs)] of the clients that train) for the round's ``picked`` clients."""
        c = self.config
        avail = state.availability_rng
        dropped = avail.random(len(picked)) < c.dropout_prob
        straggler_epochs = avail.integers(1, c.local_epochs + 1, size=len(picked))
        todo = [
            (k, int(straggler_epochs[j]) if self.stragglers[k] else c.local_epochs)
            for j, k in enumerate(picked)
            if not dropped[j]
        ]
        return dropped, todo

    def client_data(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(x, y)`` of client ``k``: its training inputs (uint8, on the device) and labels."""
        idx = self.client_index[k]
        return self.x_train[idx], self.y_train[idx]

    def client_inputs(self, k: int) -> torch.Tensor:
        """Client ``k``'s training inputs as the model sees them in evaluation (normalised, not augmented)."""
        return self.preprocessor.test(self.x_train[self.client_index[k]])

    @property
    def train_transform(self):
        """The batch transform of local training (``fedlib.data.augment.Preprocessor.train``)."""
        return self.preprocessor.train

    def local_hyper_params(self, lr: float, epochs: int) -> LocalHyperParams:
        c = self.config
        return LocalHyperParams(
            lr=lr, momentum=c.momentum, weight_decay=c.weight_decay, batch_size=c.batch_size, epochs=epochs
        )

    @contextlib.contextmanager
    def client_torch_rng(self, rnd: int, k: int):
        """Layers that draw from the global torch RNG (dropout) get a per-(round, client) seed; the caller's global
        RNG state is restored afterwards."""
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            torch.manual_seed(client_seed(self.config.seed, rnd, k, CLIENT_STREAMS["torch_rng"]))
            yield

    def train_clients(self, state: TrainState, todo: list, rnd: int, lr: float) -> list:
        """Local training of the clients ``todo`` (``[(client, epochs)]``) from the global model (reference or
        batched engine); stores the new client states and returns ``[(client, LocalResult)]`` in ``todo`` order."""
        pairs = None
        if self.config.engine == "batched" and todo:
            from fedlib.training.batched import batching_unsupported_reason

            reason = batching_unsupported_reason(self.model, self.algorithm)
            if reason is None:
                pairs = self.train_clients_batched(state, [k for k, _ in todo], rnd, lr, [e for _, e in todo])
            else:
                warnings.warn(
                    f"engine='batched': falling back to the reference path: {reason}.", UserWarning, stacklevel=3
                )
        if pairs is None:
            pairs = [self.train_client(state, k, rnd, lr, e) for k, e in todo]
        out = []
        for (k, _), (res, new_cs) in zip(todo, pairs):
            if new_cs:
                state.client_states[k] = new_cs
            out.append((k, res))
        return out

    def _client_setup(self, state: TrainState, k: int):
        """Client ``k``'s state (initial if it never trained) and its context on the device."""
        alg = self.algorithm
        cs = state.client_states.get(k)
        if cs is None:
            cs = alg.init_client_state(state.global_params)
        ctx = alg.client_context(k, self.true_counts_t[k], state.server_state, cs)
        return cs, {key: v.to(self.device) for key, v in ctx.items()}

    def train_client(self, state: TrainState, k: int, rnd: int, lr: float, epochs: int):
        """Local training of client ``k`` in round ``rnd``; returns its ``LocalResult`` (state_delta filled) and
        its new client state."""
        c, alg, dev = self.config, self.algorithm, self.device
        cs, ctx = self._client_setup(state, k)
        hp = self.local_hyper_params(lr, epochs)
        gen, aug_gen = client_generators(c.seed, rnd, k, dev)
        x, y = self.client_data(k)
        with self.client_torch_rng(rnd, k):
            res = local_train(
                self.model,
                state.global_params,
                x,
                y,
                ctx,
                alg,
                hp,
                gen,
                transform=self.preprocessor.train,
                aug_generator=aug_gen,
                client_id=k,
            )
        new_cs, delta = alg.update_client_state(
            cs, res, global_params=state.global_params, server_state=state.server_state, ctx=ctx, hp=hp
        )
        res.state_delta = delta
        return res, new_cs

    def train_clients_batched(self, state: TrainState, ks: list[int], rnd: int, lr: float, epochs: list[int]) -> list:
        """``train_client`` for all clients ``ks`` of round ``rnd`` in one call of
        ``fedlib.training.batched.train_clients_batched`` (same generators, so the same results); returns the list of
        ``(LocalResult, new client state)``."""
        from fedlib.training.batched import options_from_config, train_clients_batched

        c, alg, dev = self.config, self.algorithm, self.device
        css, ctxs = zip(*[self._client_setup(state, k) for k in ks])
        hps = [self.local_hyper_params(lr, e) for e in epochs]
        pairs = [client_generators(c.seed, rnd, k, dev) for k in ks]
        gens, aug_gens = [g for g, _ in pairs], [a for _, a in pairs]
        results = train_clients_batched(
            self.model,
            state.global_params,
            self.x_train,
            self.y_train,
            [self.client_index[k] for k in ks],
            list(ctxs),
            alg,
            hps,
            gens,
            transform=self.preprocessor.train,
            aug_generators=aug_gens,
            client_ids=ks,
            options=options_from_config(c.engine_options),
        )
        out = []
        for res, cs, ctx, hp in zip(results, css, ctxs, hps):
            new_cs, delta = alg.update_client_state(
                cs, res, global_params=state.global_params, server_state=state.server_state, ctx=ctx, hp=hp
            )
            res.state_delta = delta
            out.append((res, new_cs))
        return out

    def evaluate(self, params, model: torch.nn.Module | None = None) -> tuple[float, float]:
        """(accuracy, mean cross-entropy) of ``params`` on the test set, in batches of ``eval_batch_size``
        (``model``: the architecture, default the experiment's model), by ``fedlib.training.batched.evaluate``."""
        from fedlib.training.batched import evaluate

        return evaluate(
            self.model if model is None else model,
            params,
            self.x_test,
            self.y_test,
            transform=self.preprocessor.test,
            batch_size=self.config.eval_batch_size,
        )


def run_experiment(
    config: ExperimentConfig, *, run_root=None, progress: bool = True, stop_after: int | None = None, on_round=None
) -> RunResult:
    """Run (or read back, or resume) one experiment.

    ``config`` is validated first (before any data is loaded).  Without ``run_root`` the run happens in memory.
    With ``run_root`` the run lives in ``<run_root>/<config_hash>`` (``fedlib.training.runs``): a finished run is read
    back (``from_cache=True``, with the table dtypes of a fresh run), an interrupted one resumes from its last
    checkpoint, and checkpoints are written every ``config.checkpoint_every`` rounds.  ``stop_after=r`` stops
    after round r *without* writing a checkpoint for it, as if the process had been killed then (for tests and
    for splitting long runs); the result is then ``finished=False``.  ``progress`` shows a tqdm bar over rounds with
    the time left.  ``on_round(row, total)`` is called after every round trained here (``row``: its table row;
    ``total``: ``Experiment.total_rounds``), e.g. to estimate the time of the run from its first round.
    The run lasts ``Experiment.total_rounds`` rounds (``Algorithm.num_rounds``).  Nothing is written before the
    set-up (data, partition, model) succeeded: a missing data set or a partition that cannot be drawn leaves no run
    directory behind.
    """
    config.validate()
    run_dir = None
    if run_root is not None:
        run_dir = RunDir(run_root, config)
        if run_dir.is_finished():
            return run_dir.load_result()
    exp = Experiment(config)
    if run_dir is not None:
        run_dir.prepare()
    total = exp.total_rounds
    ckpt = run_dir.load_checkpoint() if run_dir is not None else None
    state = exp.state_from_checkpoint(ckpt) if ckpt is not None else exp.initial_state()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(
            total=total,
            initial=state.round,
            desc=f"{config.selector}/{config.algorithm} seed {config.seed}",
            unit="round",
            leave=False,
            bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} rounds [{elapsed} elapsed, {remaining} left{postfix}]",
        )
    try:
        while state.round < total:
            row = exp.run_round(state)
            if bar is not None:
                bar.update(1)
                if not math.isnan(row["test_accuracy"]):
                    bar.set_postfix(acc=f"{row['test_accuracy']:.3f}", s=f"{row['seconds']:.1f}")
            if on_round is not None:
                on_round(row, total)
            if stop_after is not None and state.round >= stop_after and state.round < total:
                return RunResult(
                    config,
                    make_table(state.rows),
                    run_dir.path if run_dir else None,
                    finished=False,
                    global_params=state.global_params,
                )
            if run_dir is not None and state.round % config.checkpoint_every == 0 and state.round < total:
                run_dir.save_checkpoint(exp.checkpoint(state))
    finally:
        if bar is not None:
            bar.close()
    table = make_table(state.rows)
    if run_dir is not None:
        run_dir.save_checkpoint(exp.checkpoint(state))
        run_dir.write_result(table)
    return RunResult(config, table, run_dir.path if run_dir else None, finished=True, global_params=state.global_params)
