"""Shard consumers: one per held lease, each feeding its shard's records to its own child."""
