"""dace-ai target pack for ARM CPUs with the Scalable Vector Extension (SVE)."""
