"""The controller registry: list, read, assign and reassign."""
