"""Tests of repro.runner: one runner, three back-ends; bad arguments refused before any work.  The Ray back-end is
tested in tests/test_distributed.py (it starts a Ray instance)."""

import pytest
import torch

from fedlib.training.config import ExperimentConfig
from repro.distributed import RayOptions
from repro.runner import run_each


def _seed_and_threads(config, offset):
    """A job: what it was given and the torch threads it ran with (module level: a pool pickles it)."""
    return config.seed + offset, torch.get_num_threads()


def _jobs(n=3):
    return [(ExperimentConfig(seed=s), 10) for s in range(n)]


def test_serial_runs_in_order_with_the_threads_asked_and_restores_them():
    before = torch.get_num_threads()
    out = list(run_each(_seed_and_threads, _jobs(), threads=1))
    assert out == [(0, (10, 1), None), (1, (11, 1), None), (2, (12, 1), None)]
    assert torch.get_num_threads() == before


def test_pool_gives_what_serial_gives():
    serial = sorted(run_each(_seed_and_threads, _jobs(), threads=1))
    pooled = sorted(run_each(_seed_and_threads, _jobs(), backend="pool", workers=2, threads=1))
    assert pooled == serial


def test_no_jobs_start_nothing():
    assert list(run_each(_seed_and_threads, [], backend="ray")) == []  # no Ray instance started
    assert list(run_each(_seed_and_threads, [], backend="pool", workers=2)) == []


def test_an_error_of_a_serial_job_is_raised():
    with pytest.raises(AttributeError):
        list(run_each(_seed_and_threads, [(None, 1)]))


# every bad argument, refused when run_each is called (before any work): arguments, the message's start
BAD = [
    ({"backend": "threads"}, r"^parameter 'backend': got 'threads'; allowed: 'serial', 'pool', 'ray'\.$"),
    ({"workers": 0}, r"^parameter 'workers': got 0; allowed: an integer >= 1\.$"),
    ({"threads": 0}, r"^parameter 'threads': got 0; allowed: None or an integer >= 1\.$"),
    ({"backend": "ray", "threads": 2}, r"^parameter 'threads': got 2; allowed: None with backend='ray' "),
    ({"ray": RayOptions()}, r"^parameter 'ray': got RayOptions\(.*\); allowed: None with backend='serial' "),
]


@pytest.mark.parametrize("kwargs, message", BAD)
def test_bad_arguments_are_refused_when_called(kwargs, message):
    with pytest.raises(ValueError, match=message):
        run_each(_seed_and_threads, _jobs(), **kwargs)


def test_a_config_ray_cannot_run_is_refused_naming_the_job():
    jobs = [*_jobs(1), (ExperimentConfig(device="cuda:1"), 0)]
    with pytest.raises(ValueError, match=r"^config of run 1 parameter 'device': got 'cuda:1'"):
        run_each(_seed_and_threads, jobs, backend="ray")
