"""Operations: /healthz, /readyz, /metrics, request logs and audit lines."""
