"""The Spark source's and sink's decisions, as functions over plain data (no I/O, no clock).

Offsets and where shards stand (``offsets``: the driver-read mode's v1 offsets, starting positions),
micro-batches planned by the driver and ended by executors (``batches``: v2 offsets, what to probe,
what to read, where a read ended), the lease table as the fleet's hand-over point (``leases``), the
option names other connectors use (``aliases``) and the Kinesis sink's PutRecords batches and retries
(``puts``).

May import: ``kcl_daemon.core.shards`` (the shard graph), the lease rules (``kcl_daemon.core.leases``),
the vocabulary (``kcl_daemon.core.sequence``, ``kcl_daemon.core.stream_identity``) and
``kcl_daemon.errors``.
"""
