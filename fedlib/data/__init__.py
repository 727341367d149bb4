"""Data: the image data sets (``datasets``), their per-class label counts (``profiles``), the label-skew partitions
Dir(β), #C=k and IID (``partition``) and device-side augmentation (``augment``)."""
