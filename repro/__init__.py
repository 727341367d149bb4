"""The reproduction of the FedEntOpt paper (Lutz et al., v2), apart from the library and run from the checkout
(``python -m repro``): the paper's statements and the rules that judge them (``statements.yaml``, ``statements``,
``rules``, ``quantities``, ``scorecard``), the tiers and the seed plan (``tiers``, ``seed_plan``, ``paper_tier``), the
stored results (``results``), what the book's pages report and their helpers, the studies beyond the paper (lying
clients, greedy against the best subset, cross-device scale) and the operations (GPU check, cost model).

Importing ``repro`` registers the greedy-gap study's selector ``"fedentopt-swap"`` (``swap_selector``), so every process
that trains a run of the reproduction knows it: pool and Ray workers import ``repro`` to unpickle their task."""

from repro import swap_selector  # noqa: F401 (registers "fedentopt-swap")
