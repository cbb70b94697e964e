"""Placeholder; see clients/python/README.md."""
