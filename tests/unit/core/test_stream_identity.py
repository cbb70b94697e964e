"""Multi-stream identities and lease keys: formatting, parsing, and the errors for bad ones."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.stream_identity import (
    StreamIdentity,
    identity_from_arn,
    parse_stream_identity,
    split_lease_key,
)

ORDERS = StreamIdentity("123456789012", "my-stream", 1610000000)


def test_the_spec_example() -> None:
    assert (
        ORDERS.lease_key("shardId-000000000007") == "123456789012:my-stream:1610000000:shardId-000000000007"
    )
    assert split_lease_key("123456789012:my-stream:1610000000:shardId-000000000007") == (
        ORDERS,
        "shardId-000000000007",
    )
    assert split_lease_key("shardId-000000000007") == (None, "shardId-000000000007")


def test_identity_from_an_arn() -> None:
    arn = "arn:aws:kinesis:us-east-1:123456789012:stream/my-stream"
    assert identity_from_arn(arn, 1610000000) == ORDERS
    assert identity_from_arn(
        "arn:aws-cn:kinesis:cn-north-1:123456789012:stream/my-stream", 1
    ) == StreamIdentity("123456789012", "my-stream", 1)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("123456789012:my-stream", "is not accountId:streamName:creationEpoch"),
        ("12345:my-stream:1", "is not 12 digits"),
        ("123456789012:my stream:1", "is not 1-128 of"),
        ("123456789012:my-stream:-1", "is not a whole number"),
        ("123456789012:my-stream:soon", "is not a whole number"),
        ("123456789012::1", "is not 1-128 of"),
    ],
)
def test_bad_identities_say_what_is_wrong(text: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_stream_identity(text)


@pytest.mark.parametrize("key", ["123456789012:my-stream:1:", "a:b", "123456789012:s:1:2:shard"])
def test_bad_multi_stream_keys_raise(key: str) -> None:
    with pytest.raises(ValueError, match=r"lease key|stream identity"):
        split_lease_key(key)


def test_bad_arn_and_shard_id() -> None:
    with pytest.raises(ValueError, match="not a Kinesis stream ARN"):
        identity_from_arn("arn:aws:dynamodb:us-east-1:123456789012:table/t", 1)
    with pytest.raises(ValueError, match="contains ':'"):
        ORDERS.lease_key("shard:1")


identities = st.builds(
    StreamIdentity,
    st.from_regex(r"\d{12}", fullmatch=True),
    st.from_regex(r"[a-zA-Z0-9_.-]{1,128}", fullmatch=True),
    st.integers(0, 2**40),
)
shard_ids = st.from_regex(r"[^:\n]{1,128}", fullmatch=True)


@given(identities, shard_ids)
def test_lease_keys_round_trip(identity: StreamIdentity, shard_id: str) -> None:
    assert parse_stream_identity(identity.serialize()) == identity
    assert split_lease_key(identity.lease_key(shard_id)) == (identity, shard_id)
