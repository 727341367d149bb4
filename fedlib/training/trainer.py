"""The federated trainer: ``run_experiment(config) -> RunResult``.

``Experiment`` sets up one configuration; ``Experiment.run_round`` is the one round loop, read top to bottom, where
the algorithm answers hooks (``fedlib.algorithms.base``). Every random draw comes from a stream of ``fedlib.seeds``.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from fedlib._validate import ParameterError
from fedlib.algorithms.base import RoundPlan
from fedlib.seeds import CLIENT_STREAMS, stream_rng
from fedlib.training.config import LABEL_BASED_SELECTORS, ExperimentConfig
from fedlib.training.local import (
    LocalHyperParams,
    LocalResult,
    cap_batches,
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
    algorithm_state: object = None  # Algorithm.init_run_state's

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
    """All deterministic set-up of one configuration: ``initial_state()`` gives round 0, ``run_round(state)``
    advances ``state`` by one round in place."""

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
        # a validated config holds only its scheme's parameter (beta or classes_per_client; the other is None)
        kw = dict(beta=c.beta, classes_per_client=c.classes_per_client, min_partition_size=c.min_partition_size)
        parts = partition.partition(ds.y_train, c.partition, c.num_clients, rng=stream_rng(c.seed, "partition"), **kw)
        self.parts = [np.asarray(p, dtype=np.int64) for p in parts]
        self.client_index = [torch.as_tensor(p, device=self.device) for p in self.parts]
        self.true_counts = partition.label_count_matrix(ds.y_train, self.parts, self.num_classes).astype(np.float64)
        self.true_counts_t = torch.as_tensor(self.true_counts, dtype=torch.float32)
        self.server_counts = self.true_counts
        if c.label_dp_epsilon is not None:
            from fedlib.selection.privacy import laplace_counts

            dp_rng = stream_rng(c.seed, "label_dp")
            noisy = laplace_counts(self.true_counts, c.label_dp_epsilon, rng=dp_rng, negative=c.dp_negative)
            self.server_counts = np.asarray(noisy, dtype=np.float64)
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
        uploads_counts = bool(getattr(self.algorithm, "uploads_label_counts", False))
        self.label_upload = c.selector in LABEL_BASED_SELECTORS or uploads_counts
        try:  # table rounds of the run
            self.total_rounds = int(
                self.algorithm.num_rounds(
                    c.rounds, self.model, num_clients=c.num_clients, clients_per_round=c.clients_per_round
                )
            )
        except ParameterError as exc:
            if exc.part is None and exc.name == "rounds":  # the algorithm's own bound on the round budget
                raise exc.amend(part="config") from None
            raise
        except ValueError as exc:
            allowed = f"a budget {c.algorithm!r} can run"
            raise ParameterError("config", "rounds", c.rounds, allowed, hint=str(exc)) from exc

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
        state.algorithm_state = self.algorithm.init_run_state(
            params, model=self.model, label_counts=self.server_counts, config=c
        )
        acc, loss = self.evaluate(params)
        label_bytes = 4 * self.num_classes * c.num_clients if self.label_upload else 0
        seconds = time.perf_counter() - t0
        state.rows.append(self._row(0, "init", acc=acc, loss=loss, nbytes=label_bytes, seconds=seconds))
        return state

    def checkpoint(self, state: TrainState) -> dict:
        """``state`` as a checkpoint (``torch.save``; ``torch.load(weights_only=True)`` reads it back)."""
        ckpt = state.to_checkpoint()
        if state.algorithm_state is not None:
            ckpt["algorithm_state"] = self.algorithm.run_state_to_checkpoint(state.algorithm_state)
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
        stored = ckpt.get("algorithm_state")
        if stored is not None:
            state.algorithm_state = self.algorithm.run_state_from_checkpoint(
                stored, model=self.model, device=self.device
            )
        return state

    def run_round(self, state: TrainState) -> dict:
        """Advance ``state`` by one round; append and return its table row."""
        c, alg = self.config, self.algorithm
        t0 = time.perf_counter()
        # 1. plan: the round's phase, learning rate and the model its clients train
        plan, state.algorithm_state = alg.plan_round(state.round + 1, state.algorithm_state, config=c, model=self.model)
        # 2. pick: the algorithm's own draw replaces random selection; else the selector, on the server's counts
        picked = None
        if c.selector == "random":
            picked = alg.sample(state.server_state, c.clients_per_round, state.selection_rng)
        if picked is None:
            picked, state.selector_state = self.selector.select(
                self.server_counts, c.clients_per_round, state.selector_state, state.selection_rng
            )
        picked = [int(k) for k in picked]
        # 3. availability: drop-outs upload nothing; stragglers train 1…E epochs
        dropped = state.availability_rng.random(len(picked)) < c.dropout_prob
        straggler_epochs = state.availability_rng.integers(1, c.local_epochs + 1, size=len(picked))
        todo = [
            (k, int(straggler_epochs[j]) if self.stragglers[k] else c.local_epochs)
            for j, k in enumerate(picked)
            if not dropped[j]
        ]
        # 4. local training (batched or one client after the other)
        setups = [self.client_setup(state, k) for k, _ in todo]
        results = self.train_clients(state, plan, todo, [ctx for _, ctx in setups])
        # 5. the algorithm's client-state update (and what a client uploads beside its model)
        for (k, epochs), res, (cs, ctx) in zip(todo, results, setups):
            new_cs, res.state_delta = alg.update_client_state(
                cs,
                res,
                global_params=state.global_params,
                server_state=state.server_state,
                ctx=ctx,
                hp=self.hyper_params(plan.lr, epochs),
            )
            if new_cs:
                state.client_states[k] = new_cs
        # 6. judgement: which clients with data upload, on what they report
        with_data = [(k, r) for (k, _), r in zip(todo, results) if r.num_samples > 0]
        model = plan.model or self.model
        reports = []
        if alg.has_client_report:
            for k, r in with_data:  # a client's training inputs as the model sees them in evaluation
                inputs = self.preprocessor.test(self.x_train[self.client_index[k]])
                reports.append(alg.client_report(model, r.params, inputs, batch_size=c.eval_batch_size))
        sizes = np.array([r.num_samples for _, r in with_data], dtype=np.float64)
        mask = []
        if with_data:
            mask, state.server_state = alg.keep(plan, [k for k, _ in with_data], reports, sizes, state.server_state)
        kept = [pair for pair, keep in zip(with_data, mask) if keep]
        # 7. aggregation of the kept uploads, FedAvg weights n_k / Σ n_j
        n = np.array([r.num_samples for _, r in kept], dtype=np.float64)
        state.global_params, state.server_state, state.algorithm_state = alg.aggregate_round(
            plan,
            [r for _, r in kept],
            n / n.sum() if kept else n,
            state.global_params,
            state.server_state,
            state.algorithm_state,
        )
        # 8. evaluation of the global model (every eval_every rounds and the last)
        state.round = rnd = plan.round
        acc = loss = float("nan")
        if plan.evaluate and (rnd % c.eval_every == 0 or rnd == self.total_rounds):
            acc, loss = self.evaluate(state.global_params, model=plan.model)
        # 9. the table row; bytes: the reports and each kept client's upload_factor trainable-sized tensors
        losses = np.array([r.train_loss for _, r in with_data])
        train_loss = float(np.sum(sizes * losses) / sizes.sum()) if with_data else float("nan")
        local = plan.local or alg
        upload = sum(kept[0][1].params[key].numel() for key in local.trainable) if kept else 0
        nbytes = 4 * sum(int(np.size(r)) for r in reports) + 4 * upload * int(local.upload_factor) * len(kept)
        row = self._row(
            rnd,
            plan.phase,
            lr=plan.lr,
            acc=acc,
            loss=loss,
            train_loss=train_loss,
            picked=picked,
            trained=[k for k, _ in todo],
            kept=[k for k, _ in kept],
            num_dropped=int(dropped.sum()),
            nbytes=nbytes,
            cum_prev=state.rows[-1]["cumulative_bytes"] if state.rows else 0,
            seconds=time.perf_counter() - t0,
        )
        state.rows.append(row)
        return row

    def _row(
        self,
        rnd,
        phase,
        *,
        acc,
        loss,
        seconds,
        lr=float("nan"),
        train_loss=float("nan"),
        picked=(),
        trained=(),
        kept=(),
        num_dropped=0,
        nbytes=0,
        cum_prev=0,
    ):
        """The table row of round ``rnd``: the entropy (and class coverage) columns of the picked, trained and kept
        (aggregated) clients' pooled TRUE label counts; the test columns NaN in rounds without evaluation."""
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
            "kept_covers_all_classes": bool(covers_all_classes(self.true_counts, kept)) if kept else False,
            "phase": str(phase),
        }

    def client_setup(self, state: TrainState, k: int):
        """Client ``k``'s state (initial if it never trained) and its context on the device."""
        alg = self.algorithm
        cs = state.client_states.get(k)
        if cs is None:
            cs = alg.init_client_state(state.global_params)
        ctx = alg.client_context(k, self.true_counts_t[k], state.server_state, cs)
        return cs, {key: v.to(self.device) for key, v in ctx.items()}

    def hyper_params(self, lr: float, epochs: int) -> LocalHyperParams:
        c = self.config
        return LocalHyperParams(
            lr=lr, momentum=c.momentum, weight_decay=c.weight_decay, batch_size=c.batch_size, epochs=epochs
        )

    def train_clients(self, state: TrainState, plan: RoundPlan, todo: list, ctxs: list) -> list:
        """``LocalResult`` of each ``(client, epochs)`` of ``todo``: by the batched engine where it can, else one
        client after the other."""
        alg = self.algorithm
        starts = [alg.start_params(k, state.global_params, state.algorithm_state) for k, _ in todo]
        c = self.config
        if c.engine == "batched" and todo:
            from fedlib.training.batched import batching_unsupported_reason, options_from_config, train_clients_batched

            reason = batching_unsupported_reason(plan.model or self.model, plan.local or alg)
            if reason is None and not all(p is state.global_params for p in starts):
                reason = "its clients start from different models"
            if reason is None:  # the same generators as train_client, so the same results
                gens = [client_generators(c.seed, plan.round, k, self.device) for k, _ in todo]
                return train_clients_batched(
                    self.model,
                    state.global_params,
                    self.x_train,
                    self.y_train,
                    [self.client_index[k] for k, _ in todo],
                    list(ctxs),
                    alg,
                    [self.hyper_params(plan.lr, e) for _, e in todo],
                    [g for g, _ in gens],
                    transform=self.preprocessor.train,
                    aug_generators=[a for _, a in gens],
                    client_ids=[k for k, _ in todo],
                    options=options_from_config(c.engine_options),
                )
            warnings.warn(f"engine='batched': falling back to the reference path: {reason}.", UserWarning, stacklevel=3)
        return [
            self.train_client(start, k, plan.round, plan.lr, epochs, ctx, plan)
            for (k, epochs), start, ctx in zip(todo, starts, ctxs)
        ]

    def train_client(self, params, k: int, rnd: int, lr: float, epochs: int, ctx, plan=None) -> LocalResult:
        """Local training of client ``k`` in round ``rnd`` from ``params`` (``plan``: the round's model, client hooks
        and batch cap; None: the run's)."""
        c, dev = self.config, self.device
        hp = self.hyper_params(lr, epochs)
        gen, aug_gen = client_generators(c.seed, rnd, k, dev)
        idx = self.client_index[k]
        x, y = self.x_train[idx], self.y_train[idx]
        if plan is not None and plan.max_batches is not None:
            x, y, hp = cap_batches(x, y, hp, plan.max_batches, gen)
        model, local = (plan and plan.model) or self.model, (plan and plan.local) or self.algorithm
        transform = self.preprocessor.train
        # layers that draw from the global torch RNG (dropout) get a per-(round, client) seed; restored after
        with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
            torch.manual_seed(client_seed(c.seed, rnd, k, CLIENT_STREAMS["torch_rng"]))
            return local_train(
                model, params, x, y, ctx, local, hp, gen, transform=transform, aug_generator=aug_gen, client_id=k
            )

    def evaluate(self, params, model: torch.nn.Module | None = None) -> tuple[float, float]:
        """(accuracy, mean cross-entropy) of ``params`` on the test set (``model``: default the experiment's)."""
        from fedlib.training.batched import evaluate

        model = self.model if model is None else model
        batch_size = self.config.eval_batch_size
        return evaluate(
            model, params, self.x_test, self.y_test, transform=self.preprocessor.test, batch_size=batch_size
        )


def run_experiment(
    config: ExperimentConfig, *, run_root=None, progress: bool = True, stop_after: int | None = None, on_round=None
) -> RunResult:
    """Run (or read back, or resume) one experiment.

    With ``run_root`` the run lives in ``<run_root>/<config_hash>``: a finished run is read back, an interrupted one
    resumes from its last checkpoint; nothing is written before the set-up succeeded. ``stop_after=r`` stops after
    round r without a checkpoint, as if killed (``finished=False``); ``on_round(row, total)`` follows every round.
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
    total, path = exp.total_rounds, run_dir.path if run_dir is not None else None
    ckpt = run_dir.load_checkpoint() if run_dir is not None else None
    state = exp.state_from_checkpoint(ckpt) if ckpt is not None else exp.initial_state()
    bar = None
    if progress:
        from tqdm.auto import tqdm

        desc = f"{config.selector}/{config.algorithm} seed {config.seed}"
        fmt = "{l_bar}{bar}| {n_fmt}/{total_fmt} rounds [{elapsed} elapsed, {remaining} left{postfix}]"
        bar = tqdm(total=total, initial=state.round, desc=desc, unit="round", leave=False, bar_format=fmt)
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
                    config, make_table(state.rows), path, finished=False, global_params=state.global_params
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
    return RunResult(config, table, path, finished=True, global_params=state.global_params)
