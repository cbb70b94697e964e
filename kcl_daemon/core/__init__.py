"""The pure core: every decision the daemon makes, as functions over plain data (no I/O, no asyncio,
no clock).

Owns the lease vocabulary shared by everything above it (sequence numbers, the lease and its item codec,
stream identities, local expiry, reconciling unknown writes, the loop-restart policy); its sub-packages
hold one concern each. May import: the standard library and its own sub-packages only.
"""
