"""Client selection: the selectors and their entropy scorers, defences against clients that lie, label-count DP
and the label metrics (entropy, coverage, H_norm)."""
