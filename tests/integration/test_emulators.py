"""The emulator fixtures survive a crashed emulator: restarted on the same port, the endpoint stays valid."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.integration.conftest import NODE_MODULES, _free_port, _probe_dynamodb, _require_node
from tests.integration.emulators import Emulator

pytestmark = pytest.mark.integration


def test_a_killed_emulator_is_restarted_on_its_port(aws_env: None, tmp_path: Path) -> None:
    node = _require_node()
    port = _free_port()
    argv = [node, str(NODE_MODULES / "dynalite" / "cli.js"), "--host", "127.0.0.1", "--port", str(port)]
    emulator = Emulator("dynalite", argv, port, [_probe_dynamodb], tmp_path / "dynalite.log")
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
        _probe_dynamodb(emulator.endpoint)  # the same endpoint answers again
        assert emulator.restarts == [note]
        assert f"=== {note} ===" in (tmp_path / "dynalite.log").read_text()
    finally:
        emulator.stop()
    assert emulator.problem() == "not started"
