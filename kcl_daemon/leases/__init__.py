"""Lease I/O shared by both lease modes: renewing every held lease on its own deadline, the 2.x taker
loop, checkpoint/release writes fenced by the lease counter (contract §4).

May import: ``metrics.observer``, ``core``, ``retry``, ``clock``, ``blocking``, ``errors`` (never
``aws``: the table is a protocol of its own, :class:`~kcl_daemon.leases.keeper.KeeperTable`; never
``shards``, ``leader``, ``lifecycle`` or ``worker``).
"""
