"""dace-ai-labrules: The lab's house rules as dace-ai prompt sections."""
