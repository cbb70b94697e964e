"""KCL 3.x leader-based assignment: the decider interface, our cooperative assignor, Java's variance and
lease-count deciders, the leader lock rules, the client version, worker metrics and zones (contract §5).

May import: ``kcl_daemon.core`` (the lease vocabulary) only.
"""
