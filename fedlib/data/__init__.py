"""Data: the image data sets (``datasets``), their per-class label counts (``profiles``), the label-skew partitions
Dir(β), #C=k and IID (``partition``), device-side augmentation (``augment``) and tiny fake data sets in every on-disk
format (``fake_data``)."""
