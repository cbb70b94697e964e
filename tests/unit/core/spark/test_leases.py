"""The Spark lease bridge's decisions over plain leases (pure)."""

from __future__ import annotations

from kcl_daemon.core.leases.heartbeat import RenewalMode, WorkerItem
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import LATEST, SHARD_END, TRIM_HORIZON, ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import Shard
from kcl_daemon.core.spark.leases import (
    checkpoints_to_write,
    children_of,
    end_attribute,
    heartbeating,
    is_ahead,
    lease_for_shard,
    live_owners,
    positions_from_leases,
    stale_end_attributes,
)
from kcl_daemon.core.spark.offsets import AT_SHARD_END, AT_TRIM_HORIZON, SourceOffset, after, at_timestamp

# -- lease decisions ---------------------------------------------------------------------------


def split_world() -> list[Shard]:
    """shard 0 split into 2 and 3; 1 and 3 merged into 4; 2 still open."""
    return [
        Shard("s0", ending_sequence_number=10),
        Shard("s1", ending_sequence_number=20),
        Shard("s2", parent_shard_id="s0"),
        Shard("s3", parent_shard_id="s0", ending_sequence_number=30),
        Shard("s4", parent_shard_id="s1", adjacent_parent_shard_id="s3"),
    ]


def lease(key: str, checkpoint: ExtendedSequenceNumber, owner: str | None = None, counter: int = 1) -> Lease:
    return Lease(key, checkpoint, lease_owner=owner, lease_counter=counter)


def test_lease_checkpoints_become_positions_sub_sequence_exact() -> None:
    leases = [
        lease("a", ExtendedSequenceNumber("100", 3)),
        lease("b", SHARD_END),
        lease("c", TRIM_HORIZON),
        lease("d", LATEST),
    ]
    assert positions_from_leases(leases) == {
        "a": after("100", 3),
        "b": AT_SHARD_END,
        "c": AT_TRIM_HORIZON,
    }


def test_live_owners_are_those_whose_counters_moved() -> None:
    before = [lease("a", TRIM_HORIZON, "w1", 5), lease("b", TRIM_HORIZON, "w2", 7), lease("c", TRIM_HORIZON)]
    after_ = [lease("a", TRIM_HORIZON, "w1", 6), lease("b", TRIM_HORIZON, "w2", 7), lease("c", TRIM_HORIZON)]
    assert [(x.lease_key, x.owner) for x in live_owners(before, after_, "me")] == [("a", "w1")]
    mine = [lease("a", TRIM_HORIZON, "me", 9)]
    assert live_owners(before, mine, "me") == []
    # w2 keeps "b" by its heartbeat (leaseRenewal = PER_WORKER): live although its counter stood still
    assert [x.lease_key for x in live_owners(before, after_, "me", frozenset({"w2"}))] == ["a", "b"]


def test_heartbeating_workers_are_those_whose_per_worker_heartbeat_advanced() -> None:
    pw, pl = RenewalMode.PER_WORKER, RenewalMode.PER_LEASE
    before = [
        WorkerItem("w1", beat=3, mode=pw),
        WorkerItem("w2", beat=5, mode=pw),
        WorkerItem("j", metrics=True),
    ]
    after_ = [
        WorkerItem("w1", beat=4, mode=pw),  # advanced
        WorkerItem("w2", beat=5, mode=pw),  # stood still
        WorkerItem("w3", beat=1, mode=pw),  # written meanwhile
        WorkerItem("w4", beat=2, mode=pl),  # fell back: renews its leases, which the counters show
        WorkerItem("j", metrics=True, metrics_seen=2),  # a metrics report is no heartbeat
    ]
    assert heartbeating(before, after_) == {"w1", "w3"}


def test_only_forward_real_positions_are_written() -> None:
    offset = SourceOffset(
        "st", {"a": after("10", 1), "b": after("5"), "c": AT_TRIM_HORIZON, "d": AT_SHARD_END}
    )
    written = {"a": ExtendedSequenceNumber("10", 0), "b": ExtendedSequenceNumber("7"), "d": TRIM_HORIZON}
    assert checkpoints_to_write(offset, written) == {"a": ExtendedSequenceNumber("10", 1), "d": SHARD_END}


def test_children_and_ahead() -> None:
    assert [c.shard_id for c in children_of("s0", split_world())] == ["s2", "s3"]
    assert is_ahead(ExtendedSequenceNumber("20"), after("10"))
    assert not is_ahead(ExtendedSequenceNumber("10", 0), after("10", 0))
    assert not is_ahead(LATEST, after("10"))


def test_stale_publications_are_other_runs_and_old_batches_only() -> None:
    names = [
        end_attribute("run1", 3),
        end_attribute("run1", 4),
        end_attribute("run1", 5),
        end_attribute("old", 9),
        "sparkEnd_garbage",
        "leaseOwner",
        "checkpoint",
    ]
    assert stale_end_attributes(names, "run1", 4) == sorted(
        [end_attribute("run1", 3), end_attribute("old", 9), "sparkEnd_garbage"]
    )


def test_a_new_lease_carries_the_shards_graph_and_the_query_start() -> None:
    shard = Shard(
        "s4", parent_shard_id="s1", adjacent_parent_shard_id="s3", starting_hash_key=5, ending_hash_key=9
    )
    created = lease_for_shard(shard, after("77", 2))
    assert created.lease_key == "s4" and created.lease_owner is None
    assert created.checkpoint == ExtendedSequenceNumber("77", 2)
    assert created.parent_shard_ids == {"s1", "s3"}
    assert (created.starting_hash_key, created.ending_hash_key) == (5, 9)
    assert lease_for_shard(shard, at_timestamp(5)).checkpoint.sequence_number == "AT_TIMESTAMP"
