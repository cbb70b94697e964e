"""One shard consumer's life: the state machine, checkpoint rules, child restart policy and the child's
log/metric channel policy (contract §1).

May import: the lease rules (``kcl_daemon.core.leases``) and the vocabulary (``kcl_daemon.core.sequence``,
``kcl_daemon.core.stream_identity``), and ``kcl_protocol`` (the child's log/metric channel).
"""
