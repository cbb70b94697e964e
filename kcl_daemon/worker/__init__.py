"""The worker: a scheduler that runs one shard consumer per held lease, plus the lease, shard-sync,
cleanup and status loops, and the lease mode (2.x taker or KCL 3.x leader) it is given.

May import: everything below it (``leader``, ``lifecycle``, ``shards``, ``leases``, ``process``,
``retrieval``, ``metrics``, ``supervise``, ``aws``, ``config``, ``core`` and the root utilities); nothing
above.
"""
