"""Runs on Ray (the ``"ray"`` back-end of ``repro.runner.run_each``): every run is one Ray task, with the run store
of ``fedlib.training.runs`` as the only state.

Optional extra: ``pip install -e ".[ray]"``.  Without Ray installed this module imports, and every function that
needs Ray raises an ``ImportError`` saying how to install it.

How a sweep runs (``repro.runner.run_configs(..., backend="ray")``): every configuration is checked on the driver
before anything is submitted (``check_config``), a finished run is read back there, and

* every other run is one Ray task that calls ``fedlib.training.trainer.run_experiment(config, run_root=run_root)`` on
  some worker: the task needs ``cpus_per_run`` CPUs, and ``gpus_per_run`` GPUs when the configuration's device is
  ``"cuda"`` (Ray then sets ``CUDA_VISIBLE_DEVICES`` to the GPUs it granted, so ``"cuda"`` is that GPU; a fixed
  ``"cuda:N"`` is refused before any work);
* a worker that dies (killed, out of memory, node lost) makes Ray run the task again (``max_retries`` times), and
  ``run_experiment`` resumes from the run's last checkpoint (every ``config.checkpoint_every`` rounds); every start
  of a task is recorded in ``<run dir>/attempts.json`` (pid, host, the round it resumed from);
* a run that raises (a bad configuration found late, a bug) is not retried: the sweep finishes the other runs and
  then raises ``SweepError`` naming the failed ones.

Bitwise equality with the serial sweep.  A run's numbers depend only on its configuration and on the number of
torch CPU threads (CPU kernels split their reductions by thread), so a Ray task sets ``torch.set_num_threads`` to
``threads`` (default: ``cpus_per_run``); a serial sweep with ``--threads`` equal to that gives the same tables bit
for bit, except the wall-time columns (``seconds``, ``seconds_per_round``).

Where Ray runs: ``address=None`` starts a local Ray instance on this machine (``num_cpus``/``num_gpus`` cap what it
offers; default all) and stops it afterwards; ``address="auto"`` or ``"ray://<head>:10001"`` connects to a running
cluster.  On a cluster every node needs the same fedlib (same ``fedlib.__version__``, which keys the run store),
the data at the same ``data_root`` (or ``download=True``), and ``run_root`` on a file system all nodes share.
"""

from __future__ import annotations

import json
import os
import socket
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fedlib._validate import ParameterError, check_float, check_int

ROOT = Path(__file__).resolve().parents[1]  # the checkout: repro/ runs from it

__all__ = ["RayOptions", "SweepError", "ray_session", "check_config", "check_gpus", "record_attempt", "RAY_MISSING"]

RAY_MISSING = (
    'the Ray backend needs Ray, an optional extra of fedlib: pip install -e ".[ray]" (or pip install "ray==2.55.1")'
)


class SweepError(RuntimeError):
    """Some runs of a distributed sweep failed; ``failed`` lists ``(index, config, error text)``."""

    def __init__(self, failed: list):
        self.failed = failed
        lines = [f"  run {i} (seed {cfg.seed}, {cfg.selector}/{cfg.algorithm}): {err}" for i, cfg, err in failed]
        super().__init__(
            f"{len(failed)} run(s) of the sweep failed (the others are stored; a new sweep "
            f"resumes from their checkpoints):\n" + "\n".join(lines)
        )


def _import_ray():
    try:
        import ray
    except ImportError as exc:  # pragma: no cover - exercised where Ray is missing
        raise ImportError(RAY_MISSING) from exc
    return ray


@dataclass(frozen=True)
class RayOptions:
    """Where and how the runs of a sweep go (see the module docstring).

    ``address``: None (start a local Ray instance), ``"auto"`` or ``"ray://host:port"`` (connect).
    ``num_cpus``/``num_gpus``: size of a local instance (None: all of the machine); not allowed with ``address``.
    ``cpus_per_run``/``gpus_per_run``: Ray resources of one run (GPUs only for runs on ``"cuda"``; fractions such
    as 0.5 put two runs on one GPU).  ``threads``: torch CPU threads per run (None: ``max(1, int(cpus_per_run))``).
    ``max_retries``: how often Ray reruns the task of a run whose worker died.
    """

    address: str | None = None
    num_cpus: int | None = None
    num_gpus: int | None = None
    cpus_per_run: float = 1.0
    gpus_per_run: float = 1.0
    threads: int | None = None
    max_retries: int = 3

    def __post_init__(self):
        if self.address is not None and (not isinstance(self.address, str) or not self.address.strip()):
            raise ParameterError(
                None, "address", self.address, "None (start Ray here), 'auto' or 'ray://<head>:<port>'"
            )
        if self.address is not None and (self.num_cpus is not None or self.num_gpus is not None):
            raise ParameterError(
                None,
                "num_cpus/num_gpus",
                (self.num_cpus, self.num_gpus),
                f"None with address={self.address!r} (they size a local Ray instance; a cluster decides its own)",
                got=f"num_cpus={self.num_cpus!r}, num_gpus={self.num_gpus!r}",
            )
        if self.num_cpus is not None:
            check_int("num_cpus", self.num_cpus, low=1)
        if self.num_gpus is not None:
            check_int("num_gpus", self.num_gpus, low=0)
        check_float("cpus_per_run", self.cpus_per_run, low=0.0, low_open=True)
        check_float("gpus_per_run", self.gpus_per_run, low=0.0, low_open=True)
        if self.threads is not None:
            check_int("threads", self.threads, low=1)
        check_int("max_retries", self.max_retries, low=0)

    @property
    def torch_threads(self) -> int:
        return self.threads if self.threads is not None else max(1, int(self.cpus_per_run))

    def resources(self, config) -> dict:
        """Ray resources of the task that runs ``config``."""
        gpu = str(config.device).startswith("cuda")
        return {"num_cpus": float(self.cpus_per_run), "num_gpus": float(self.gpus_per_run) if gpu else 0.0}


def check_config(config, index: int = 0) -> None:
    """Validate ``config`` for a Ray worker, here on the driver (before any work).

    As ``config.validate()``, except that ``device="cuda"`` is not checked against this machine (the driver, e.g.
    a cluster's head node, may have no GPU; ``check_gpus`` asks the Ray cluster), and a fixed ``"cuda:N"`` is
    refused (Ray assigns each run its GPU through ``CUDA_VISIBLE_DEVICES``)."""
    import dataclasses

    if str(config.device).startswith("cuda:"):
        raise ParameterError(
            f"config of run {index}",
            "device",
            config.device,
            "'cuda' (Ray assigns each run its GPU through CUDA_VISIBLE_DEVICES) or 'cpu' with the Ray backend",
        )
    (dataclasses.replace(config, device="cpu") if config.device == "cuda" else config).validate()


def check_gpus(ray, configs, options: RayOptions) -> None:
    """Refuse (instead of waiting forever) runs on ``cuda`` when the Ray cluster has too few GPUs for one."""
    need = max((options.resources(c)["num_gpus"] for c in configs), default=0.0)
    have = float(ray.cluster_resources().get("GPU", 0.0))
    if need > have:
        raise ParameterError(
            "Ray backend",
            "gpus_per_run",
            need,
            f"at most the {have:g} GPU(s) the Ray cluster offers for runs on device 'cuda'",
            hint="Use device 'cpu', lower gpus_per_run or add GPU nodes.",
        )


@contextmanager
def ray_session(options: RayOptions):
    """Use a running Ray (``ray.is_initialized()``), else start or connect one for the block and shut it down after;
    yields the ``ray`` module."""
    ray = _import_ray()
    if ray.is_initialized():
        yield ray
        return
    kwargs = {"include_dashboard": False, "configure_logging": False}
    if options.address is None:  # a local instance: its workers find repro/ (not installed) from the checkout
        kwargs.update(num_cpus=options.num_cpus, num_gpus=options.num_gpus)
        path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
        kwargs["runtime_env"] = {"env_vars": {"PYTHONPATH": path}}
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"ray\..*")
        ray.init(address=options.address, **kwargs)
    try:
        yield ray
    finally:
        ray.shutdown()


def record_attempt(run_root, config) -> None:
    """Append this task start (pid, host, the checkpoint round it starts from) to ``attempts.json`` in the run's
    directory of the run store ``run_root``."""
    from fedlib.training.runs import RunDir, atomic_write_text

    run_dir = RunDir(run_root, config)
    run_dir.path.mkdir(parents=True, exist_ok=True)
    ckpt = run_dir.load_checkpoint() if run_dir.checkpoint_file.exists() else None
    path = run_dir.path / "attempts.json"
    attempts = json.loads(path.read_text()) if path.exists() else []
    attempts.append(
        {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "time": time.time(),
            "start_round": int(ckpt["round"]) if ckpt is not None else 0,
        }
    )
    atomic_write_text(path, json.dumps(attempts, indent=1) + "\n")
