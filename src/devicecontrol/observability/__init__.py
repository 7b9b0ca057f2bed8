"""What operators watch: health and readiness probes, Prometheus metrics, request and audit logs.

- ``logs``: the two line formats (JSON, text) and the logging set-up of ``serve`` and the CLI;
- ``request_log``: the ASGI wrapper that gives every request its id, its log line and its
  request metrics;
- ``audit``: one line per security-relevant action (login, token and ownership changes);
- ``metrics``: the Prometheus metrics, across worker processes;
- ``endpoints``: ``GET /healthz``, ``/readyz`` and ``/metrics``.
"""
