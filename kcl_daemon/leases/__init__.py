"""Lease I/O shared by both lease modes: renewing every held lease on its own deadline, the 2.x taker
loop, checkpoint/release writes fenced by the lease counter (contract §4).

May import: ``aws`` adapters only through their protocols, ``metrics.observer``, ``core``, ``retry``,
``clock``, ``errors`` (never ``shards``, ``leader``, ``consumer`` or ``worker``).
"""
