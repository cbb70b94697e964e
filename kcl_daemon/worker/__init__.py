"""The worker: one consumer per held lease, wired to the lease coordinator, shard sync and cleanup."""
