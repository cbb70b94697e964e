"""`kcl-daemon migrate`: what Java's KclMigrationTool does (roll Migration3.0 back to 2.x or forward),
plus what it cannot: show the table-migration state and remove the legacy tables once it is complete.

Owns the command's I/O; the decisions are in :mod:`kcl_daemon.core.migrate.plan`. May import
``aws``, ``config`` and ``core`` (it sits beside ``inspection``).
"""
