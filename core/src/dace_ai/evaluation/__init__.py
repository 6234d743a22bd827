"""The evaluation harness behind ``dace-ai bench``: task suites, attempts, results and reports."""
