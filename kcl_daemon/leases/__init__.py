"""Lease I/O shared by both lease modes: renewing every held lease on its own deadline (``keeper``), the
coordinator that holds them (``coordinator``) with the 2.x taker loop (``taking``), its fenced writes
(``fenced_writes``) and a graceful stop's last writes (``graceful_stop``) (contract §4).

May import: ``metrics.observer``, ``core``, ``retry``, ``clock``, ``blocking``, ``errors`` (never
``aws``: the table is a protocol of its own, :class:`~kcl_daemon.leases.keeper.KeeperTable`; never
``shards``, ``leader``, ``lifecycle`` or ``worker``).
"""
