"""The KCL 2.x lease taker: which leases a worker takes or steals, decided from one scan (contract §4.4).

May import: ``kcl_daemon.core`` (the lease vocabulary) only.
"""
