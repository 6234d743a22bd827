"""Running check/verify/bench jobs: job descriptions and executors (local process pool built in)."""
