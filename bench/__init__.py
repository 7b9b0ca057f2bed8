"""The benchmark harness: the service against the HTTP ceiling and two comparison servers,
driven by wrk (issues 4 and 14).

Not part of the test suite and not installed with the package: run it from a clone with
``python -m bench`` (see docs/PERFORMANCE.md).
"""
