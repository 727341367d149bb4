"""fedlib: entropy-based client selection (FedEntOpt) and the federated-learning baselines it is compared with."""

__version__ = "0.2.0"  # bump when a change alters what training computes (it keys the run cache)
