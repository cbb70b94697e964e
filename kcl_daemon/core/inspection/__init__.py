"""How a fleet's work is spread, from one lease-table scan: the distribution report and the figures an
operator alarms on (contract §10).

May import: ``kcl_daemon.core`` (the lease vocabulary) only.
"""
