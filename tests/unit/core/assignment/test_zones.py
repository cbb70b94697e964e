"""Zones: precedence, the worker-id convention, environment answers, and the extra metrics attribute."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kcl_daemon.core.assignment.decider import WorkerState
from kcl_daemon.core.assignment.zones import (
    WorkerExtras,
    WorkerExtrasError,
    extras_from_attribute,
    extras_to_attribute,
    resolve_zone,
    zone_from_ecs_task_metadata,
    zone_from_imds,
    zone_from_worker_id,
)
from kcl_daemon.leader.zone_lookup import zone_from_ec2, zone_from_ecs, zone_from_environment


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


class _Metadata(BaseHTTPRequestHandler):
    def do_PUT(self) -> None:
        ok = self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds")
        self._answer(200 if ok else 404, "tok")

    def do_GET(self) -> None:
        if self.path == "/task":
            self._answer(200, json.dumps({"AvailabilityZone": "us-east-1f"}))
        elif self.path == "/latest/meta-data/placement/availability-zone":
            token_ok = self.headers.get("X-aws-ec2-metadata-token") == "tok"
            self._answer(200 if token_ok else 401, "eu-west-1b")
        else:
            self._answer(404, "")

    def _answer(self, code: int, body: str) -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def metadata() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Metadata)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_lookup_asks_ecs_then_ec2(metadata: str) -> None:
    assert zone_from_ecs({"ECS_CONTAINER_METADATA_URI_V4": metadata}) == "us-east-1f"
    assert zone_from_ec2({}, endpoint=metadata) == "eu-west-1b"
    assert zone_from_ec2({"AWS_EC2_METADATA_DISABLED": "true"}, endpoint=metadata) is None
    assert (
        zone_from_environment({"ECS_CONTAINER_METADATA_URI_V4": metadata}, imds_endpoint=metadata)
        == "us-east-1f"
    )
    assert zone_from_environment({}, imds_endpoint=metadata) == "eu-west-1b"


def test_lookup_without_metadata_is_none_quickly() -> None:
    # A closed local port: refused at once, no zone.
    assert zone_from_environment({}, imds_endpoint="http://127.0.0.1:9", timeout_s=0.5) is None
