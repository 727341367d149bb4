"""Client selection: the selectors and their entropy scorers, the exact best subset of a round, defences against
clients that lie, label-count DP and the label metrics (entropy, coverage, H_norm)."""
