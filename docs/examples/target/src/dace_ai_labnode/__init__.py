"""dace-ai-labnode: The lab's AMD EPYC cluster nodes as a dace-ai target."""
