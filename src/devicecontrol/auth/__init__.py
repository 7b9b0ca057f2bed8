"""Login, renew and the bearer-token check."""
