"""Selection runs from label counts alone (``simulate``): FedEntOpt and the other selectors on a count matrix, at
any scale, without training."""
