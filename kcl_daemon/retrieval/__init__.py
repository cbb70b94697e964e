"""Getting records out of a shard: polling GetRecords (contract §7), enhanced fan-out, read-ahead and KPL
de-aggregation (contract §1.12), all behind :class:`~kcl_daemon.retrieval.source.RecordSource`.

May import: ``aws``, ``config`` (its slice of the settings), ``core``, ``kcl_protocol`` and the root
utilities.
"""
