"""Contract §2: login, renew, bearer tokens, and the OAuth2 errors of §7."""
