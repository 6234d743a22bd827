"""dace-ai target pack for AMD GPUs programmed in HIP."""
