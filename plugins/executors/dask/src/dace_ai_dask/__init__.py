"""dace-ai executor on dask.distributed (``dace-ai bench --executor dask``)."""
