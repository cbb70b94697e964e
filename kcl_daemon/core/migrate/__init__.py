"""The ``migrate`` command's pure rules: the plan of a lease-table layout migration.

The twin of :mod:`kcl_daemon.migrate`. May import: ``kcl_daemon.core.leader`` (the table layouts),
the lease rules (``kcl_daemon.core.leases``) and the vocabulary (``kcl_daemon.core.sequence``,
``kcl_daemon.core.stream_identity``) only.
"""
