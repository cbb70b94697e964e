"""Doctor's checks as pure functions: every finding, from facts built to show it, and none on clean facts."""

from __future__ import annotations

import pytest

from kcl_daemon.core.inspection.distribution import summarize
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.doctor import checks
from kcl_daemon.doctor.facts import (
    CredentialFacts,
    LayoutFacts,
    LeaderFacts,
    LeaseFacts,
    MetricsRow,
    Outcome,
    ProbeResult,
    StreamFacts,
    TableDescription,
    WorkerMetricsFacts,
)
from kcl_daemon.doctor.findings import CheckResult, DoctorReport, Severity, Status
from kcl_daemon.errors import ExitStatus

SEQ = ExtendedSequenceNumber("100")
GOOD_TABLE = TableDescription(
    "app",
    True,
    "ACTIVE",
    (("leaseKey", "HASH"),),
    {"leaseKey": "S"},
    {"LeaseOwnerToLeaseKeyIndex": ("ACTIVE", (("leaseOwner", "HASH"), ("leaseKey", "RANGE")))},
    "PAY_PER_REQUEST",
)


def messages(result: CheckResult) -> str:
    return "\n".join(f"{f.severity}: {f.message} | {f.fix}" for f in result.findings)


def shard(shard_id: str, *, closed: bool = False, parent: str | None = None) -> Shard:
    return Shard(shard_id, parent, None, 0, 2**128 - 1, 1, 5 if closed else None)


def lease(key: str, owner: str | None = "w1", counter: int = 5, **more: object) -> Lease:
    return Lease(key, more.pop("checkpoint", SEQ), owner, counter, **more)  # type: ignore[arg-type]


def lease_facts(
    leases: list[Lease], shards: list[Shard] | None, *, expired: frozenset[str] = frozenset(), **more: object
) -> LeaseFacts:
    dist = summarize(
        leases,
        expired_keys=expired,
        shard_ids=None if shards is None else [s.shard_id for s in shards],
    )
    return LeaseFacts(
        "app", dist, tuple(leases), (), 10.0, 10.0, None if shards is None else tuple(shards), **more
    )  # type: ignore[arg-type]


# -- clean -----------------------------------------------------------------------------------------


def test_clean_facts_give_no_finding_and_exit_zero() -> None:
    shards = [shard("shardId-0"), shard("shardId-1")]
    leases = [lease("shardId-0"), lease("shardId-1", owner="w2")]
    results = (
        checks.check_credentials(CredentialFacts("us-east-1", "env")),
        checks.check_streams([StreamFacts("s", "ACTIVE", 2, 24)]),
        checks.check_lease_table(GOOD_TABLE, leader_mode=True),
        checks.check_layout(
            LayoutFacts(
                "app",
                "app-CoordinatorState",
                True,
                legacy_items={"Migration3.0": {"cv": "CLIENT_VERSION_3X"}},
            )
        ),
        checks.check_iam([ProbeResult("dynamodb:Scan", "app", Outcome.ALLOWED)]),
        checks.check_leases(lease_facts(leases, shards)),
        checks.check_leader(
            LeaderFacts(
                True,
                "app-CoordinatorState",
                "key",
                _lock("w1", "a"),
                _lock("w1", "b"),
                10.0,
                frozenset({"w1"}),
            )
        ),
        checks.check_worker_metrics(
            WorkerMetricsFacts(
                "app-WorkerMetricStats",
                True,
                "wid",
                (MetricsRow("w1", 995.0, "t"), MetricsRow("w2", 990.0, "t")),
                1000.0,
                leader_mode=True,
                lease_owners=frozenset({"w1", "w2"}),
            )
        ),
    )
    report = DoctorReport(results)
    assert report.findings == (), report.text()
    assert report.exit_status is ExitStatus.OK
    assert "no problem found" in report.text()
    assert report.as_json()["ok"] is True


# -- one finding each --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (CredentialFacts(None, "env"), "no AWS region"),
        (CredentialFacts("us-east-1", None), "no credentials found"),
        (
            CredentialFacts("us-east-1", "env", identity_error="ExpiredToken", identity_checked=True),
            "rejected",
        ),
    ],
)
def test_credential_findings(facts: CredentialFacts, expected: str) -> None:
    assert expected in messages(checks.check_credentials(facts))


def test_stream_findings() -> None:
    assert "does not exist" in messages(checks.check_streams([StreamFacts("s")]))
    assert "is DELETING" in messages(checks.check_streams([StreamFacts("s", "DELETING", 0, 24)]))
    assert checks.check_streams([]).status is Status.SKIPPED


def test_lease_table_findings() -> None:
    missing = checks.check_lease_table(TableDescription("app", False), leader_mode=False)
    assert missing.findings[0].severity is Severity.WARNING and "does not exist" in messages(missing)
    wrong_key = TableDescription("app", True, "ACTIVE", (("id", "HASH"),), {"id": "S"})
    assert "not a KCL lease table" in messages(checks.check_lease_table(wrong_key, leader_mode=False))
    no_gsi = TableDescription("app", True, "ACTIVE", (("leaseKey", "HASH"),), {"leaseKey": "S"})
    assert checks.check_lease_table(no_gsi, leader_mode=False).findings == ()
    assert "update-table" in messages(checks.check_lease_table(no_gsi, leader_mode=True))
    building = TableDescription(
        **{
            **_fields(GOOD_TABLE),
            "indexes": {
                "LeaseOwnerToLeaseKeyIndex": ("CREATING", (("leaseOwner", "HASH"), ("leaseKey", "RANGE")))
            },
        }
    )
    assert "CREATING" in messages(checks.check_lease_table(building, leader_mode=True))


def test_layout_findings_and_versions() -> None:
    facts = LayoutFacts(
        "app",
        "app-CoordinatorState",
        False,
        lease_table_items={"Leader": {"ownerName": "j1"}, "Migration3.0": {"cv": "CLIENT_VERSION_3X"}},
        metrics=(
            MetricsRow("old", 990.0, "app-WorkerMetricStats"),
            MetricsRow("new", 990.0, "app", support_code=1),
            MetricsRow("ours", 990.0, "app-WorkerMetricStats", kcl_daemon=True),
        ),
        lease_owners=frozenset({"old", "new", "ours", "v2"}),
        now_s=1000.0,
    )
    result = checks.check_layout(facts)
    assert "single table" in result.facts[0]
    assert "publish no support code (KCL 3.0-3.4?): old" in messages(result)
    assert any(f.severity is Severity.ERROR for f in result.findings)
    text = "\n".join(result.facts)
    assert "kcl-daemon: ours" in text and "Java KCL 3.5+: new" in text and "v2" in text
    both = LayoutFacts("app", "app-CoordinatorState", True, {"Leader": {}}, {"Leader": {}})
    assert "both" in messages(checks.check_layout(both))


def test_iam_findings() -> None:
    result = checks.check_iam(
        [
            ProbeResult("dynamodb:Scan", "app", Outcome.DENIED, "AccessDeniedException: no"),
            ProbeResult("dynamodb:CreateTable", "app", Outcome.NOT_TRIED, "cannot be tried"),
            ProbeResult("kinesis:ListShards", "s", Outcome.ERROR, "timeout"),
        ]
    )
    assert [f.severity for f in result.findings] == [Severity.ERROR, Severity.WARNING]
    assert "deploy/iam/" in result.findings[0].fix
    assert any("not tried" in fact for fact in result.facts)


def test_expired_and_unowned_leases() -> None:
    leases = [
        lease("shardId-0"),
        lease("shardId-1", owner=None),
        lease("shardId-2", owner=None, checkpoint=ExtendedSequenceNumber("SHARD_END")),
    ]
    shards = [shard("shardId-0"), shard("shardId-1"), shard("shardId-2", closed=True)]
    result = checks.check_leases(lease_facts(leases, shards, expired=frozenset({"shardId-0"})))
    text = messages(result)
    assert "shardId-0: its owner w1 did not renew it" in text
    assert "lease shardId-1 has no owner" in text
    assert "shardId-2" not in text  # finished: awaiting cleanup, not a problem


def test_stuck_leases() -> None:
    leases = [lease("shardId-0", owner_switches_since_checkpoint=4), lease("shardId-1")]
    shards = [shard("shardId-0"), shard("shardId-1")]
    result = checks.check_leases(
        lease_facts(leases, shards, oldest_unprocessed_s={"shardId-1": 400.0}, stall_limit_s=300.0)
    )
    text = messages(result)
    assert "changed owner 4 times without a checkpoint" in text
    assert "shardId-1 is stuck at w1" in text and "arrived 400s ago" in text
    fresh = checks.check_leases(
        lease_facts([lease("shardId-1")], [shard("shardId-1")], oldest_unprocessed_s={"shardId-1": 5.0})
    )
    assert fresh.findings == ()


def test_shards_without_leases_and_leases_without_shards() -> None:
    shards = [
        shard("shardId-0", closed=True),  # parent, lease cleaned up: fine
        shard("shardId-1", parent="shardId-0"),  # its parent's lease is gone and it has none: a hole
        shard("shardId-2", parent="shardId-9"),  # child of a leased parent: created at shard end
        shard("shardId-3"),  # open, no lease: a hole
    ]
    leases = [lease("shardId-9"), lease("shardId-4")]
    text = messages(checks.check_leases(lease_facts(leases, shards)))
    assert "open shard shardId-1 has no lease" in text and "open shard shardId-3 has no lease" in text
    assert "open shard shardId-2" not in text
    assert "lease shardId-9 is for a shard the stream does not have" in text
    assert "lease shardId-4 is for a shard" in text


def test_multi_stream_lease_keys_are_matched_by_key() -> None:
    prefix = "123456789012:s:1700000000:"
    shards = [shard(f"{prefix}shardId-0"), shard(f"{prefix}shardId-1", parent="shardId-0")]
    leases = [lease(f"{prefix}shardId-0")]
    assert checks.check_leases(lease_facts(leases, shards)).findings == ()


def _lock(owner: str, rvn: str, duration_ms: str = "10000") -> dict[str, object]:
    return {"ownerName": owner, "recordVersionNumber": rvn, "leaseDuration": duration_ms}


def test_leader_findings() -> None:
    stale = LeaderFacts(
        True, "app-CoordinatorState", "key", _lock("dead", "a"), _lock("dead", "a"), 10.0, frozenset({"w1"})
    )
    result = checks.check_leader(stale)
    assert "stale" in messages(result) and "delete-item --table-name app-CoordinatorState" in messages(result)
    assert '"key":{"S":"Leader"}' in messages(result)
    alive = LeaderFacts(
        True,
        "app",
        "leaseKey",
        _lock("w1", "a", "120000"),
        _lock("w1", "a", "120000"),
        10.0,
        frozenset({"w1"}),
    )
    assert checks.check_leader(alive).findings == ()  # a Java leader heartbeats every 30 s
    none = LeaderFacts(True, "app", "leaseKey")
    assert "no worker holds the leader lock" in messages(checks.check_leader(none))
    broken = LeaderFacts(True, "app", "leaseKey", {"ownerName": "x"}, None)
    assert "not a lock" in messages(checks.check_leader(broken))
    assert checks.check_leader(LeaderFacts(False, None)).status is Status.SKIPPED


def test_worker_metrics_findings() -> None:
    rows = (
        MetricsRow("w1", 990.0, "t"),
        MetricsRow("gone", 800.0, "t"),
        MetricsRow("ancient", 1000.0 - 2 * 86400, "t"),
        MetricsRow("bad", None, "t", problem="bad: lut is not a number"),
    )
    facts = WorkerMetricsFacts(
        "app-WorkerMetricStats",
        True,
        "wid",
        rows,
        1000.0,
        leader_mode=True,
        lease_owners=frozenset({"w1", "silent"}),
    )
    text = messages(checks.check_worker_metrics(facts))
    assert "worker gone last reported 200s ago" in text
    assert "no leader cleaned it up" in text
    assert "unreadable item" in text
    assert "worker silent holds leases but publishes no worker metrics" in text
    assert '"wid":{"S":"gone"}' in text
    missing = WorkerMetricsFacts("app-WorkerMetricStats", False, leader_mode=True)
    assert "does not exist" in messages(checks.check_worker_metrics(missing))


def test_report_json_and_exit_status() -> None:
    report = DoctorReport((checks.check_streams([StreamFacts("s")]),))
    body = report.as_json()
    assert body["ok"] is False and body["errors"] == 1
    assert body["checks"][0]["findings"][0]["subject"] == "s"  # type: ignore[index]
    assert report.exit_status is ExitStatus.FAILED
    assert "what to do" in report.text()


def _fields(table: TableDescription) -> dict[str, object]:
    return {name: getattr(table, name) for name in TableDescription.__slots__}  # type: ignore[attr-defined]
