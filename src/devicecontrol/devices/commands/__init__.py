"""Commands: their statuses, the lifecycle that moves them, making and reading them."""
