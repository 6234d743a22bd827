"""dace-ai-labgateway: the lab's model gateway as a dace-ai provider."""
