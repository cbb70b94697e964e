"""The shard graph and reading rules: which leases shards call for, shard end, iterator positions, read
pacing, several streams and parent-lease cleanup (contract §6, §7).

May import: the lease rules (``kcl_daemon.core.leases``) and the vocabulary (``kcl_daemon.core.sequence``,
``kcl_daemon.core.stream_identity``) only.
"""
