"""Every stored run is found again under its key: a new configuration field at its default (``engine_options``)
must not move any key (``repro.results.run_key``; the lying-clients group's ``liar_run_key``)."""

import json
from pathlib import Path

import pytest

from fedlib.training.config import ExperimentConfig
from repro.adversarial_runs import LiarSpec, liar_run_key
from repro.results import run_key

STORED = sorted((Path(__file__).resolve().parents[1] / "results").rglob("*.json"))


def _key(meta: dict) -> str:
    config = ExperimentConfig.from_dict(meta["config"])
    if "liar_spec" in meta:
        return liar_run_key(config, LiarSpec(**meta["liar_spec"]))
    return run_key(config)


def test_there_are_stored_runs():
    assert len(STORED) > 500


@pytest.mark.parametrize("tier", sorted({p.parts[-3] for p in STORED}))
def test_every_stored_run_maps_to_its_stored_key(tier):
    wrong = []
    for path in (p for p in STORED if p.parts[-3] == tier):
        meta = json.loads(path.read_text())
        if _key(meta) != meta["key"] or path.stem != meta["key"]:
            wrong.append(path.name)
    assert not wrong, f"{len(wrong)} stored runs of tier {tier!r} no longer map to their keys: {wrong[:5]}"


def test_engine_options_enter_the_key_only_when_they_change_the_numbers():
    base = ExperimentConfig(rounds=3)
    assert "engine_options" not in base.key_dict()
    same = base.replace(
        engine="batched",
        engine_options={"kernel": "vmap", "shrink": "mask", "compile": True, "tf32": True, "deterministic": False},
    )
    assert run_key(same) == run_key(base)
    bf16 = base.replace(engine="batched", engine_options={"amp_dtype": "bfloat16"})
    assert run_key(bf16) != run_key(base) and bf16.key_dict()["engine_options"] == {"amp_dtype": "bfloat16"}
    # written out at its default, amp_dtype=None is the fp32 run
    assert run_key(base.replace(engine_options={"amp_dtype": None})) == run_key(base)
