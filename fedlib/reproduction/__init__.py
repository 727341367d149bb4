"""The reproduction of the FedEntOpt paper (Lutz et al., v2), apart from the library: the paper's values
(``paper_values``), its claims and the scorecard (``claims``, ``scorecard``), the tiers and the paper tier (``tiers``,
``paper_tier``), the stored results and their groups (``results``, ``adversarial_runs``), what the book reports
(``reporting``, ``significance``, ``participation``, ``label_tables``, ``communication``, ``machine_spread``,
``plateau``) and the book's page helpers (``notebook``, ``static_controls``)."""
