"""Shard sync and cleanup, the I/O side: creating the leases a stream's shards call for, several streams
per application, and deleting finished parent leases (contract §6).

May import: ``aws``, ``metrics``, ``core``, the root utilities (never ``leases``, ``leader`` or above).
"""
