"""dace-ai-labzlib: zlib offered to dace-ai answers as a DaCe environment."""
