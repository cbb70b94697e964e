"""Getting records out of a shard: polling GetRecords (spec 7) and KPL de-aggregation (spec 1.12)."""
