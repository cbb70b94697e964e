"""`kcl-daemon run --local` (what `make run` does) with the sample processor of each language.

Each run starts the embedded backend, produces sample records, and must show every shard's processor
receiving records, then stop cleanly on SIGINT (Ctrl-C) with its leases released and exit 0.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.support.daemon import Daemon
from tests.support.paths import REPO, VENV_BIN
from tests.support.requirements import require_tool

pytestmark = pytest.mark.e2e

#: What each sample logs once per record (to stderr, which the daemon logs under the shard).
RECORD_LINE = {"python": "record key=", "node": "record ", "shell": "record shard="}


@pytest.mark.parametrize("language", sorted(RECORD_LINE))
def test_local_run_shows_records_flowing_and_stops_cleanly_on_ctrl_c(language: str, tmp_path: Path) -> None:
    if language == "node":
        require_tool("node")
    if language == "shell":
        require_tool("jq")
    log = tmp_path / "daemon.log"
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    started = time.monotonic()
    daemon = Daemon(
        "run",
        *("--local", "--status-interval", "1"),
        properties="app.properties",
        log=log,
        env=env,
        cwd=REPO / "samples" / language,
    )
    try:
        first_record_s = None
        while time.monotonic() - started < 30:
            text = log.read_text(errors="replace")
            if first_record_s is None and RECORD_LINE[language] in text:
                first_record_s = time.monotonic() - started
            shards = {f"shardId-00000000000{i}" for i in range(4)}
            lines = [line for line in text.splitlines() if RECORD_LINE[language] in line]
            if "progress:" in text and all(any(f"[{shard}]" in line for line in lines) for shard in shards):
                break
            assert daemon.exit_status is None, text[-3000:]
            time.sleep(0.2)
        else:
            raise AssertionError(f"records did not reach all 4 processors:\n{log.read_text()[-3000:]}")
        daemon.send(signal.SIGINT)
        assert daemon.wait(30) == 0, log.read_text()[-3000:]
    finally:
        daemon.kill()
    text = log.read_text()
    assert "progress:" in text and "records produced" in text
    assert "shutdown complete: 4 lease(s) released" in text
    assert "Traceback" not in text, text[-3000:]
    assert first_record_s is not None and first_record_s < 15
