"""What a scan tells a worker renewing per worker about the leases it holds: lost, or marked for a
3.x hand-off (``kcl_daemon.core.leases.held_scan``)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.leases.held_scan import ScanNews, confirmed_keeping_mark, handoff_marked, scan_news
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import TRIM_HORIZON


def lease(counter: int, owner: str | None = "me", checkpoint_owner: str | None = None) -> Lease:
    return Lease(
        "s0", TRIM_HORIZON, lease_owner=owner, lease_counter=counter, checkpoint_owner=checkpoint_owner
    )


@pytest.mark.parametrize(
    ("seen", "lost", "marked"),
    [
        (lease(5), False, False),  # as held
        (lease(7), False, False),  # ours, written since (a checkpoint)
        (lease(4, "b"), False, False),  # a scan older than our adoption: the former owner
        (lease(6, "b"), True, False),  # assigned elsewhere by the leader (or taken)
        (lease(5, "b"), True, False),  # another owner at our counter (two writes on one counter)
        (lease(6, None), True, False),  # released by someone else
        (lease(5, "b", "me"), False, True),  # the leader marked a hand-off to b at our counter
        (lease(6, "b", "me"), False, False),  # marked, and a write of ours landed since: its answer tells
        (lease(5, "b", "c"), True, False),  # marked for another worker: not ours any more
    ],
)
def test_a_scan_tells_of_held_leases_lost_or_marked(seen: Lease, lost: bool, marked: bool) -> None:
    news = scan_news({"s0": lease(5)}, [seen], "me")
    assert bool(news.lost) is lost
    assert news.marked == ((seen,) if marked else ())
    if lost:
        assert "held at 5" in news.lost[0][1]


def test_a_mark_already_known_is_not_news_and_leases_not_held_are_ignored() -> None:
    known = lease(5, "b", "me")
    assert not handoff_marked(known, known, "me")
    assert scan_news({}, [lease(9, "b")], "me") == ScanNews()


@given(
    held=st.integers(min_value=1, max_value=50),
    seen=st.integers(min_value=0, max_value=60),
    owner=st.sampled_from(["me", "b", None]),
    checkpoint_owner=st.sampled_from([None, "me", "b"]),
)
def test_a_lease_is_never_both_lost_and_marked_and_an_older_scan_says_nothing(
    held: int, seen: int, owner: str | None, checkpoint_owner: str | None
) -> None:
    news = scan_news({"s0": lease(held)}, [lease(seen, owner, checkpoint_owner)], "me")
    assert not (news.lost and news.marked)
    if seen < held:
        assert news == ScanNews()
    if owner == "me" or checkpoint_owner == "me":
        assert not news.lost  # still ours to serve (or to hand off)


@pytest.mark.parametrize(
    ("held", "confirmed", "kept"),
    [
        (lease(5, "b", "me"), lease(5), "held"),  # a heartbeat's confirmation: the mark a scan showed stays
        (lease(5, "b", "me"), lease(6, "b", "me"), "confirmed"),  # a write of ours since (it carries it)
        (lease(5, "b", "me"), lease(6), "confirmed"),  # a write at a higher counter is the truth
        (lease(5), lease(5), "confirmed"),  # nothing marked
    ],
)
def test_a_confirmation_at_the_held_counter_keeps_a_hand_off_mark(
    held: Lease, confirmed: Lease, kept: str
) -> None:
    assert confirmed_keeping_mark(held, confirmed) is (held if kept == "held" else confirmed)
