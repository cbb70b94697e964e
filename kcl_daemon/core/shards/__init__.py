"""The shard graph and reading rules: which leases shards call for, shard end, iterator positions, read
pacing, several streams and parent-lease cleanup (contract §6, §7).

May import: ``kcl_daemon.core`` (the lease vocabulary) only.
"""
