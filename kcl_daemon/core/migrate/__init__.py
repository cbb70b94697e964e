"""The ``migrate`` command's pure rules: the plan of a lease-table layout migration.

The twin of :mod:`kcl_daemon.migrate`.
"""
