"""Contract §3: GET /users/me."""
