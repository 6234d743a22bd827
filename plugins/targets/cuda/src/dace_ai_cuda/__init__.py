"""dace-ai target pack for NVIDIA GPUs programmed in CUDA."""
