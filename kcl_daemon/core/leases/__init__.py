"""The lease rules: a lease's vocabulary and item codec, its expiry, keeping it (renewal and
release), taking it (KCL 2.x taker), reconciling unknown-outcome writes, restart graces.

The twin of :mod:`kcl_daemon.leases`. May import: :mod:`kcl_daemon.core.sequence`,
:mod:`kcl_daemon.core.stream_identity` only.
"""
