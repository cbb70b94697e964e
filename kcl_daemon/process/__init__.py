"""Record-processor children: spawning and stopping them, and talking the protocol with them.

May import: ``kcl_protocol``, ``metrics.observer``, ``core``, ``clock``, ``errors``.
"""
