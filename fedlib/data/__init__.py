"""Data: the image data sets (``datasets``), their per-class label counts (``profiles``), the label-skew partitions
Dir(β), #C=k and IID (``partition``) and device-side augmentation (``augment``).

Budget about 1,100 lines; over it because the paper's eleven data sets come in five file formats, each read with
an error that names the file, the data root and the fix, and because the augmentation is vectorised on the device
(the batched engine draws the same numbers as one client at a time)."""
