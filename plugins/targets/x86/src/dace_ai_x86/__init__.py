"""dace-ai target pack for x86-64 CPUs with AVX2 or AVX-512."""
