"""KCL 3.x leader-based assignment, the I/O side: the client-version mode switch, leader election,
the leader's assignment loop, lease discovery, hand-off, worker-metrics publishing (contract §5).

May import: ``leases``, ``metrics``, ``supervise``, ``aws``, ``config`` (its slice of the settings),
``core``, the root utilities; what it needs from the worker above it is the
:class:`~kcl_daemon.leader.hooks.WorkerHooks` protocol.
"""
