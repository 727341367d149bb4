"""Tests for repro.communication: the 4CK / 4p formulas and the recomputed Table V."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

import pytest

from repro.communication import (
    TABLE_V_ROWS,
    label_bytes,
    model_bytes,
    paper_count_reconstruction,
    table_v,
)


def _round_sig(x: float, sig: int) -> float:
    d = Decimal(repr(x))
    exponent = d.adjusted() - sig + 1
    return float(d.quantize(Decimal(1).scaleb(exponent), rounding=ROUND_HALF_UP))


def test_label_bytes_hand_case():
    assert label_bytes(10, 100) == 4000  # 4 bytes * 10 classes * 100 clients
    assert label_bytes(4, 40) == 640


def test_model_bytes_hand_case():
    assert model_bytes(62006) == 248024


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: label_bytes(0, 100), r"parameter 'num_classes': got 0; allowed: an integer >= 1\."),
        (lambda: label_bytes(10, 0), r"parameter 'num_clients': got 0; allowed: an integer >= 1\."),
        (lambda: model_bytes(0), r"parameter 'num_params': got 0; allowed: an integer >= 1\."),
        (
            lambda: paper_count_reconstruction("resnet", 10),
            r"^parameter 'model': got 'resnet'; allowed: 'lenet5', 'vgg11', 'efficientnet-b0', 'efficientnet-b3'\.$",
        ),
    ],
)
def test_formula_errors(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_paper_labels_column_matches_formula():
    for _, c, k, _, paper_labels_mb, _, _ in TABLE_V_ROWS:
        assert label_bytes(c, k) / 1e6 == pytest.approx(paper_labels_mb, rel=0, abs=1e-12)


def test_reconstruction_reproduces_every_paper_value():
    # Finding: the paper's Model column is nominal + (d+1)(C-10) rounded to 3 decimals, and its ratio column is
    # the rounded Model MB over Labels MB, rounded to 4 significant figures.
    for _, c, k, name, paper_labels_mb, paper_model_mb, paper_ratio in TABLE_V_ROWS:
        mb = round(4 * paper_count_reconstruction(name, c) / 1e6, 3)
        assert mb == pytest.approx(paper_model_mb, abs=1e-9), (name, c)
        assert _round_sig(mb / paper_labels_mb, 4) == pytest.approx(paper_ratio, rel=1e-12), (name, c, k)


@pytest.fixture(scope="module")
def table():
    pytest.importorskip("torch")
    return table_v()


@pytest.mark.slow
def test_table_v_has_all_rows(table):
    assert len(table) == 12
    got = list(zip(table["dataset"], table["C"], table["K"], table["model"]))
    assert got == [row[:4] for row in TABLE_V_ROWS]
    assert set(table["dataset"]) == {
        "CIFAR-10",
        "CINIC-10",
        "CIFAR-100",
        "PathMNIST",
        "TissueMNIST",
        "Brain-Tumor MRI",
    }
    for column in ("paper_labels_mb", "paper_model_mb", "paper_ratio", "model_mb_rel_diff", "ratio_rel_diff"):
        assert column in table.columns


@pytest.mark.slow
def test_table_v_ratio_is_exact(table):
    for _, row in table.iterrows():
        assert row["labels_bytes"] == 4 * row["C"] * row["K"]
        assert row["model_bytes"] == 4 * row["params"]
        assert row["ratio"] == row["model_bytes"] / row["labels_bytes"]
        assert row["model_mb_rel_diff"] == row["model_mb"] / row["paper_model_mb"] - 1


@pytest.mark.slow
def test_table_v_counts_from_model_definitions(table):
    params = {(r["model"], r["C"]): r["params"] for _, r in table.iterrows()}
    assert params[("lenet5", 10)] == 62006
    assert params[("lenet5", 20)] == 62856
    assert params[("vgg11", 10)] == 9_225_610
    assert params[("efficientnet-b0", 9)] == 5_288_548 - 1_281_000 + 1281 * 9
    assert params[("efficientnet-b3", 9)] == 12_233_232 - 1_537_000 + 1537 * 9
