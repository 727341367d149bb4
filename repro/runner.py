"""One runner for lists of runs: :func:`run_each` calls a function on every job one after the other here, in a pool of
processes or as Ray tasks (:mod:`repro.distributed`); :func:`run_configs` sweeps configurations into the run store.
"""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from fedlib._validate import ParameterError, check_choice, check_int, check_optional

__all__ = ["BACKENDS", "run_each", "run_configs"]

#: Where :func:`run_each` runs its jobs: here one after the other, in a pool of processes, one Ray task each.
BACKENDS = ("serial", "pool", "ray")


def run_each(fn, jobs, *, backend="serial", workers=1, threads=None, ray=None, run_root=None):
    """Call ``fn(*job)`` for every job; return an iterator of ``(index, value, error)`` in the order calls finish.

    A job is a tuple whose first item is the run's ``ExperimentConfig`` (the pool reads its device, Ray its
    resources).  ``backend``: ``"serial"`` (here), ``"pool"`` (``workers`` processes, spawned when a run trains on
    CUDA) or ``"ray"`` (one task per job, ``ray`` a ``repro.distributed.RayOptions``: a task whose worker died runs
    again and resumes from its checkpoint; every start is recorded in the run store ``run_root``).  ``threads``:
    torch threads per call (None: torch's; serially the caller's are restored after; on Ray ``RayOptions.threads``).
    ``error`` is None except on Ray: the text of the exception that ended a task (serial and pool raise it).  The
    arguments, and on Ray every job's configuration, are checked before any work.

    >>> [(i, value) for i, value, error in run_each(pow, [(2, 3), (3, 2)])]
    [(0, 8), (1, 9)]
    """
    check_choice("backend", backend, BACKENDS)
    check_int("workers", workers, low=1)
    check_optional(check_int, "threads", threads, low=1)
    jobs = list(jobs)
    if backend == "ray":
        from repro.distributed import RayOptions, check_config

        if threads is not None:
            raise ParameterError(None, "threads", threads, "None with backend='ray' (RayOptions.threads sets them)")
        for i, job in enumerate(jobs):  # on the driver, which may lack the GPU its workers have
            check_config(job[0], i)
        return _on_ray(fn, jobs, RayOptions() if ray is None else ray, run_root) if jobs else iter(())
    if ray is not None:
        raise ParameterError(None, "ray", ray, f"None with backend={backend!r} (Ray options need backend='ray')")
    return _in_pool(fn, jobs, workers, threads) if backend == "pool" and jobs else _serial(fn, jobs, threads)


def _serial(fn, jobs, threads):
    """One job after the other in this process."""
    import torch

    before = torch.get_num_threads()
    try:
        for i, job in enumerate(jobs):
            if threads is not None:
                torch.set_num_threads(threads)
            yield i, fn(*job), None
    finally:
        torch.set_num_threads(before)


def _call(fn, job, threads, run_root=None):
    """One job in a pool's process or a Ray task (which records its start in the run store ``run_root``)."""
    import torch

    if threads is not None:
        torch.set_num_threads(int(threads))
    if run_root is not None:
        from repro.distributed import record_attempt

        record_attempt(run_root, job[0])
    return fn(*job)


def _pool_context(configs):
    """ "spawn" when a run trains on CUDA (a forked child of a parent that touched CUDA -- ``validate()`` asks
    ``torch.cuda.is_available()`` -- cannot initialise CUDA), else the platform's default (fork on Linux: CPU runs
    start without importing torch again)."""
    import multiprocessing

    cuda = any(str(c.device).startswith("cuda") for c in configs)
    return multiprocessing.get_context("spawn" if cuda else None)


def _in_pool(fn, jobs, workers, threads):
    """``workers`` processes of this machine, in the order the jobs finish."""
    with ProcessPoolExecutor(max_workers=workers, mp_context=_pool_context([job[0] for job in jobs])) as pool:
        futures = {pool.submit(_call, fn, job, threads): i for i, job in enumerate(jobs)}
        for future in as_completed(futures):
            yield futures[future], future.result(), None


def _on_ray(fn, jobs, options, run_root):
    """One Ray task per job; a task whose worker died is run again (``options.max_retries``), one that raised not."""
    from repro.distributed import check_gpus, ray_session

    with ray_session(options) as ray:
        check_gpus(ray, [job[0] for job in jobs], options)
        task = ray.remote(_call)
        pending = {
            task.options(**options.resources(job[0]), max_retries=options.max_retries, retry_exceptions=False).remote(
                fn, job, options.torch_threads, run_root
            ): i
            for i, job in enumerate(jobs)
        }
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(ref)
            try:
                value, error = ray.get(ref), None
            except Exception as exc:  # noqa: BLE001 - RayTaskError, WorkerCrashedError, ...: reported per job
                value, error = None, f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc) else ''}"
            yield i, value, error


def _sweep_run(config, run_root: str, progress: bool) -> dict:
    """One run of a sweep: train (or resume) it into the run store; return its summary."""
    from fedlib.training.trainer import run_experiment

    res = run_experiment(config, run_root=run_root, progress=progress)
    return {**res.summary(), "run_dir": str(res.run_dir)}


def run_configs(
    configs, run_root, *, backend="serial", workers=1, threads=None, ray=None, progress=False, on_done=None
) -> list[dict]:
    """Train every configuration into the run store ``run_root`` with :func:`run_each`; return one summary per
    configuration, in order: ``RunResult.summary()``, ``run_dir`` and ``cached`` (True: finished before the sweep,
    or listed twice, so read back, not trained).  Every configuration is checked before any work; a finished run is
    read back here, never submitted.  ``progress``: per-round progress bars (serial); ``on_done(index, summary)`` is
    called as each run finishes.  On Ray a failed run does not stop the others: ``SweepError`` names it at the end.
    """
    from fedlib.training.runs import RunDir, RunResult, read_table
    from repro.distributed import SweepError, check_config

    configs = list(configs)
    for i, cfg in enumerate(configs):
        if backend == "ray":
            check_config(cfg, i)
        else:
            cfg.validate()
    given_root, run_root = run_root, str(Path(run_root).resolve())  # workers get the absolute path
    out: list[dict | None] = [None] * len(configs)
    todo: dict[str, list[int]] = {}  # run hash -> indices (a configuration listed twice runs once)
    for i, cfg in enumerate(configs):
        run_dir = RunDir(run_root, cfg)
        if run_dir.is_finished():
            summary = RunResult(cfg, read_table(run_dir.table_file)).summary()
            out[i] = {**summary, "run_dir": str(Path(given_root) / run_dir.hash), "cached": True}
            if on_done is not None:
                on_done(i, out[i])
        else:
            todo.setdefault(run_dir.hash, []).append(i)
    listed = list(todo.values())  # per configuration to train, where it is listed
    jobs = [(configs[where[0]], run_root, progress and backend == "serial") for where in listed]
    failed = []
    options = {"backend": backend, "workers": workers, "threads": threads, "ray": ray, "run_root": run_root}
    for j, value, err in run_each(_sweep_run, jobs, **options):
        for n, i in enumerate(listed[j]):
            if err is not None:
                failed.append((i, configs[i], err))
                continue
            value = {**value, "run_dir": str(Path(given_root) / Path(value["run_dir"]).name)}
            out[i] = {**value, "cached": n > 0}  # a repeat reads the run back
            if on_done is not None:
                on_done(i, out[i])
    if failed:
        raise SweepError(sorted(failed, key=lambda f: f[0]))
    return out
