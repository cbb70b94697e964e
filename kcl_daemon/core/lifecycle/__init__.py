"""One shard consumer's life: the state machine, checkpoint rules, child restart policy and the child's
log/metric channel policy (contract §1).

May import: ``kcl_daemon.core`` (the lease vocabulary) only.
"""
