"""Compression: QAT, bit packing, ASTC block compression, group-quant baselines, SVD pull-out."""
