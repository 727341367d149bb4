"""The label-only pages' tables, ours beside the paper's: what the notebooks display and the scorecard judges.

Each function runs a study of :mod:`repro.label_studies` over the settings of one page and merges the paper's
values (:mod:`repro.paper_values`) in, so that the page and the scorecard (:mod:`repro.quantities`) compute the
same numbers from the same parameters.
"""

from __future__ import annotations

from collections.abc import Sequence

from fedlib.data.partition import labels_from_counts, parse_partition
from repro import label_studies
from repro import paper_values as paper

__all__ = ["fig1_methods", "fig1_traces", "table6", "coverage_table", "fine_coverage"]


def fig1_methods(buffer_fraction: float, dc_num_random: int, dc_target: str) -> dict:
    """The four selectors of the entropy-trace page: FedEntOpt (buffer Q), random, KL and DC."""
    return {
        "FedEntOpt": ("fedentopt", {"buffer_fraction": buffer_fraction}),
        "Random": ("random", {}),
        "KL": ("kl", {}),
        "DC": ("dc", {"num_random": dc_num_random, "target": dc_target}),
    }


def fig1_traces(
    profile: str,
    partition: str,
    *,
    num_clients: int,
    clients_per_round: int,
    num_rounds: int,
    seeds: Sequence[int],
    buffer_fraction: float,
    dc_num_random: int,
    dc_target: str,
):
    """Per-round entropy and coverage of the four selectors (Fig. 1), one row per (method, seed, round)."""
    spec = parse_partition(partition)
    return label_studies.selector_traces(
        profile,
        spec["scheme"],
        methods=fig1_methods(buffer_fraction, dc_num_random, dc_target),
        num_clients=num_clients,
        clients_per_round=clients_per_round,
        num_rounds=num_rounds,
        seeds=seeds,
        beta=spec["beta"],
        classes_per_client=spec["classes_per_client"],
    )


def table6(
    profiles: Sequence[str],
    dataset_names: Sequence[str],
    partitions: Sequence[str],
    *,
    buffer_fractions: Sequence[float],
    num_clients: int,
    clients_per_round: int,
    num_rounds: int,
    seeds: Sequence[int],
):
    """Table VI's H_norm column: ``(table, per_seed, pick_counts)``.

    ``table`` has one row per (dataset, partition, buffer_pct): ``hnorm_mean``, ``hnorm_std``, ``n_seeds``,
    ``never_picked``
    (the most clients never picked over the seeds), ``mean_entropy``, the paper's ``paper_hnorm_mean`` and
    ``paper_hnorm_std``, and ``difference`` (ours - paper).
    """
    import pandas as pd

    summaries, picks = [], []
    for profile, dataset in zip(profiles, dataset_names):
        for part in partitions:
            spec = parse_partition(part)
            summary, counts = label_studies.buffer_study(
                profile,
                spec["scheme"],
                buffer_fractions=buffer_fractions,
                num_clients=num_clients,
                clients_per_round=clients_per_round,
                num_rounds=num_rounds,
                seeds=seeds,
                beta=spec["beta"],
                classes_per_client=spec["classes_per_client"],
            )
            summaries.append(summary.assign(dataset=dataset, partition=part))
            picks.append(counts.assign(dataset=dataset, partition=part))
    per_seed = pd.concat(summaries, ignore_index=True)
    ours = (
        per_seed.groupby(["dataset", "partition", "buffer_pct"])
        .agg(
            hnorm_mean=("h_norm", "mean"),
            hnorm_std=("h_norm", "std"),
            n_seeds=("h_norm", "count"),
            never_picked=("never_picked", "max"),
            mean_entropy=("mean_entropy", "mean"),
        )
        .reset_index()
    )
    table = ours.merge(paper.table_frame("VI"), on=["dataset", "partition", "buffer_pct"], how="left")
    table["difference"] = table["hnorm_mean"] - table["paper_hnorm_mean"]
    return table, per_seed, pd.concat(picks, ignore_index=True)


def coverage_table(
    profiles: Sequence[str],
    dataset_names: Sequence[str],
    *,
    pool_sizes: Sequence[int],
    subset_sizes: Sequence[int],
    num_rounds: int,
    seeds: Sequence[int],
    beta: float,
    buffer_fraction: float,
    max_redraws: int,
    per_seed: bool = False,
):
    """§V-B5's coverage, mean over seeds per (dataset, K, M), with the paper's probability (NaN where it has none)
    and ``difference`` (ours - paper) for random subsets; ``draws``: the random subsets behind each of our
    estimates (rounds x seeds).  ``per_seed``: ``(table, rows)``, ``rows`` the study's row per (dataset, K, M,
    seed)."""
    import pandas as pd

    frames = []
    for profile, dataset in zip(profiles, dataset_names):
        study = label_studies.coverage_study(
            profile,
            pool_sizes=pool_sizes,
            subset_sizes=subset_sizes,
            num_rounds=num_rounds,
            seeds=seeds,
            beta=beta,
            buffer_fraction=buffer_fraction,
            max_redraws=max_redraws,
        )
        frames.append(study.assign(dataset=dataset))
    rows = pd.concat(frames, ignore_index=True)
    means = (
        rows.groupby(["dataset", "num_clients", "clients_per_round"])[["random_coverage", "fedentopt_coverage"]]
        .mean()
        .reset_index()
    )
    table = means.merge(paper.table_frame("coverage"), on=["dataset", "num_clients", "clients_per_round"], how="left")
    table["difference"] = table["random_coverage"] - table["paper_probability"]
    table["draws"] = num_rounds * len(seeds)  # random subsets behind each estimate
    return (table, rows) if per_seed else table


def fine_coverage(
    fine_classes: int,
    fine_per_class: int,
    *,
    pool_sizes: Sequence[int],
    subset_sizes: Sequence[int],
    num_rounds: int,
    seeds: Sequence[int],
    beta: float,
    buffer_fraction: float,
    max_redraws: int,
    per_seed: bool = False,
):
    """Coverage over ``fine_classes`` equally large labels (CIFAR-100's 100 fine labels), mean over seeds per
    (K, M): the reading that explains the paper's 0 % for CIFAR-100.  ``per_seed``: ``(means, rows)``, ``rows``
    the study's row per (K, M, seed)."""
    fine = labels_from_counts([fine_per_class] * fine_classes)
    study = label_studies.coverage_study(
        fine,
        pool_sizes=pool_sizes,
        subset_sizes=subset_sizes,
        num_rounds=num_rounds,
        seeds=seeds,
        beta=beta,
        buffer_fraction=buffer_fraction,
        max_redraws=max_redraws,
    )
    means = study.groupby(["num_clients", "clients_per_round"])[["random_coverage", "fedentopt_coverage"]].mean()
    return (means, study) if per_seed else means
