"""Tests of repro.greedy_gap and of the stored tables in results/greedy_gap/ (scripts/greedy_gap.py)."""

import sys
from collections import deque
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedlib.selection.metrics import entropy_bits
from repro import greedy_gap, swap_selector
from repro.best_subset import GAP_TOL, brute_force_subset
from repro.label_studies import federation_counts

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import greedy_gap as script  # noqa: E402

SMALL = np.array([[6, 0, 0], [0, 5, 1], [3, 3, 0], [0, 0, 4], [1, 1, 1], [0, 6, 0], [2, 0, 2], [4, 4, 4]], float)


def test_round_gaps_brackets_the_best_subset():
    """greedy <= swap <= brute-force best; the exact rounds are proven and equal brute force (8 clients, M = 3)."""
    frame = greedy_gap.round_gaps(
        SMALL, clients_per_round=3, num_rounds=12, buffer_size=2, seed=0, exact_every=1, node_limit=10_000
    )
    assert (frame.swap_entropy >= frame.greedy_entropy - GAP_TOL).all()
    assert frame.exact_optimal.all()
    for r in frame.itertuples():
        assert r.swap_entropy <= r.exact_entropy + GAP_TOL
    best, _ = brute_force_subset(SMALL, 3, candidates=np.arange(8))
    assert frame.exact_entropy.max() <= best + GAP_TOL


def test_round_gaps_exact_every_leaves_other_rounds_empty():
    frame = greedy_gap.round_gaps(
        SMALL, clients_per_round=2, num_rounds=5, buffer_size=0, seed=0, exact_every=2, node_limit=100
    )
    assert frame.exact_entropy.notna().tolist() == [True, False, True, False, True]


@pytest.mark.parametrize("buffer_size", [0, 2, 5])
def test_improved_run_keeps_a_feasible_buffer_and_beats_nothing_worse(buffer_size):
    """Every round's picks are M distinct clients and the FIFO update never meets a buffered pick (it would raise)."""
    picked, entropy, covers = greedy_gap.improved_run(
        SMALL, clients_per_round=3, num_rounds=20, buffer_size=buffer_size, seed=1
    )
    assert all(len(set(row)) == 3 for row in picked.tolist())
    assert entropy == pytest.approx([entropy_bits(SMALL[row].sum(axis=0)) for row in picked])
    assert covers.tolist() == [bool(np.all(SMALL[row].sum(axis=0) > 0)) for row in picked]


def test_fifo_push_refuses_a_buffered_pick():
    with pytest.raises(AssertionError, match="client 1 is still buffered"):
        swap_selector._fifo_push(deque([1, 2]), [1], 2)


def test_gap_summary_by_hand():
    rounds = pd.DataFrame(
        {
            "setting": ["a"] * 4,
            "greedy_entropy": [1.0, 1.0, 0.5, 0.9],
            "swap_entropy": [1.0, 1.2, 0.9, 0.9],
            "greedy_covers": [True, False, False, True],
            "swap_covers": [True, True, False, True],
            "exact_entropy": [1.0, np.nan, 1.0, 0.95],
            "exact_optimal": [True, None, False, True],
        }
    )
    s = greedy_gap.gap_summary(rounds, ["setting"], num_classes=4).iloc[0]
    assert s.rounds == 4 and s.swap_better == 0.5
    assert s.gap_max == pytest.approx(0.4) and s.gap_share_mean == pytest.approx(0.6 / 4 / 2)
    assert (s.coverage_greedy, s.coverage_swap) == (0.5, 0.75)
    # exact rounds: 1 (proven, greedy optimal), 3 (not proven), 4 (proven, gap 0.05)
    assert (s.exact_rounds, s.proven, s.greedy_optimal) == (3, 2, 0.5)
    assert s.proven_gap_max == pytest.approx(0.05)
    assert s.exact_beats_swap == pytest.approx(2 / 3)


# --------------------------------------------------------------------------- the stored tables recompute


def _stored(name):
    path = greedy_gap.table_path(name)
    if not path.exists():
        pytest.skip(f"{path} not computed (python scripts/greedy_gap.py)")
    return pd.read_csv(path)


def _same(stored: pd.DataFrame, fresh: pd.DataFrame, columns):
    for c in columns:
        if fresh[c].dtype.kind == "f" or stored[c].dtype.kind == "f":
            np.testing.assert_allclose(stored[c].astype(float), fresh[c].astype(float), atol=1e-9, err_msg=c)
        else:
            assert stored[c].astype(str).tolist() == fresh[c].astype(str).tolist(), c


def test_stored_paper_rounds_recompute():
    """The first 3 rounds (round 1 with the branch and bound) of one setting and seed, as the script runs them."""
    stored = _stored("paper")
    part = (
        stored[
            (stored.dataset == "CIFAR-10")
            & (stored.partition == "Dir(0.1)")
            & (stored.buffer_size == 50)
            & (stored.seed == 1)
        ]
        .head(3)
        .reset_index(drop=True)
    )
    counts = greedy_gap.paper_counts("cifar10", "Dir(0.1)", script.NUM_CLIENTS, 1)
    fresh = greedy_gap.round_gaps(
        counts,
        clients_per_round=script.CLIENTS_PER_ROUND,
        num_rounds=3,
        buffer_size=50,
        seed=1,
        exact_every=script.EXACT_EVERY,
        node_limit=script.NODE_LIMIT,
    )
    _same(
        part, fresh, ["round", "candidates", "greedy_entropy", "swap_entropy", "swaps", "swap_covers", "exact_entropy"]
    )
    assert part.exact_optimal.iloc[0] == fresh.exact_optimal.iloc[0]


def test_stored_paper_table_has_every_setting():
    stored = _stored("paper")
    groups = stored.groupby(["dataset", "partition", "buffer_size", "seed"]).size()
    assert len(groups) == 8 * len(script.SEEDS) and (groups == script.NUM_ROUNDS).all()


@pytest.mark.slow
def test_stored_improved_greedy_row_recomputes():
    stored = _stored("improved")
    row = stored[
        (stored.dataset == "CIFAR-100") & (stored.partition == "C=2") & (stored.buffer_size == 70) & (stored.seed == 0)
    ].set_index("method")
    counts = greedy_gap.paper_counts("cifar100-20", "C=2", script.NUM_CLIENTS, 0)
    picked, entropy, covers = greedy_gap.improved_run(
        counts, clients_per_round=script.CLIENTS_PER_ROUND, num_rounds=script.NUM_ROUNDS, buffer_size=70, seed=0
    )
    improved = row.loc["FedEntOpt + swaps"]
    assert improved.mean_entropy == pytest.approx(entropy.mean(), abs=1e-9)
    assert improved.coverage == pytest.approx(covers.mean(), abs=1e-9)
    assert improved.times_picked == " ".join(map(str, np.bincount(picked.ravel(), minlength=script.NUM_CLIENTS)))


def test_stored_growth_cell_recomputes():
    stored = _stored("growth")
    part = stored[(stored.num_clients == 1000) & (stored.clients_per_round == 10) & (stored.num_classes == 10)]
    fresh = greedy_gap.growth_gaps([(1000, 10, 10)], num_rounds=script.GROWTH_ROUNDS, seed=0)
    _same(part.reset_index(drop=True), fresh, ["round", "greedy_entropy", "swap_entropy", "swaps"])


def test_stored_coverage_sizes_first_rounds_recompute():
    stored = _stored("coverage_sizes")
    part = stored[(stored.dataset == "CIFAR-10") & (stored.num_clients == 150) & (stored.clients_per_round == 3)]
    counts = federation_counts("cifar10", "dirichlet", 150, script.SIZES["seed"], beta=0.1, max_redraws=1000)
    fresh = greedy_gap.round_gaps(
        counts,
        clients_per_round=3,
        num_rounds=2,
        buffer_size=75,
        seed=script.SIZES["seed"],
        exact_every=script.SIZES["exact_every"],
        node_limit=script.NODE_LIMIT,
    )
    _same(part.head(2).reset_index(drop=True), fresh, ["greedy_entropy", "swap_entropy", "exact_entropy"])


def test_with_best_known_takes_the_larger_of_swap_and_exact():
    rounds = pd.DataFrame(
        {
            "greedy_entropy": [1.0, 1.0, 1.0],
            "swap_entropy": [1.1, 1.2, 1.0],
            "swap_covers": [False, True, True],
            "exact_entropy": [1.3, 1.2, np.nan],
            "exact_covers": [True, False, None],
            "exact_optimal": [True, False, None],
        }
    )
    out = greedy_gap.with_best_known(rounds)
    assert out.swap_gap.tolist() == pytest.approx([0.1, 0.2, 0.0])
    assert out.best_gap.tolist()[:2] == pytest.approx([0.3, 0.2]) and np.isnan(out.best_gap.iloc[2])
    assert out.best_covers.tolist()[:2] == [True, True] and pd.isna(out.best_covers.iloc[2])


def test_participation_table_h_norm_by_hand():
    # picks per client (2, 2, 0, 0): H = 1 bit, H_norm = 1 / log2 4 = 0.5; (1, 1, 1, 1): 1.0.
    improved = pd.DataFrame(
        {
            "dataset": ["D", "D"],
            "partition": ["C=2", "C=2"],
            "buffer_size": [0, 0],
            "seed": [0, 1],
            "method": ["m", "m"],
            "mean_entropy": [1.0, 2.0],
            "coverage": [0.5, 1.0],
            "times_picked": ["2 2 0 0", "1 1 1 1"],
        }
    )
    row = greedy_gap.participation_table(improved, 4).iloc[0]
    assert row.h_norm == pytest.approx(0.75) and row.mean_entropy == 1.5 and row.coverage == 0.75


def test_load_tables_names_what_is_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="lacks paper.csv.gz, improved.csv"):
        greedy_gap.load_tables(tmp_path)


# --------------------------------------------------------------------------- the swap-improved selector


def test_swap_improved_selector_picks_the_swap_search_of_the_greedy_pick():
    from fedlib.selection.selectors import FedEntOptSelector
    from repro.best_subset import round_candidates, swap_search

    swap_sel, greedy_sel = swap_selector.SwapImprovedSelector(buffer_size=3), FedEntOptSelector(buffer_size=3)
    state = ()
    for r in range(15):
        greedy, _ = greedy_sel.select(SMALL, 3, state, np.random.default_rng(r))
        picked, new_state = swap_sel.select(SMALL, 3, state, np.random.default_rng(r))
        expected = swap_search(SMALL, np.sort(greedy), candidates=round_candidates(state, 8, 3, 3)).subset
        assert sorted(picked.tolist()) == expected.tolist()
        assert len(new_state) == 3 and set(new_state) <= set(state) | set(picked.tolist())
        state = new_state


def test_swap_improved_selector_refuses_defence_options():
    with pytest.raises(
        ValueError,
        match=r"selector 'fedentopt-swap' parameter 'share_cap': got 2.0; allowed: None \(the "
        "swap-improved selector takes no defence options\\)",
    ):
        swap_selector.SwapImprovedSelector(buffer_size=1, share_cap=2.0)


def test_importing_repro_registers_the_swap_selector_as_label_based():
    from fedlib.selection.selectors import LABEL_BASED_SELECTORS, SELECTORS, make_selector

    assert (
        SELECTORS["fedentopt-swap"] is swap_selector.SwapImprovedSelector and "fedentopt-swap" in LABEL_BASED_SELECTORS
    )
    assert make_selector("fedentopt-swap", buffer_size=2) == swap_selector.SwapImprovedSelector(buffer_size=2)
    with pytest.raises(
        ValueError,
        match=r"^selector 'fedentopt-swap' parameter 'share_cap': got 2.0; allowed: None \(the swap-improved selector ",
    ):
        make_selector("fedentopt-swap", buffer_size=2, share_cap=2.0)


# Run in a fresh process: fedlib alone, after importing every fedlib module, knows the four built-in selectors; the
# training script imports repro, which registers "fedentopt-swap" (a label-based selector that configs then accept).
_REGISTRY_CODE = """
import importlib, pkgutil, sys, fedlib
from fedlib.selection import selectors
from fedlib.training.config import LABEL_BASED_SELECTORS, ExperimentConfig
for m in pkgutil.walk_packages(fedlib.__path__, "fedlib."):
    if "flower" not in m.name:
        importlib.import_module(m.name)
config = ExperimentConfig(selector="fedentopt-swap", selector_params={"buffer_size": 2})
print(list(selectors.SELECTORS), list(LABEL_BASED_SELECTORS))
try:
    config.validate()
except ValueError as error:
    print(error)
sys.path.insert(0, "scripts")
import greedy_gap_training
print(list(selectors.SELECTORS), list(LABEL_BASED_SELECTORS))
print(config.validate().build_selector_and_algorithm()[0])
"""


@pytest.mark.slow
def test_fedlib_alone_knows_no_swap_selector_and_importing_repro_registers_it():
    import subprocess

    run = subprocess.run([sys.executable, "-c", _REGISTRY_CODE], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == [
        "['random', 'fedentopt', 'kl', 'dc'] ['fedentopt', 'kl', 'dc']",
        "config parameter 'selector': got 'fedentopt-swap'; allowed: 'random', 'fedentopt', 'kl', 'dc'.",
        "['random', 'fedentopt', 'kl', 'dc', 'fedentopt-swap'] ['fedentopt', 'kl', 'dc', 'fedentopt-swap']",
        "SwapImprovedSelector(buffer_size=2, buffer_fraction=None)",
    ]


@pytest.mark.slow
def test_stored_training_first_rounds_recompute():
    """The first two rounds of one stored training run (torch on one thread, as the script trains)."""
    import torch

    from fedlib.training.trainer import run_experiment

    stored = _stored("training")
    training = __import__("greedy_gap_training")
    torch.set_num_threads(1)
    config = training.configs(1)["FedEntOpt + swaps"]
    fresh = run_experiment(config, progress=False, stop_after=2).table
    fresh = fresh[fresh["round"].between(1, 2)].reset_index(drop=True)
    part = stored[(stored.method == "FedEntOpt + swaps") & (stored.seed == 1)].head(2).reset_index(drop=True)
    _same(part, fresh, ["round", "test_accuracy", "entropy_bits", "picked"])
