"""The shard lifecycle table: complete, ranked, and the paths the consumer takes."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.lifecycle.states import (
    ACTION_ON_ENTRY,
    CHECKPOINT_ALLOWED,
    SHUTDOWN_REASON,
    TRANSITIONS,
    InvalidTransition,
    ShardEvent,
    ShardState,
    next_state,
)

S, E = ShardState, ShardEvent

#: Pairs that cannot happen, on purpose (the shell never feeds them). Together with TRANSITIONS this
#: must cover every (state, event) pair, so adding a state or event forces a decision for each pair.
REJECTED = {pair for pair in itertools.product(ShardState, ShardEvent) if pair not in TRANSITIONS}


def test_every_pair_is_decided_one_way_or_the_other() -> None:
    assert len(TRANSITIONS) + len(REJECTED) == len(ShardState) * len(ShardEvent)
    for state, event in REJECTED:
        with pytest.raises(InvalidTransition):
            next_state(state, event)


@pytest.mark.parametrize(
    ("state", "event"),
    [
        (S.PROCESSING, E.INITIALIZED),
        (S.INITIALIZING, E.BATCH_DONE),
        (S.WAITING_ON_PARENTS, E.CHILD_FAILED),
        (S.SHUTDOWN_COMPLETE, E.RESTART_DUE),
        (S.PARKED, E.BATCH_DONE),
        (S.ENDING_SHARD, E.BATCH_DONE),
    ],
)
def test_impossible_events_are_rejected(state: ShardState, event: ShardEvent) -> None:
    assert (state, event) in REJECTED


def test_shutdown_complete_is_terminal() -> None:
    assert {to for (frm, _), to in TRANSITIONS.items() if frm is S.SHUTDOWN_COMPLETE} == {S.SHUTDOWN_COMPLETE}


@pytest.mark.parametrize(
    ("path", "end"),
    [
        (
            [E.PARENTS_DONE, E.INITIALIZED, E.BATCH_DONE, E.SHARD_END_REACHED, E.FINAL_ANSWERED],
            S.SHUTDOWN_COMPLETE,
        ),
        ([E.PARENTS_DONE, E.INITIALIZED, E.LEASE_LOST, E.FINAL_ANSWERED], S.SHUTDOWN_COMPLETE),
        ([E.PARENTS_DONE, E.INITIALIZED, E.SHUTDOWN_REQUESTED, E.SHUTDOWN_ANSWERED], S.LOSING_LEASE),
        ([E.PARENTS_DONE, E.CHILD_FAILED, E.RESTART_DUE, E.INITIALIZED], S.PROCESSING),
        ([E.PARENTS_DONE, E.INITIALIZED, E.CHILD_FAILED, E.GIVE_UP], S.PARKED),
        ([E.PARENTS_DONE, E.INITIALIZED, E.SHARD_END_REACHED, E.CHILD_FAILED, E.RESTART_DUE], S.INITIALIZING),
        ([E.ALREADY_AT_SHARD_END], S.SHUTDOWN_COMPLETE),
        ([E.LEASE_LOST], S.SHUTDOWN_COMPLETE),  # no child was ever started: no message at all
    ],
)
def test_paths(path: list[ShardEvent], end: ShardState) -> None:
    state = S.WAITING_ON_PARENTS
    for event in path:
        state = next_state(state, event)
    assert state is end


def test_checkpointer_only_where_java_gives_one() -> None:
    assert {S.PROCESSING, S.SHUTDOWN_REQUESTED, S.ENDING_SHARD} == CHECKPOINT_ALLOWED
    assert ACTION_ON_ENTRY[S.INITIALIZING] == "initialize"
    assert ACTION_ON_ENTRY[S.LOSING_LEASE] == "leaseLost"


@given(st.lists(st.sampled_from(list(ShardEvent)), max_size=40))
def test_a_shutdown_reason_never_drops_to_a_lower_rank(events: list[ShardEvent]) -> None:
    state = S.WAITING_ON_PARENTS
    for event in events:
        if (state, event) not in TRANSITIONS:
            continue
        new = next_state(state, event)
        if state in SHUTDOWN_REASON and new in SHUTDOWN_REASON:
            assert SHUTDOWN_REASON[new] >= SHUTDOWN_REASON[state] or (
                state is S.SHUTDOWN_REQUESTED and event is E.SHUTDOWN_ANSWERED
            )
        if state in (S.LOSING_LEASE,):
            assert new in (S.LOSING_LEASE, S.SHUTDOWN_COMPLETE)
        state = new
