"""The benchmark harness: the service against the HTTP ceiling, driven by wrk (issue 4).

Not part of the test suite and not installed with the package: run it from a clone with
``python -m bench`` (see docs/PERFORMANCE.md).
"""
