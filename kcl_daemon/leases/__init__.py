"""Lease I/O shared by both lease modes: renewing every held lease on its own deadline (``keeper``), the
coordinator that holds them (``coordinator``) with the 2.x taker loop (``taking``), its fenced writes
(``fenced_writes``) and a graceful stop's last writes (``graceful_stop``) (contract §4).

May import: ``aws`` adapters only through their protocols, ``metrics.observer``, ``core``, ``retry``,
``clock``, ``errors`` (never ``shards``, ``leader``, ``consumer`` or ``worker``).
"""
