"""Where a worker is (kcl_daemon.leader.zone_lookup): the ECS task metadata, then EC2's IMDSv2, asked
over HTTP (a local metadata server here), and nothing when neither answers."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from kcl_daemon.leader.zone_lookup import zone_from_ec2, zone_from_ecs, zone_from_environment


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
