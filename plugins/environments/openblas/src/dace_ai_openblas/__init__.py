"""dace-ai environment pack: OpenBLAS through its CBLAS interface."""
