"""dace-ai-labwarnings: A dace-ai checker that refuses code with compiler warnings."""
