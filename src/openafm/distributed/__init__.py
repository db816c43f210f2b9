"""Model parallelism over `torch.distributed`: track parallelism for PT-MoE and the Megatron baseline.

    collectives.py      the two conjugate collectives (copy_to_parallel, reduce_from_parallel) and a counter
    track_parallel.py   track parallelism for PT-MoE (report §2.2): each rank runs its own tracks, meeting per block
    tensor_parallel.py  Megatron tensor parallelism for a dense Decoder: the baseline it is measured against
"""
