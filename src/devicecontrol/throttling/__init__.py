"""Failure counters that throttle guessable steps (logins, claims, device connects)."""
