"""The emulators survive a client that vanishes mid-request, and a crashed one is restarted on its port."""

from __future__ import annotations

import signal
import socket
import struct
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.emulators import RUNNING, Emulator, EmulatorUnavailable, probe_dynamodb, probe_kinesis
from tests.support.requirements import missing

pytestmark = pytest.mark.integration


def test_a_killed_emulator_is_restarted_on_its_port(aws_env: None, tmp_path: Path) -> None:
    try:
        emulator = Emulator.dynalite(tmp_path)
    except EmulatorUnavailable as exc:
        missing(str(exc))
    port = emulator.port
    emulator.start()
    try:
        assert emulator.ensure_alive("healthy") is None
        assert emulator.process is not None
        emulator.process.send_signal(signal.SIGKILL)
        emulator.process.wait()
        assert emulator.problem() == "exited with -9"
        note = emulator.ensure_alive("after the test")
        assert note == f"dynalite exited with -9 (after the test); restarted on port {port}"
        assert emulator.problem() is None
        probe_dynamodb(emulator.endpoint)  # the same endpoint answers again
        assert emulator.restarts == [note]
        assert f"=== {note} ===" in (tmp_path / "dynalite.log").read_text()
    finally:
        emulator.stop()
    assert emulator.problem() == "not started"


def _abort_mid_body(endpoint: str, target: str) -> None:
    """Send a request's headers and half its body, then reset the connection (what a SIGKILL does)."""
    host, port = endpoint.removeprefix("http://").split(":")
    body = b'{"TableName": "t", "ShardIterator": "i"}'
    head = (
        f"POST / HTTP/1.1\r\nHost: {host}:{port}\r\nX-Amz-Target: {target}\r\n"
        "Content-Type: application/x-amz-json-1.0\r\n"
        f"Content-Length: {2 * len(body)}\r\n\r\n"
    ).encode()
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(head + body)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close = RST


@pytest.mark.parametrize(
    ("fixture", "target", "probe"),
    [
        ("kinesalite_endpoint", "Kinesis_20131202.PutRecords", probe_kinesis),
        ("dynalite_endpoint", "DynamoDB_20120810.UpdateItem", probe_dynamodb),
    ],
)
def test_a_request_aborted_mid_body_does_not_kill_the_emulator(
    request: pytest.FixtureRequest, fixture: str, target: str, probe: Callable[[str], None]
) -> None:
    endpoint = request.getfixturevalue(fixture)
    [emulator] = [e for e in RUNNING if e.endpoint == endpoint]
    process = emulator.process
    for _ in range(3):
        _abort_mid_body(endpoint, target)
    probe(endpoint)  # once: "Error: aborted" (ECONNRESET) thrown from req.on('error') killed it
    assert emulator.process is process and emulator.problem() is None, "no restart was needed"
    assert "request aborted by the client; dropped" in emulator.log_path.read_text()
