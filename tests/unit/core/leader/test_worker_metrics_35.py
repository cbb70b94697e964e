"""The 3.5 attributes of a WorkerMetricStats item (``sup``, ``slu``) and spotting live Java workers that
report no CPU (contract §3.9, §5.2)."""

from __future__ import annotations

from kcl_daemon.core.leader.worker_metrics import (
    WorkerMetricStats,
    from_item,
    java_workers_without_cpu,
    to_item,
)

NOW = 1_800_000_000.0


def test_support_code_round_trip_and_java_items() -> None:
    stats = WorkerMetricStats("w", NOW, {"C": (5.0,)}, {"C": (100.0,)}, support_code=1, support_updated_s=NOW)
    item = to_item(stats)
    assert (item["sup"], item["slu"]) == (1, int(NOW))
    assert from_item({"wid": "w", **item}) == stats
    # the item a Java 3.5 worker writes in the lease table (no CPU outside EC2/ECS/EKS)
    java = from_item(
        {"leaseKey": "java-1", "lut": NOW, "sts": {}, "opr": {}, "sup": 1, "slu": NOW, "entityType": "x"},
        "leaseKey",
    )
    assert (java.support_code, java.support_updated_s, java.extra) == (1, NOW, None)
    assert "sup" not in to_item(WorkerMetricStats("old", NOW))  # a 3.0-3.4 writer


def test_java_workers_without_cpu() -> None:
    entries = [
        WorkerMetricStats("java-idle", NOW - 5),  # Java, no CPU: counts
        WorkerMetricStats("java-ec2", NOW - 5, {"C": (5.0,)}, {"C": (100.0,)}),  # reports CPU
        WorkerMetricStats("java-dead", NOW - 61),  # stale
        WorkerMetricStats("ours", NOW - 5, extra={"z": "a"}),  # a kcl-daemon reporting none
        WorkerMetricStats("broken", None),
    ]
    assert java_workers_without_cpu(entries, NOW, 30.0) == ("java-idle",)
