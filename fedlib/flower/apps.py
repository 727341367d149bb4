"""A fedlib federation (one ``ExperimentConfig``) as a Flower ServerApp and ClientApp, and ``flwr_run`` to run it.

The apps do what ``fedlib.training.trainer`` does, but with Flower carrying every message: client ``k`` is Flower's
partition ``k`` (``context.node_config["partition-id"]``) and holds fedlib's partition ``k`` of the data set; it
answers the label-count query with its true counts (or, with ``label_dp_epsilon``, counts noised on the client
from its own stream ``SeedSequence([seed, 5, k])``, where fedlib's trainer noises all rows from one stream: same
distribution, other draws); it trains with ``fedlib.training.trainer.Experiment.train_client`` (the same per-(round,
client) generators, learning rate ``lr · lr_decay^(r−1)``); the ServerApp runs ``SelectorStrategy`` with the
config's selector and fedlib's selection stream (``stream_rng(seed, "selection")``) and evaluates the global model
on the test set after every round (``evaluate_fn``), as the trainer does.

Supported: the algorithms whose server step is FedAvg's weighted average (``FLOWER_ALGORITHMS``), no dropout, no
stragglers; ``check_flower_config`` says so before any work.

``SERVER_APP`` and ``CLIENT_APP`` read the configuration from the run config (``CONFIG_KEY``: the config as JSON;
``AGGREGATION_KEY``; the ServerApp writes its per-round table to the CSV path under ``RESULT_KEY``), so that
``flwr run`` can run them; ``flwr_run`` does exactly that on a local SuperLink it starts and stops.

Flower API used: public names only (``tests/test_flower_public_api.py`` checks it): ``flwr.app`` (``Context``'s
``run_config`` and ``node_config``, ``Message``, ``RecordDict``, ``ArrayRecord``, ``MetricRecord``),
``flwr.clientapp.ClientApp`` (``@app.query``, ``@app.train``), ``flwr.serverapp`` (``ServerApp`` with
``@app.main``, ``Grid``), the strategy's ``start`` and its ``Result`` (``evaluate_metrics_serverapp``,
``train_metrics_clientapp``); ``flwr_run`` drives Flower's command-line tools ``flower-superlink`` and ``flwr run``
(with the environment variables ``FLWR_HOME`` and ``FLWR_LOCAL_SUPERLINK_HTTP_API_PORT`` and the SuperLink's
``/health`` endpoint).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from fedlib._validate import ParameterError, check_choice
from fedlib.flower.strategy import AGGREGATIONS, SelectorStrategy, label_counts_reply
from fedlib.training.config import ExperimentConfig

__all__ = [
    "FLOWER_ALGORITHMS",
    "CONFIG_KEY",
    "RESULT_KEY",
    "FlowerRun",
    "check_flower_config",
    "client_app",
    "server_app",
    "flwr_run",
    "client_dp_rng",
    "SERVER_APP",
    "CLIENT_APP",
]

#: fedlib algorithms whose server step is FedAvg's weighted average (they differ in the client's loss only).
FLOWER_ALGORITHMS = ("fedavg", "fedprox", "fedrs", "fedlc")
CONFIG_KEY = "fedlib-config"
RESULT_KEY = "fedlib-result"
AGGREGATION_KEY = "fedlib-aggregation"

_EXPERIMENTS: dict = {}  # per process: the set-up of a configuration (data, partition, model), built once


@dataclass
class FlowerRun:
    """What the ServerApp hands back: ``table`` (round, picked, test_accuracy, test_loss, train_loss; round 0 is
    the initial model), ``counts`` (the (K, C) label counts the server received) and ``picks`` (per round)."""

    config: ExperimentConfig
    table: pd.DataFrame
    counts: np.ndarray
    picks: list = field(default_factory=list)
    aggregation: str = "flower"


def check_flower_config(config: ExperimentConfig) -> ExperimentConfig:
    """Validate ``config`` and refuse what the Flower apps do not run (the message says what is allowed)."""
    config.validate()
    if config.algorithm not in FLOWER_ALGORITHMS:
        raise ParameterError(
            "config",
            "algorithm",
            config.algorithm,
            f"{', '.join(map(repr, FLOWER_ALGORITHMS))} (the Flower apps run the algorithms whose server step is "
            "FedAvg's average)",
        )
    for name in ("dropout_prob", "straggler_fraction"):
        if getattr(config, name) != 0:
            raise ParameterError(
                "config", name, getattr(config, name), "0 (the Flower apps simulate no availability failures)"
            )
    return config


def client_dp_rng(seed: int, client: int) -> np.random.Generator:
    """Client ``client``'s own stream of label-DP noise (``SeedSequence([seed, 5, client])``; 5 = fedlib's
    ``label_dp`` stream)."""
    from fedlib.seeds import STREAMS

    return np.random.default_rng(np.random.SeedSequence([int(seed), STREAMS["label_dp"], int(client)]))


def _experiment(config: ExperimentConfig):
    from fedlib.training.trainer import Experiment

    key = json.dumps(config.to_dict(), sort_keys=True)
    if key not in _EXPERIMENTS:
        _EXPERIMENTS.clear()  # one federation per process at a time
        _EXPERIMENTS[key] = Experiment(config)
    return _EXPERIMENTS[key]


def _config(context: Context, config: ExperimentConfig | None) -> ExperimentConfig:
    if config is None:
        if CONFIG_KEY not in context.run_config:
            raise ParameterError(
                "Flower app",
                "config",
                None,
                f"an ExperimentConfig passed to the app factory, or the run config key {CONFIG_KEY!r} set to "
                "ExperimentConfig.to_dict() as JSON",
            )
        config = ExperimentConfig.from_dict(json.loads(str(context.run_config[CONFIG_KEY])))
    return check_flower_config(config)


def _partition(context: Context, config: ExperimentConfig) -> int:
    k = int(context.node_config["partition-id"])
    if not 0 <= k < config.num_clients:
        allowed = f"an integer in [0, {config.num_clients}), one of the federation's num_clients clients"
        hint = f"Run num_supernodes = num_clients = {config.num_clients}."
        raise ParameterError("node config", "partition-id", k, allowed, hint=hint)
    return k


def client_app(config: ExperimentConfig | None = None, *, threads: int | None = None) -> ClientApp:
    """The ClientApp of a fedlib federation (``threads``: torch CPU threads per client, e.g. 1 in simulations)."""
    app = ClientApp()

    @app.query("label_counts")
    def label_counts(msg: Message, context: Context) -> Message:
        cfg = _config(context, config)
        exp, k = _experiment(cfg), _partition(context, cfg)
        dp = cfg.label_dp_epsilon is not None
        return label_counts_reply(
            msg,
            exp.dataset.y_train[exp.parts[k]],
            exp.num_classes,
            partition_id=k,
            epsilon=cfg.label_dp_epsilon,
            negative=cfg.dp_negative,
            rng=client_dp_rng(cfg.seed, k) if dp else None,
        )

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        import torch

        from fedlib.training.trainer import TrainState

        if threads is not None:
            torch.set_num_threads(threads)
        cfg = _config(context, config)
        exp, k = _experiment(cfg), _partition(context, cfg)
        rnd = int(msg.content["config"]["server-round"])
        params = {key: v.to(exp.device) for key, v in msg.content["arrays"].to_torch_state_dict().items()}
        state = TrainState(
            round=rnd - 1,
            global_params=params,
            server_state=exp.algorithm.init_server_state(params, num_clients=cfg.num_clients),
            client_states={},
            selector_state=(),
            selection_rng=None,
            availability_rng=None,
            rows=[],
        )
        _, ctx = exp.client_setup(state, k)
        res = exp.train_client(params, k, rnd, cfg.lr * cfg.lr_decay ** (rnd - 1), cfg.local_epochs, ctx)
        arrays = ArrayRecord({key: v.detach().cpu() for key, v in res.params.items()})
        metrics = MetricRecord({"num-examples": int(res.num_samples), "train-loss": float(res.train_loss)})
        return Message(RecordDict({"arrays": arrays, "metrics": metrics}), reply_to=msg)

    return app


def _table(strategy: SelectorStrategy, result) -> pd.DataFrame:
    rows = []
    for rnd in range(len(strategy.picks) + 1):
        ev = result.evaluate_metrics_serverapp.get(rnd)
        tr = result.train_metrics_clientapp.get(rnd)
        rows.append(
            {
                "round": rnd,
                "picked": " ".join(map(str, strategy.picks[rnd - 1])) if rnd else "",
                "test_accuracy": float(ev["accuracy"]) if ev is not None else float("nan"),
                "test_loss": float(ev["loss"]) if ev is not None else float("nan"),
                "train_loss": float(tr["train-loss"]) if tr is not None and "train-loss" in tr else float("nan"),
            }
        )
    return pd.DataFrame(rows)


def server_app(config: ExperimentConfig | None = None, *, aggregation: str | None = None, on_result=None) -> ServerApp:
    """The ServerApp of a fedlib federation: ``SelectorStrategy`` with the config's selector, central evaluation.

    ``aggregation``: ``SelectorStrategy``'s (None: the run config's ``AGGREGATION_KEY``, else ``"flower"``).
    ``on_result(FlowerRun)`` receives the outcome in the ServerApp's process."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        from fedlib.seeds import stream_rng
        from fedlib.training.local import model_state

        cfg = _config(context, config)
        exp = _experiment(cfg)
        agg = aggregation if aggregation is not None else str(context.run_config.get(AGGREGATION_KEY, "flower"))
        strategy = SelectorStrategy(
            exp.selector,
            cfg.clients_per_round,
            rng=stream_rng(cfg.seed, "selection"),
            num_clients=cfg.num_clients,
            min_available_nodes=cfg.num_clients,
            fraction_evaluate=0.0,
            aggregation=agg,
        )

        def evaluate(rnd: int, arrays: ArrayRecord):
            if rnd % cfg.eval_every and rnd != cfg.rounds:
                return None
            acc, loss = exp.evaluate({k: v.to(exp.device) for k, v in arrays.to_torch_state_dict().items()})
            return MetricRecord({"accuracy": acc, "loss": loss})

        initial = ArrayRecord({k: v.detach().cpu() for k, v in model_state(exp.model).items()})
        result = strategy.start(grid=grid, initial_arrays=initial, num_rounds=cfg.rounds, evaluate_fn=evaluate)
        run = FlowerRun(cfg, _table(strategy, result), strategy.counts, strategy.picks, agg)
        if context.run_config.get(RESULT_KEY):
            run.table.to_csv(str(context.run_config[RESULT_KEY]), index=False)
        if on_result is not None:
            on_result(run)

    return app


def _free_ports(n: int) -> list[int]:
    import socket

    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _app_dir(config: ExperimentConfig, folder, result_csv, aggregation: str) -> None:
    """Write the Flower App (``pyproject.toml``) of the fedlib federation ``config`` into ``folder``."""
    from pathlib import Path

    toml = json.dumps  # a JSON string is a valid TOML basic string
    Path(folder, "pyproject.toml").write_text(f"""[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "fedlib-federation"
version = "1.0.0"
description = "a fedlib federation run by Flower"
license = "Apache-2.0"
dependencies = ["flwr[simulation]==1.41.0"]

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "fedlib"

[tool.flwr.app.components]
serverapp = "fedlib.flower.apps:SERVER_APP"
clientapp = "fedlib.flower.apps:CLIENT_APP"

[tool.flwr.app.config]
{CONFIG_KEY} = {toml(json.dumps(config.to_dict(), sort_keys=True))}
{RESULT_KEY} = {toml(str(result_csv))}
{AGGREGATION_KEY} = {toml(aggregation)}
""")


def _script(name: str) -> str:
    import shutil
    import sys
    from pathlib import Path

    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if found is None:
        raise FileNotFoundError(f'{name!r} (installed with Flower) is not on PATH; pip install -e ".[flower]".')
    return found


def _wait_healthy(process, port: int, log_file, timeout: float = 60.0) -> None:
    """Wait until the SuperLink we started answers on its HTTP API (as ``flwr`` checks before using it)."""
    import time
    import urllib.request

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if process.poll() is not None:
            raise RuntimeError(f"flower-superlink exited with code {process.returncode}; see {log_file}.")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1.0) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise TimeoutError(f"flower-superlink did not answer on port {port} within {timeout:g} s; see {log_file}.")


def flwr_run(
    config: ExperimentConfig,
    workdir,
    *,
    aggregation: str = "flower",
    num_cpus: int = 2,
    client_cpus: int = 1,
    timeout: float = 900.0,
    log=None,
) -> pd.DataFrame:
    """Run the federation with Flower's ``flwr run`` in the simulation runtime; return the ServerApp's table.

    What a Flower user does, scripted: ``workdir`` gets a Flower App (``pyproject.toml`` naming
    ``SERVER_APP``/``CLIENT_APP`` with the configuration as run config) and a Flower home; a local SuperLink in
    simulation mode is started on free ports (and stopped at the end), and ``flwr run <app> --stream
    --federation-config "num-supernodes=K ..."`` runs the app with ``num_clients`` virtual SuperNodes on a Ray
    instance of ``num_cpus`` CPUs.  ``log``: a file object for Flower's output (default: discarded).
    """
    import os
    import subprocess
    from pathlib import Path

    check_flower_config(config)
    work = Path(workdir)
    app, home = work / "app", work / "flwr-home"
    app.mkdir(parents=True, exist_ok=True)
    home.mkdir(parents=True, exist_ok=True)
    result_csv = work / "flower-table.csv"
    _app_dir(config, app, result_csv, check_choice("aggregation", aggregation, AGGREGATIONS))
    (home / "config.toml").write_text('[superlink]\ndefault = "fedlib"\n\n[superlink.fedlib]\naddress = ":local:"\n')
    (http_port,) = _free_ports(1)  # Flower 1.41 serves the Runtime, Control and Fleet APIs on one HTTP port
    scripts = str(Path(_script("flwr")).parent)  # the SuperLink starts Flower's other executables by name
    env = {
        **os.environ,
        "PATH": os.pathsep.join([scripts, os.environ.get("PATH", "")]),
        "FLWR_HOME": str(home),
        "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(http_port),
        "FLWR_DISABLE_UPDATE_CHECK": "1",
    }
    out = subprocess.DEVNULL if log is None else log
    superlink = subprocess.Popen(
        [
            _script("flower-superlink"),
            "--insecure",
            "--simulation",
            "--isolation",
            "subprocess",
            "--disable-runtime-dependency-installation",
            "--host",
            "127.0.0.1",
            "--port",
            str(http_port),
            "--log-file",
            str(home / "superlink.log"),
        ],
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_healthy(superlink, http_port, home / "superlink.log")
        federation = (
            f"num-supernodes={config.num_clients} client-resources-num-cpus={int(client_cpus)} "
            f"client-resources-num-gpus=0.0 init-args-num-cpus={int(num_cpus)}"
        )
        proc = subprocess.run(
            [_script("flwr"), "run", str(app), "fedlib", "--stream", "--federation-config", federation],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=timeout,
            cwd=str(work),
        )
        if proc.returncode != 0 or not result_csv.exists():
            raise RuntimeError(
                f"flwr run ended with code {proc.returncode} and no result table; see {home / 'superlink.log'}."
            )
    finally:
        superlink.terminate()
        try:
            superlink.wait(timeout=30)
        except subprocess.TimeoutExpired:
            superlink.kill()
    return pd.read_csv(result_csv, dtype={"picked": str}).fillna({"picked": ""})


#: Module-level apps for ``flwr run``: they read the configuration from the run config key ``CONFIG_KEY``
#: (``[tool.flwr.app.components]``: ``serverapp = "fedlib.flower.apps:SERVER_APP"``, ``clientapp = ...``).
SERVER_APP = server_app()
CLIENT_APP = client_app(threads=1)
