"""Purging what no request can use any more, in small batches, from the CLI and on a schedule."""
