"""Client selection: the selectors (``selectors``: random, FedEntOpt, KL, DC and the swap-improved FedEntOpt), the
entropy scorers behind them (``scoring``), the exact best subset of a round (``best_subset``), the opt-in
defences against clients that lie (``defence``), label-count differential privacy (``privacy``) and the label
metrics (``metrics``: entropy, coverage, H_norm)."""
