"""Model parallelism over `torch.distributed`: conjugate collectives, track parallelism (PT-MoE) and the
Megatron tensor-parallel baseline it is measured against."""
