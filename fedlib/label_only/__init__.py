"""Studies that need only label counts, at any scale: selection runs (``simulate``), the label-only studies of the
paper (``label_studies``), cross-device federations of up to 10^6 clients (``cross_device``), clients that lie about
their counts (``adversarial``) and the greedy pick against the best subset (``greedy_gap``)."""
