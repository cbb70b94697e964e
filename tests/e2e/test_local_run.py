"""`kcl-daemon run --local` (what `make run` does) with the sample processor of each language.

Each run starts the embedded backend, produces sample records, and must show every shard's processor
receiving records, then stop cleanly on SIGINT (Ctrl-C) with its leases released and exit 0.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).parents[2]
VENV_BIN = REPO / ".venv" / "bin"
#: What each sample logs once per record (to stderr, which the daemon logs under the shard).
RECORD_LINE = {"python": "record key=", "node": "record ", "shell": "record shard="}


@pytest.mark.parametrize("language", sorted(RECORD_LINE))
def test_local_run_shows_records_flowing_and_stops_cleanly_on_ctrl_c(language: str, tmp_path: Path) -> None:
    if language == "node" and shutil.which("node") is None:
        if os.environ.get("CI"):
            pytest.fail("node is missing (scripts/bootstrap.sh installs it)")
        pytest.skip("node is not installed")
    if language == "shell" and shutil.which("jq") is None:
        if os.environ.get("CI"):
            pytest.fail("jq is missing (scripts/bootstrap.sh installs it)")
        pytest.skip("jq is not installed")
    log = tmp_path / "daemon.log"
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    started = time.monotonic()
    with log.open("wb") as out:
        daemon = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kcl_daemon",
                "run",
                "--local",
                "--status-interval",
                "1",
                "--properties",
                "app.properties",
            ],
            cwd=REPO / "samples" / language,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
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
            assert daemon.poll() is None, text[-3000:]
            time.sleep(0.2)
        else:
            raise AssertionError(f"records did not reach all 4 processors:\n{log.read_text()[-3000:]}")
        daemon.send_signal(signal.SIGINT)
        assert daemon.wait(timeout=30) == 0, log.read_text()[-3000:]
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
    text = log.read_text()
    assert "progress:" in text and "records produced" in text
    assert "shutdown complete: 4 lease(s) released" in text
    assert "Traceback" not in text, text[-3000:]
    assert first_record_s is not None and first_record_s < 15
