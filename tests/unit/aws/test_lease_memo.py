"""The scan's memo of decoded leases: the same lease as decoding, decoded only when the item changed."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.aws.lease_memo import LeaseMemo
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.leases.lease_codec import CorruptLeaseItem, lease_from_item, lease_to_item
from kcl_daemon.core.sequence import ExtendedSequenceNumber


def _item(key: str = "shardId-000000000001", counter: int = 1, owner: str | None = "w1") -> dict:
    return lease_to_item(
        Lease(
            lease_key=key,
            checkpoint=ExtendedSequenceNumber("TRIM_HORIZON"),
            lease_owner=owner,
            lease_counter=counter,
        )
    )


def test_an_unchanged_item_gives_back_the_same_lease_object() -> None:
    memo = LeaseMemo()
    first = memo.lease(_item())
    assert memo.lease(_item()) is first


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (_item(counter=1), _item(counter=2)),
        (_item(owner="w1"), _item(owner="w2")),
        (_item(owner="w1"), _item(owner=None)),
        (_item(), {**_item(), "someNewAttribute": {"S": "x"}}),
    ],
    ids=["counter", "owner", "owner gone", "new attribute"],
)
def test_a_changed_item_is_decoded_again(before: dict, after: dict) -> None:
    memo = LeaseMemo()
    memo.lease(before)
    assert memo.lease(after) == lease_from_item(after)


def test_a_corrupt_item_raises_each_time_and_is_not_remembered() -> None:
    memo = LeaseMemo()
    memo.lease(_item())
    corrupt = {**_item(), "leaseCounter": {"N": "not a number"}}
    for _ in range(2):
        with pytest.raises(CorruptLeaseItem):
            memo.lease(corrupt)
    assert memo.lease(_item()) == lease_from_item(_item())


def test_keep_forgets_the_keys_a_whole_scan_no_longer_found() -> None:
    memo = LeaseMemo()
    for key in ("a", "b", "c"):
        memo.lease(_item(key))
    memo.keep(["b"])
    assert len(memo) == 1


reads = st.lists(
    st.tuples(
        st.sampled_from(["shardId-0", "shardId-1", "shardId-2"]),
        st.integers(0, 3),
        st.sampled_from([None, "w1", "w2"]),
    ),
    max_size=30,
)


@given(reads)
def test_the_memo_always_answers_what_decoding_answers(sequence: list[tuple[str, int, str | None]]) -> None:
    memo = LeaseMemo()
    for key, counter, owner in sequence:
        item = _item(key, counter, owner)
        assert memo.lease(item) == lease_from_item(item)
