"""User accounts: profile reads over HTTP, creation and changes through the CLI."""
