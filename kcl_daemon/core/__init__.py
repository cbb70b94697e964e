"""The pure core: every decision the daemon makes, as functions over plain data (no I/O, no asyncio,
no clock).

Owns the vocabulary every concern shares (sequence numbers, stream identities) and the loop-restart
policy; each sub-package holds one concern's rules under the name of its runtime twin (``core.leases``
for ``leases``). May import: its own modules and the standard library only, without I/O (the
`pure-core` contract).
"""
