"""Demo data and the walk-through that uses it (serve --demo, devicecontrol demo)."""
