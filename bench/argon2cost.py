"""What one argon2id hash costs here, measured in-process: the floor under every login."""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from devicecontrol.auth.passwords import hash_password, verify_password

SAMPLES = 10
PASSWORD = "argon2-cost-sample"  # noqa: S105 (never stored)


@dataclass(frozen=True, slots=True)
class Argon2Cost:
    hash_ms: float
    verify_ms: float


def measure(samples: int = SAMPLES) -> Argon2Cost:
    """Median wall time of ``hash_password`` and of ``verify_password`` (a login verifies)."""
    hash_times, verify_times = [], []
    stored = hash_password(PASSWORD)
    for _ in range(samples):
        started = time.perf_counter()
        hash_password(PASSWORD)
        hash_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        verify_password(stored, PASSWORD)
        verify_times.append(time.perf_counter() - started)
    return Argon2Cost(
        hash_ms=statistics.median(hash_times) * 1e3,
        verify_ms=statistics.median(verify_times) * 1e3,
    )
