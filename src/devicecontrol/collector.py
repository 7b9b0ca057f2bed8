"""The cyclic garbage collector set for a long-running process of the service (the HTTP
workers and the device link): fewer, shorter pauses.

Why: with Python's default thresholds (700, 10, 10) the short-lived objects of busy work
(a reading's packet and batch row in the link; a month's summary, 721 buckets, in an HTTP
worker) reach the oldest generation within milliseconds, so that a full collection runs
every few requests or seconds and stops the process: 150 to 370 ms in the link at 1,000
readings/s over 10,000 connections, 50 to 85 ms in an HTTP worker answering month
summaries (traced with ``gc.callbacks``). With a young generation of 5,000 objects such
objects die young, and a full collection needs ten times as many middle-aged ones. What
the process holds when it is set (modules, settings, the app) is frozen out of every
collection.
"""

from __future__ import annotations

import gc

YOUNG_COLLECTION_EVERY = 5_000
MIDDLE_COLLECTION_EVERY = 20
FULL_COLLECTION_EVERY = 100


def collect_garbage_for_a_service() -> None:
    """Freeze what the process holds now, and collect rarely: call it once, when the
    process has built what it keeps."""
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, MIDDLE_COLLECTION_EVERY, FULL_COLLECTION_EVERY)
