"""dace-ai environment pack: cuBLAS for CUDA targets."""
