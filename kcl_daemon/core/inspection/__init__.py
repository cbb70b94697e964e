"""How a fleet's work is spread, from one lease-table scan: the distribution report and the figures an
operator alarms on (contract §10).

May import: the lease rules (``kcl_daemon.core.leases``) and the vocabulary (``kcl_daemon.core.sequence``,
``kcl_daemon.core.stream_identity``) only.
"""
