"""Zones (pure): precedence, the worker-id convention, environment answers, and the extra metrics attribute.

The lookups over HTTP: tests/component/leader/test_zone_lookup.py.
"""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.leader.decider import WorkerState
from kcl_daemon.core.leader.zones import (
    WorkerExtras,
    WorkerExtrasError,
    extras_from_attribute,
    extras_to_attribute,
    resolve_zone,
    zone_from_ecs_task_metadata,
    zone_from_imds,
    zone_from_worker_id,
)


@pytest.mark.parametrize(
    ("worker_id", "separator", "zone"),
    [
        ("clusterA-worker17", "-", "clusterA"),
        ("clusterA-worker-17", "-", "clusterA"),
        ("worker17", "-", None),
        ("-worker17", "-", None),
        ("az1/worker", "/", "az1"),
        ("az1/worker", "", None),
    ],
)
def test_zone_from_worker_id(worker_id: str, separator: str, zone: str | None) -> None:
    assert zone_from_worker_id(worker_id, separator) == zone


def test_precedence_configured_then_environment_then_prefix() -> None:
    assert resolve_zone("c1-w1", "-", configured="eu-west-1a", from_environment="eu-west-1b") == "eu-west-1a"
    assert resolve_zone("c1-w1", "-", from_environment="eu-west-1b") == "eu-west-1b"
    assert resolve_zone("c1-w1", "-") == "c1"
    assert resolve_zone("w1", "-") is None


def test_environment_answers_are_parsed_strictly() -> None:
    assert zone_from_ecs_task_metadata(json.dumps({"AvailabilityZone": "us-east-1c"})) == "us-east-1c"
    assert zone_from_ecs_task_metadata("{}") is None
    assert zone_from_ecs_task_metadata("not json") is None
    assert zone_from_ecs_task_metadata("[1]") is None
    assert zone_from_imds("eu-west-1a\n") == "eu-west-1a"
    assert zone_from_imds("<html>error</html>") is None
    assert zone_from_imds("") is None


@given(
    st.builds(
        WorkerExtras,
        zone=st.none() | st.text(min_size=1, max_size=10),
        capacity=st.floats(0.01, 100),
        state=st.sampled_from(list(WorkerState)),
        grace_until_epoch_s=st.none() | st.floats(0, 2e9),
    )
)
def test_extras_round_trip(extras: WorkerExtras) -> None:
    assert extras_from_attribute("w", extras_to_attribute(extras)) == extras


def test_extras_absent_means_a_plain_active_worker_and_decimals_are_numbers() -> None:
    assert extras_from_attribute("w", None) == WorkerExtras()
    read = extras_from_attribute(
        "w", {"capacity": Decimal("2"), "state": "restarting", "graceUntil": Decimal("5")}
    )
    assert read == WorkerExtras(None, 2.0, WorkerState.RESTARTING, 5.0)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("x", "is not a map"),
        ({"zone": 3}, "zone is not a string"),
        ({"capacity": 0}, "capacity must be > 0"),
        ({"capacity": "lots"}, "capacity is not a number"),
        ({"state": "sleeping"}, "'sleeping' is not one of"),
    ],
)
def test_bad_extras_name_the_worker_and_field(raw: object, problem: str) -> None:
    with pytest.raises(WorkerExtrasError, match=problem) as info:
        extras_from_attribute("w7", raw)
    assert "w7" in str(info.value)
