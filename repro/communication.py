"""Communication cost of FedEntOpt (§V-D1, Table V): one-time label-count upload 4CK bytes vs. per-round model 4p
bytes."""

from __future__ import annotations

from fedlib._validate import check_choice, check_int
from repro.paper_values import TABLE_V

__all__ = [
    "communication_cost",
    "BYTES_PER_SCALAR",
    "BYTES_PER_MB",
    "TABLE_V_ROWS",
    "label_bytes",
    "model_bytes",
    "paper_count_reconstruction",
    "table_v",
]

#: Every transmitted scalar is a 32-bit float (§V-D1).
BYTES_PER_SCALAR = 4
#: The paper's megabyte: 10**6 bytes.
BYTES_PER_MB = 10**6

#: Rows of the paper's Table V: (dataset, C, K, model name for :func:`fedlib.training.models.make_model`,
#: paper's Labels MB, paper's Model MB, paper's Model/Labels ratio). The paper's values live in
#: repro.paper_values.
_MODEL_NAMES = {
    "LeNet-5": "lenet5",
    "VGG-11": "vgg11",
    "EfficientNet-B0": "efficientnet-b0",
    "EfficientNet-B3": "efficientnet-b3",
}
TABLE_V_ROWS = tuple((d, c, k, _MODEL_NAMES[m], *vals) for (d, c, k, m), vals in TABLE_V.items())

# Reconstruction of how the paper's Table V model sizes were obtained (a finding, not used by table_v):
# p_paper(C) = nominal + (d + 1) * (C - 10), i.e. a nominal 10-class (LeNet/VGG) or published ImageNet
# (EfficientNet, Tan & Le 2019, Table 2: B0 5.3M, B3 12M) parameter count with the classifier resized by
# (d + 1) scalars per class (d = classifier input width). 61,706 is LeNet-5 with ONE input channel and 32x32
# input; 9.2M is VGG-11 (9,225,610 here) rounded to two significant figures.
_PAPER_NOMINAL = {
    "lenet5": (61_706, 84),
    "vgg11": (9_200_000, 512),
    "efficientnet-b0": (5_300_000, 1280),
    "efficientnet-b3": (12_000_000, 1536),
}


def label_bytes(num_classes: int, num_clients: int) -> int:
    """Return the bytes of the one-time label-count upload of all clients, ``4 * C * K``.

    Parameters
    ----------
    num_classes : int
        Number of classes C (>= 1); each client sends a length-C count vector of 32-bit floats.
    num_clients : int
        Number of clients K (>= 1).

    Examples
    --------
    >>> label_bytes(10, 100)
    4000
    """
    num_classes = check_int("num_classes", num_classes, low=1)
    num_clients = check_int("num_clients", num_clients, low=1)
    return BYTES_PER_SCALAR * num_classes * num_clients


def model_bytes(num_params: int) -> int:
    """Return the bytes of one client's model upload, ``4 * p``.

    Parameters
    ----------
    num_params : int
        Number of transmitted scalars p (>= 1).

    Examples
    --------
    >>> model_bytes(62006)
    248024
    """
    num_params = check_int("num_params", num_params, low=1)
    return BYTES_PER_SCALAR * num_params


def paper_count_reconstruction(model: str, num_classes: int) -> int:
    """Return the parameter count that reproduces the paper's Table V Model column (our reconstruction).

    ``nominal + (d + 1) * (C - 10)`` with nominal 61,706 (LeNet-5 with one input channel), 9.2M (VGG-11),
    5.3M and 12M (EfficientNet-B0/B3 as published for ImageNet, 1000-class head included) and d the classifier
    input width (84, 512, 1280, 1536). This is *not* the size of the models the paper describes (see
    :func:`table_v`); it documents how the paper's numbers appear to have been obtained.

    Parameters
    ----------
    model : {"lenet5", "vgg11", "efficientnet-b0", "efficientnet-b3"}
        Model name.
    num_classes : int
        Number of classes C (>= 1).
    """
    check_choice("model", model, _PAPER_NOMINAL)
    num_classes = check_int("num_classes", num_classes, low=1)
    nominal, width = _PAPER_NOMINAL[model]
    return nominal + (width + 1) * (num_classes - 10)


def table_v():
    """Recompute the paper's Table V from the model definitions in :mod:`fedlib.training.models`.

    Each model is instantiated (on torch's ``meta`` device, so no weights are allocated) with the row's number of
    classes, 3 input channels and 32x32 input for LeNet-5; ``p`` counts its trainable parameters.

    Returns
    -------
    pandas.DataFrame
        One row per Table V row, columns: ``dataset``, ``C``, ``K``, ``model``, ``params`` (trainable p),
        ``state_scalars`` (floating state-dict entries incl. BatchNorm buffers), ``labels_bytes`` (4CK),
        ``model_bytes`` (4p), ``labels_mb``, ``model_mb``, ``model_mb_state_dict`` (4 * state_scalars / 1e6),
        ``ratio`` (model_bytes / labels_bytes, exact), ``paper_labels_mb``, ``paper_model_mb``, ``paper_ratio``
        (the paper's printed values) and ``model_mb_rel_diff`` = model_mb / paper_model_mb - 1 and
        ``ratio_rel_diff`` = ratio / paper_ratio - 1.
    """
    import pandas as pd
    import torch

    from fedlib.training.models import count_parameters, count_state_scalars, make_model

    cache: dict[tuple[str, int], tuple[int, int]] = {}
    records = []
    for dataset, c, k, name, paper_labels_mb, paper_model_mb, paper_ratio in TABLE_V_ROWS:
        if (name, c) not in cache:
            with torch.device("meta"):
                model = make_model(name, c, in_channels=3, image_size=32)
            cache[(name, c)] = (count_parameters(model), count_state_scalars(model))
        params, state_scalars = cache[(name, c)]
        lb, mb = label_bytes(c, k), model_bytes(params)
        ratio = mb / lb
        model_mb = mb / BYTES_PER_MB
        records.append(
            {
                "dataset": dataset,
                "C": c,
                "K": k,
                "model": name,
                "params": params,
                "state_scalars": state_scalars,
                "labels_bytes": lb,
                "model_bytes": mb,
                "labels_mb": lb / BYTES_PER_MB,
                "model_mb": model_mb,
                "model_mb_state_dict": model_bytes(state_scalars) / BYTES_PER_MB,
                "ratio": ratio,
                "paper_labels_mb": paper_labels_mb,
                "paper_model_mb": paper_model_mb,
                "paper_ratio": paper_ratio,
                "model_mb_rel_diff": model_mb / paper_model_mb - 1.0,
                "ratio_rel_diff": ratio / paper_ratio - 1.0,
            }
        )
    return pd.DataFrame.from_records(records)


def communication_cost(num_classes: int, num_clients: int, num_params: int) -> dict:
    """Communication cost of FedEntOpt's one-time label upload versus one model upload (§V-D1, Table V of v2).

    A thin summary over :func:`label_bytes` (4CK bytes, all clients, once) and :func:`model_bytes` (4p bytes, one
    client, every round).

    Returns
    -------
    dict
        ``label_bytes``, ``model_bytes`` (ints) and ``model_to_label_ratio`` (float, Table V's last column).

    Examples
    --------
    >>> communication_cost(10, 100, 61_750)  # CIFAR-10, K=100, the paper's LeNet-5 size in Table V
    {'label_bytes': 4000, 'model_bytes': 247000, 'model_to_label_ratio': 61.75}
    """
    labels = label_bytes(num_classes, num_clients)
    model = model_bytes(num_params)
    return {"label_bytes": labels, "model_bytes": model, "model_to_label_ratio": model / labels}
