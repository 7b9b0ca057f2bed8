"""Automations of the original API: geofences and weekly schedules, and what they share."""
