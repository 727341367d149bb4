"""fedlib: entropy-based client selection (FedEntOpt) and the federated-learning baselines it is compared with."""

__version__ = "0.1.0"
