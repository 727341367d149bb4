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
``4 · p · upload_factor`` per client that uploaded (p = trainable parameters).
"""
from __future__ import annotations

import math
import time
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

__all__ = ["run_experiment", "RunResult", "Experiment", "TrainState", "stream_rng", "STREAMS", "TABLE_COLUMNS",
           "last_rounds_mean"]

STREAMS = {"partition": 1, "selection": 2, "availability": 3, "stragglers": 4, "label_dp": 5, "model_init": 6}

TABLE_COLUMNS = ("round", "lr", "test_accuracy", "test_loss", "train_loss", "picked", "num_picked", "num_trained",
                 "num_dropped", "entropy_bits", "covers_all_classes", "entropy_bits_trained", "bytes_uploaded",
                 "cumulative_bytes", "seconds")


def stream_rng(seed: int, name: str) -> np.random.Generator:
    """The numpy generator of stream ``name`` (see ``STREAMS``) for ``seed``."""
    return np.random.default_rng(np.random.SeedSequence([int(seed), STREAMS[name]]))


def last_rounds_mean(table: pd.DataFrame, n: int = 10, column: str = "test_accuracy") -> float:
    """Mean of ``column`` over the last ``n`` evaluated rounds (round ≥ 1) -- the paper's reported number."""
    t = table[(table["round"] >= 1) & table[column].notna()]
    return float(t[column].tail(n).mean()) if len(t) else float("nan")


@dataclass
class RunResult:
    """Outcome of ``run_experiment``.

    ``table``: the per-round DataFrame (see the module docstring); ``run_dir``: the run directory or None;
    ``from_cache``: True if a finished run was read back; ``finished``: False if stopped early
    (``stop_after``); ``global_params``: the final global model (None if not available).
    """

    config: ExperimentConfig
    table: pd.DataFrame
    run_dir: Path | None = None
    from_cache: bool = False
    finished: bool = True
    global_params: dict | None = field(default=None, repr=False)

    @property
    def final_accuracy(self) -> float:
        """Mean test accuracy over the last 10 evaluated rounds."""
        return last_rounds_mean(self.table, 10)

    def summary(self) -> dict:
        t = self.table[self.table["round"] >= 1]
        return {"final_accuracy": self.final_accuracy, "rounds": int(t["round"].max()) if len(t) else 0,
                "seconds_per_round": float(t["seconds"].mean()) if len(t) else float("nan"),
                "total_bytes": int(self.table["cumulative_bytes"].iloc[-1]) if len(self.table) else 0}


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

    def to_checkpoint(self) -> dict:
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
        acc, loss = self.evaluate(params)
        label_bytes = 4 * self.num_classes * c.num_clients if self.label_upload else 0
        state.rows.append(self._row(0, float("nan"), acc, loss, float("nan"), [], [], 0, label_bytes, 0,
                                    time.perf_counter() - t0))
        return state

    def state_from_checkpoint(self, ckpt: dict) -> TrainState:
        torch.set_rng_state(ckpt["torch_rng"])
        dev = self.device
        to = lambda d: {k: v.to(dev) for k, v in d.items()}  # noqa: E731
        return TrainState(
            round=int(ckpt["round"]), global_params=to(ckpt["global_params"]),
            server_state=to(ckpt["server_state"]),
            client_states={int(k): to(v) for k, v in ckpt["client_states"].items()},
            selector_state=tuple(ckpt["selector_state"]),
            selection_rng=_restore_rng(ckpt["selection_rng"]),
            availability_rng=_restore_rng(ckpt["availability_rng"]), rows=list(ckpt["rows"]))

    # ------------------------------------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self, params) -> tuple[float, float]:
        """(accuracy, mean cross-entropy) of ``params`` on the test set, in batches of ``eval_batch_size``."""
        was = self.model.training
        self.model.eval()
        correct = torch.zeros((), dtype=torch.int64, device=self.device)
        loss = torch.zeros((), dtype=torch.float64, device=self.device)
        n = int(self.y_test.shape[0])
        try:
            for start in range(0, n, self.config.eval_batch_size):
                xb = self.preprocessor.test(self.x_test[start:start + self.config.eval_batch_size])
                yb = self.y_test[start:start + self.config.eval_batch_size]
                logits = functional_call(self.model, params, (xb,))
                loss += F.cross_entropy(logits, yb, reduction="sum").to(torch.float64)
                correct += (logits.argmax(dim=1) == yb).sum()
        finally:
            self.model.train(was)
        return float(correct) / n, float(loss) / n

    def _row(self, rnd, lr, acc, loss, train_loss, picked, trained, num_dropped, nbytes, cum_prev, seconds):
        from .metrics import covers_all_classes, pooled_entropy

        picked = [int(k) for k in picked]
        trained = [int(k) for k in trained]
        return {
            "round": int(rnd), "lr": float(lr), "test_accuracy": float(acc), "test_loss": float(loss),
            "train_loss": float(train_loss), "picked": " ".join(map(str, picked)), "num_picked": len(picked),
            "num_trained": len(trained), "num_dropped": int(num_dropped),
            "entropy_bits": float(pooled_entropy(self.true_counts, picked)) if picked else 0.0,
            "covers_all_classes": bool(covers_all_classes(self.true_counts, picked)) if picked else False,
            "entropy_bits_trained": float(pooled_entropy(self.true_counts, trained)) if trained else 0.0,
            "bytes_uploaded": int(nbytes), "cumulative_bytes": int(cum_prev + nbytes), "seconds": float(seconds),
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

    def run_round(self, state: TrainState) -> dict:
        """Advance ``state`` by one round; append and return its table row."""
        c = self.config
        t0 = time.perf_counter()
        rnd = state.round + 1
        lr = c.lr * c.lr_decay ** (rnd - 1)
        picked, state.selector_state = self.selector.select(self.server_counts, c.clients_per_round,
                                                            state.selector_state, state.selection_rng)
        picked = [int(k) for k in picked]
        avail = state.availability_rng
        dropped = avail.random(len(picked)) < c.dropout_prob
        straggler_epochs = avail.integers(1, c.local_epochs + 1, size=len(picked))
        results, trained = [], []
        for j, k in enumerate(picked):
            if dropped[j]:
                continue
            epochs = int(straggler_epochs[j]) if self.stragglers[k] else c.local_epochs
            res, new_cs = self.train_client(state, k, rnd, lr, epochs)
            if new_cs:
                state.client_states[k] = new_cs
            results.append(res)
            trained.append(k)
        uploads = [r for r in results if r.num_samples > 0]
        if uploads:
            n = np.array([r.num_samples for r in uploads], dtype=np.float64)
            state.global_params, state.server_state = self.algorithm.aggregate(
                state.global_params, uploads, n / n.sum(), state.server_state)
            train_loss = float(np.sum(n * np.array([r.train_loss for r in uploads])) / n.sum())
        else:
            train_loss = float("nan")
        state.round = rnd
        if rnd % c.eval_every == 0 or rnd == c.rounds:
            acc, loss = self.evaluate(state.global_params)
        else:
            acc, loss = float("nan"), float("nan")
        factor = int(getattr(self.algorithm, "upload_factor", 1))
        nbytes = 4 * self.num_params * factor * len(uploads)
        cum_prev = state.rows[-1]["cumulative_bytes"] if state.rows else 0
        row = self._row(rnd, lr, acc, loss, train_loss, picked, trained, int(dropped.sum()), nbytes, cum_prev,
                        time.perf_counter() - t0)
        state.rows.append(row)
        return row


#: Hooks that mark an algorithm with its own round driver (FedConcat's two-stage plan, FedEntropy's judgement
#: of uploads); ``fedlib.trainer`` runs only algorithms that fit the per-round contract of ``fedlib.algorithms.base``.
_OWN_DRIVER_HOOKS = ("plan", "judge")


def _check_supported(config: ExperimentConfig) -> None:
    from .algorithms import algorithm_class
    from .config import ConfigError

    cls = algorithm_class(config.algorithm)
    own = [h for h in _OWN_DRIVER_HOOKS if hasattr(cls, h)]
    if own:
        raise ConfigError(f"config field 'algorithm': got {config.algorithm!r}; it has its own round driver "
                          f"(hooks {', '.join(own)}) that fedlib.trainer does not run yet; the per-round trainer "
                          f"supports 'fedavg', 'fedprox', 'fednova', 'scaffold', 'fedrs', 'fedlc'.")


def _table(rows) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(TABLE_COLUMNS))


def run_experiment(config: ExperimentConfig, *, run_root=None, progress: bool = True,
                   stop_after: int | None = None) -> RunResult:
    """Run (or read back, or resume) one experiment.

    ``config`` is validated first (before any data is loaded).  Without ``run_root`` the run happens in memory.
    With ``run_root`` the run lives in ``<run_root>/<config_hash>`` (``fedlib.runs``): a finished run is read
    back (``from_cache=True``), an interrupted one resumes from its last checkpoint, and checkpoints are written
    every ``config.checkpoint_every`` rounds.  ``stop_after=r`` stops after round r *without* writing a checkpoint
    for it, as if the process had been killed then (for tests and for splitting long runs); the result is then
    ``finished=False``.  ``progress`` shows a tqdm bar over rounds.
    """
    from . import runs

    config.validate()
    _check_supported(config)
    run_dir = None
    if run_root is not None:
        run_dir = runs.RunDir(run_root, config)
        if run_dir.is_finished():
            return run_dir.load_result()
        run_dir.prepare()
    exp = Experiment(config)
    ckpt = run_dir.load_checkpoint() if run_dir is not None else None
    state = exp.state_from_checkpoint(ckpt) if ckpt is not None else exp.initial_state()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=config.rounds, initial=state.round, desc=f"{config.selector}/{config.algorithm} "
                   f"seed {config.seed}", unit="round", leave=False)
    try:
        while state.round < config.rounds:
            row = exp.run_round(state)
            if bar is not None:
                bar.update(1)
                if not math.isnan(row["test_accuracy"]):
                    bar.set_postfix(acc=f"{row['test_accuracy']:.3f}", s=f"{row['seconds']:.1f}")
            if stop_after is not None and state.round >= stop_after and state.round < config.rounds:
                return RunResult(config, _table(state.rows), run_dir.path if run_dir else None, finished=False,
                                 global_params=state.global_params)
            if run_dir is not None and state.round % config.checkpoint_every == 0 and state.round < config.rounds:
                run_dir.save_checkpoint(state.to_checkpoint())
    finally:
        if bar is not None:
            bar.close()
    table = _table(state.rows)
    if run_dir is not None:
        run_dir.save_checkpoint(state.to_checkpoint())
        run_dir.write_result(table)
    return RunResult(config, table, run_dir.path if run_dir else None, finished=True,
                     global_params=state.global_params)
