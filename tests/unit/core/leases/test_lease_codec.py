"""Lease items <-> Lease: Java attribute names and types, quirks, corrupt items, unknown attributes."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.leases.lease import MAX_HASH_KEY, InvalidLeaseKey, Lease, LeaseKey, StreamIdentifier
from kcl_daemon.core.leases.lease_codec import (
    CorruptLeaseItem,
    is_lease_item,
    lease_from_item,
    lease_to_item,
    new_lease_item,
)
from kcl_daemon.core.sequence import (
    LATEST,
    TRIM_HORIZON,
    ExtendedSequenceNumber,
)

JAVA_ITEM: dict[str, Any] = {
    "leaseKey": {"S": "shardId-000000000003"},
    "leaseOwner": {"S": "worker-a"},
    "leaseCounter": {"N": "42"},
    "checkpoint": {"S": "49590338271490256608559692538361571095921575989136588898"},
    "checkpointSubSequenceNumber": {"N": "7"},
    "ownerSwitchesSinceCheckpoint": {"N": "2"},
    "parentShardId": {"SS": ["shardId-000000000000", "shardId-000000000001"]},
    "pendingCheckpoint": {"S": "49590338271490256608559692538361571095921575989136588999"},
    "pendingCheckpointSubSequenceNumber": {"N": "0"},
    "pendingCheckpointState": {"B": b"\x00state"},
    "childShardIds": {"SS": ["shardId-000000000004", "shardId-000000000005"]},
    "startingHashKey": {"S": "0"},
    "endingHashKey": {"S": str(MAX_HASH_KEY)},
    "throughputKBps": {"N": "12.5"},
    "checkpointOwner": {"S": "worker-b"},
    "entityType": {"S": "LEASE"},
}


def test_java_item_decodes_every_attribute() -> None:
    lease = lease_from_item(JAVA_ITEM)
    assert lease == Lease(
        lease_key="shardId-000000000003",
        lease_owner="worker-a",
        lease_counter=42,
        checkpoint=ExtendedSequenceNumber("49590338271490256608559692538361571095921575989136588898", 7),
        owner_switches_since_checkpoint=2,
        parent_shard_ids=frozenset({"shardId-000000000000", "shardId-000000000001"}),
        pending_checkpoint=ExtendedSequenceNumber("49590338271490256608559692538361571095921575989136588999"),
        pending_checkpoint_state=b"\x00state",
        child_shard_ids=frozenset({"shardId-000000000004", "shardId-000000000005"}),
        starting_hash_key=0,
        ending_hash_key=MAX_HASH_KEY,
        throughput_kbps=12.5,
        checkpoint_owner="worker-b",
        entity_type="LEASE",
    )
    assert lease.shard_id == "shardId-000000000003"
    assert lease.stream is None


def test_java_item_round_trips_exactly() -> None:
    assert lease_to_item(lease_from_item(JAVA_ITEM)) == JAVA_ITEM


def test_minimal_old_writer_item() -> None:
    """A KCL 1.x-era item: no entityType, no hash range, no sub-sequence/owner-switch attributes."""
    lease = lease_from_item(
        {"leaseKey": {"S": "shardId-1"}, "leaseCounter": {"N": "0"}, "checkpoint": {"S": "LATEST"}}
    )
    assert lease == Lease("shardId-1", LATEST)
    assert lease.is_unowned


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1.0E-4", 0.0001), ("2.5", 2.5), ("3", 3.0), ("1.5E3", 1500.0), ("0.000123", 0.000123)],
)
def test_throughput_accepts_java_double_to_string(text: str, expected: float) -> None:
    item = {**JAVA_ITEM, "throughputKBps": {"N": text}}
    assert lease_from_item(item).throughput_kbps == pytest.approx(expected)


def test_throughput_is_written_without_exponent() -> None:
    lease = lease_from_item({**JAVA_ITEM, "throughputKBps": {"N": "1.0E-4"}})
    assert lease_to_item(lease)["throughputKBps"] == {"N": "0.0001"}


def test_pending_checkpoint_state_stored_as_number_is_tolerated_and_kept() -> None:
    item = {**JAVA_ITEM, "pendingCheckpointState": {"N": "0"}}
    lease = lease_from_item(item)
    assert lease.pending_checkpoint_state is None
    assert lease_to_item(lease) == item


@pytest.mark.parametrize("text", ["3.0", "3E0", "0.3E1", "3"])
def test_integer_attributes_accept_any_integral_number_spelling(text: str) -> None:
    assert lease_from_item({**JAVA_ITEM, "leaseCounter": {"N": text}}).lease_counter == 3


@pytest.mark.parametrize(
    ("attribute", "value"),
    [
        ("leaseCounter", {"N": "1e100000000"}),  # 11 characters, a 10^8-digit integer
        ("leaseCounter", {"N": "9" * 5000}),  # beyond int()'s 4300 digits
        ("leaseCounter", {"N": "9223372036854775808"}),  # Java's long + 1
        ("ownerSwitchesSinceCheckpoint", {"N": "1E+999999999"}),
        ("startingHashKey", {"S": "9" * 5000}),
    ],
)
def test_numbers_of_any_size_are_refused_as_a_corrupt_item_never_raised(
    attribute: str, value: dict[str, str]
) -> None:
    with pytest.raises(CorruptLeaseItem, match=attribute) as caught:
        lease_from_item({**JAVA_ITEM, attribute: value})
    assert len(str(caught.value)) < 300, "a huge value is shortened in the message"


def test_null_typed_attribute_reads_as_absent() -> None:
    lease = lease_from_item({**JAVA_ITEM, "leaseOwner": {"NULL": True}, "checkpointOwner": {"NULL": True}})
    assert lease.lease_owner is None
    assert lease.checkpoint_owner is None


def test_empty_pending_checkpoint_means_none() -> None:
    assert lease_from_item({**JAVA_ITEM, "pendingCheckpoint": {"S": ""}}).pending_checkpoint is None


def test_multi_stream_item() -> None:
    key = "123456789012:my-stream:1610000000:shardId-000000000007"
    item = {
        **JAVA_ITEM,
        "leaseKey": {"S": key},
        "streamName": {"S": "123456789012:my-stream:1610000000"},
        "shardId": {"S": "shardId-000000000007"},
    }
    lease = lease_from_item(item)
    assert lease.stream_identifier == "123456789012:my-stream:1610000000"
    assert lease.shard_id == "shardId-000000000007"
    assert lease.stream == "123456789012:my-stream:1610000000"
    assert lease_to_item(lease) == item


_CORRUPT_CASES: list[tuple[str, dict[str, Any], str | None, str]] = [
    ("missing leaseKey", {"leaseKey": None}, None, "leaseKey"),
    ("empty leaseKey", {"leaseKey": {"S": ""}}, None, "leaseKey"),
    ("leaseKey as N", {"leaseKey": {"N": "1"}}, None, "leaseKey"),
    ("counter not numeric", {"leaseCounter": {"N": "abc"}}, "shardId-000000000003", "leaseCounter"),
    ("counter fractional", {"leaseCounter": {"N": "1.5"}}, "shardId-000000000003", "leaseCounter"),
    ("counter negative", {"leaseCounter": {"N": "-1"}}, "shardId-000000000003", "leaseCounter"),
    ("counter as S", {"leaseCounter": {"S": "3"}}, "shardId-000000000003", "leaseCounter"),
    ("counter missing", {"leaseCounter": None}, "shardId-000000000003", "leaseCounter"),
    ("bad checkpoint", {"checkpoint": {"S": "SOMEWHERE"}}, "shardId-000000000003", "checkpoint"),
    ("checkpoint missing", {"checkpoint": None}, "shardId-000000000003", "checkpoint"),
    ("checkpoint as N", {"checkpoint": {"N": "5"}}, "shardId-000000000003", "checkpoint"),
    (
        "bad sub-sequence",
        {"checkpointSubSequenceNumber": {"N": "x"}},
        "shardId-000000000003",
        "checkpointSubSequenceNumber",
    ),
    ("parents as S", {"parentShardId": {"S": "shardId-0"}}, "shardId-000000000003", "parentShardId"),
    ("parents as L", {"parentShardId": {"L": []}}, "shardId-000000000003", "parentShardId"),
    ("children not strings", {"childShardIds": {"SS": [1]}}, "shardId-000000000003", "childShardIds"),
    ("bad hash key", {"startingHashKey": {"S": "0x10"}}, "shardId-000000000003", "startingHashKey"),
    ("hash key too big", {"endingHashKey": {"S": str(2**128)}}, "shardId-000000000003", "endingHashKey"),
    ("throughput text", {"throughputKBps": {"N": "fast"}}, "shardId-000000000003", "throughputKBps"),
    ("throughput NaN", {"throughputKBps": {"N": "NaN"}}, "shardId-000000000003", "throughputKBps"),
    (
        "state as S",
        {"pendingCheckpointState": {"S": "x"}},
        "shardId-000000000003",
        "pendingCheckpointState",
    ),
    ("bad pending", {"pendingCheckpoint": {"S": "later"}}, "shardId-000000000003", "pendingCheckpoint"),
    ("owner not a value", {"leaseOwner": "worker-a"}, "shardId-000000000003", "leaseOwner"),
    ("two types", {"leaseOwner": {"S": "a", "N": "1"}}, "shardId-000000000003", "leaseOwner"),
]


@pytest.mark.parametrize(
    ("change", "lease_key", "attribute"),
    [case[1:] for case in _CORRUPT_CASES],
    ids=[case[0] for case in _CORRUPT_CASES],
)
def test_corrupt_items_name_the_lease_and_the_attribute(
    change: dict[str, Any], lease_key: str | None, attribute: str
) -> None:
    item = {**JAVA_ITEM, **change}
    item = {name: value for name, value in item.items() if value is not None}
    with pytest.raises(CorruptLeaseItem) as caught:
        lease_from_item(item)
    assert caught.value.lease_key == lease_key
    assert caught.value.attribute == attribute
    assert attribute in str(caught.value)
    assert (lease_key or "<without leaseKey>") in str(caught.value)


@pytest.mark.parametrize(
    ("entity", "expected"),
    [
        (None, True),
        ({"S": "LEASE"}, True),
        ({"S": "LEADER"}, False),
        ({"S": "CLIENT_VERSION_MIGRATION"}, False),
        ({"S": "TABLE_MIGRATION"}, False),
        ({"S": "WORKER_METRIC_STATS"}, False),
        ({"S": "STREAM"}, False),
        ({"S": "lease"}, False),
        ({"N": "1"}, False),
    ],
)
def test_is_lease_item_skips_every_other_entity_type(entity: dict[str, str] | None, expected: bool) -> None:
    item: dict[str, Any] = {"leaseKey": {"S": "Leader"}}
    if entity is not None:
        item["entityType"] = entity
    assert is_lease_item(item) is expected


def test_new_lease_item_is_exactly_the_created_form() -> None:
    lease = Lease(
        "shardId-000000000009",
        TRIM_HORIZON,
        parent_shard_ids=frozenset({"shardId-000000000002", "shardId-000000000001"}),
        starting_hash_key=10,
        ending_hash_key=20,
        entity_type="LEASE",
    )
    assert new_lease_item(lease) == {
        "leaseKey": {"S": "shardId-000000000009"},
        "leaseCounter": {"N": "0"},
        "ownerSwitchesSinceCheckpoint": {"N": "0"},
        "checkpoint": {"S": "TRIM_HORIZON"},
        "checkpointSubSequenceNumber": {"N": "0"},
        "parentShardId": {"SS": ["shardId-000000000001", "shardId-000000000002"]},
        "startingHashKey": {"S": "10"},
        "endingHashKey": {"S": "20"},
        "entityType": {"S": "LEASE"},
    }
    assert type(new_lease_item(lease)["checkpoint"]["S"]) is str


def test_new_lease_item_without_parents_and_multi_stream() -> None:
    stream = "123456789012:orders:1610000000"
    lease = Lease(
        f"{stream}:shardId-000000000000",
        LATEST,
        starting_hash_key=0,
        ending_hash_key=MAX_HASH_KEY,
        stream_identifier=stream,
    )
    item = new_lease_item(lease)
    assert "parentShardId" not in item
    assert "leaseOwner" not in item
    assert item["streamName"] == {"S": stream}
    assert item["shardId"] == {"S": "shardId-000000000000"}
    assert lease_from_item(item).checkpoint == LATEST


def test_new_lease_item_refuses_an_owned_lease() -> None:
    with pytest.raises(ValueError, match="no owner"):
        new_lease_item(Lease("shardId-1", TRIM_HORIZON, lease_owner="w", lease_counter=1))


@pytest.mark.parametrize(
    ("key", "parsed"),
    [
        ("shardId-000000000007", LeaseKey("shardId-000000000007")),
        (
            "123456789012:my-stream:1610000000:shardId-000000000007",
            LeaseKey("shardId-000000000007", StreamIdentifier("123456789012", "my-stream", 1610000000)),
        ),
    ],
)
def test_lease_key_parsing(key: str, parsed: LeaseKey) -> None:
    assert LeaseKey.parse(key) == parsed
    assert str(parsed) == key


@pytest.mark.parametrize("key", ["", "a:b", "acct:stream:1:shard", "1:s:x:shard", "1:s:2:shard:extra"])
def test_invalid_lease_keys(key: str) -> None:
    with pytest.raises(InvalidLeaseKey):
        LeaseKey.parse(key)


def test_taken_by_and_renewed_follow_the_conditional_writes() -> None:
    lease = Lease("shardId-1", TRIM_HORIZON, lease_owner="a", lease_counter=5, checkpoint_owner="a")
    taken = lease.taken_by("b")
    assert (taken.lease_owner, taken.lease_counter, taken.owner_switches_since_checkpoint) == ("b", 6, 1)
    assert taken.checkpoint_owner is None
    assert Lease("shardId-1", TRIM_HORIZON).taken_by("b").owner_switches_since_checkpoint == 0
    assert lease.taken_by("a").owner_switches_since_checkpoint == 1  # hand-off completion (3.x)
    assert lease.renewed().lease_counter == 6


def test_lease_rejects_impossible_values() -> None:
    with pytest.raises(ValueError, match="negative"):
        Lease("shardId-1", TRIM_HORIZON, lease_counter=-1)
    with pytest.raises(ValueError, match="hash key"):
        Lease("shardId-1", TRIM_HORIZON, ending_hash_key=2**128)


def test_extra_is_a_frozen_copy() -> None:
    source: dict[str, object] = {"custom": {"S": "x"}}
    lease = Lease("shardId-1", TRIM_HORIZON, extra=source)
    source["custom"] = {"S": "changed"}
    assert lease.extra == {"custom": {"S": "x"}}
    with pytest.raises(TypeError):
        lease.extra["other"] = {"S": "y"}  # type: ignore[index]


# --- properties --------------------------------------------------------------------------------------

_KNOWN_NAMES = set(JAVA_ITEM) | {"streamName", "shardId", "pendingCheckpointSubSequenceNumber"}
shard_ids = st.integers(0, 10**6).map(lambda n: f"shardId-{n:012d}")
sequences = st.builds(
    ExtendedSequenceNumber,
    st.one_of(
        st.sampled_from(["TRIM_HORIZON", "LATEST", "AT_TIMESTAMP", "SHARD_END"]),
        st.integers(0, 10**60).map(str),
    ),
    st.integers(0, 2**31),
)
scalar_values = st.one_of(
    st.text().map(lambda s: {"S": s}),
    st.integers(-(10**20), 10**20).map(lambda n: {"N": str(n)}),
    st.binary().map(lambda b: {"B": b}),
    st.booleans().map(lambda b: {"BOOL": b}),
    st.just({"NULL": True}),
    st.lists(st.text(), min_size=1, unique=True).map(lambda xs: {"SS": xs}),
)
attribute_values = st.recursive(
    scalar_values,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3).map(lambda xs: {"L": xs}),
        st.dictionaries(st.text(max_size=5), inner, max_size=3).map(lambda d: {"M": d}),
    ),
    max_leaves=6,
)
unknown_attributes = st.dictionaries(
    st.text(min_size=1, max_size=12).filter(lambda name: name not in _KNOWN_NAMES),
    attribute_values,
    max_size=4,
)


@st.composite
def leases(draw: st.DrawFn) -> Lease:
    shard = draw(shard_ids)
    stream = draw(st.none() | st.just("123456789012:my-stream:1610000000"))
    return Lease(
        lease_key=shard if stream is None else f"{stream}:{shard}",
        checkpoint=draw(sequences),
        lease_owner=draw(st.none() | st.text(min_size=1)),
        lease_counter=draw(st.integers(0, 2**63 - 1)),
        owner_switches_since_checkpoint=draw(st.integers(0, 2**31)),
        pending_checkpoint=draw(st.none() | sequences),
        pending_checkpoint_state=draw(st.none() | st.binary()),
        parent_shard_ids=draw(st.frozensets(shard_ids, max_size=2)),
        child_shard_ids=draw(st.frozensets(shard_ids, max_size=2)),
        starting_hash_key=draw(st.none() | st.integers(0, MAX_HASH_KEY)),
        ending_hash_key=draw(st.none() | st.integers(0, MAX_HASH_KEY)),
        throughput_kbps=draw(st.none() | st.floats(0, 1e9, allow_nan=False)),
        checkpoint_owner=draw(st.none() | st.text(min_size=1)),
        entity_type=draw(st.none() | st.just("LEASE")),
        stream_identifier=stream,
        stream_shard_id=None if stream is None else shard,
        extra=draw(unknown_attributes),
    )


@given(leases())
def test_lease_round_trips_through_its_item(lease: Lease) -> None:
    item = lease_to_item(lease)
    assert is_lease_item(item)
    assert lease_from_item(item) == lease
    assert lease_to_item(lease_from_item(item)) == item


@given(unknown_attributes)
def test_unknown_attributes_survive_decode_and_encode_untouched(extra: dict[str, Any]) -> None:
    item = {**JAVA_ITEM, **extra}
    snapshot = copy.deepcopy(item)
    out = lease_to_item(lease_from_item(item))
    assert out == snapshot
    assert item == snapshot  # the input is never mutated
