"""One shard's consumer: a held lease from start to finish (parents, child process, checkpoints,
shard end), driving ``core.lifecycle`` with its own child and its own record source.

May import: ``process``, ``retrieval``, ``metrics``, ``core`` and the root utilities (never ``leases``,
``leader`` or ``worker``).
"""
