"""regress."""
