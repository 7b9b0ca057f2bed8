"""Readings: what devices report, stored, and shown to their owner."""
