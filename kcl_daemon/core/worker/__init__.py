"""The worker's pure rules: its health verdict and the status page's figures.

The twin of :mod:`kcl_daemon.worker`. May import: the lease rules (``kcl_daemon.core.leases``) and the
vocabulary (``kcl_daemon.core.sequence``, ``kcl_daemon.core.stream_identity``) only.
"""
