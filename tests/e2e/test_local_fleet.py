"""`kcl-daemon run --local --workers 3`: leases spread over three daemons, one is SIGKILLed, the others
take its leases; the screen is the live view, the workers' logs are files. About 20 s."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from kcl_daemon.local.fleet import LocalFleet, Worker, worker_properties
from tests.support.daemon import run_cli
from tests.support.paths import REPO, VENV_BIN

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(
    ("elapsed_s", "holding", "due"),
    [
        (5.0, {"local-1", "local-2"}, False),  # too early
        (8.0, {"local-1"}, False),  # local-2 holds nothing yet: the takeover would not show
        (8.0, {"local-1", "local-2"}, True),
        (24.0, {"local-1"}, True),  # three times kill_after: kill anyway
    ],
)
def test_a_worker_is_killed_after_the_delay_once_every_worker_holds_leases(
    elapsed_s: float, holding: set[str], due: bool
) -> None:
    fleet = LocalFleet()
    fleet.workers = [Worker(f"local-{n}", Path("/dev/null"), None) for n in (1, 2)]  # type: ignore[arg-type]
    assert fleet.kill_due(elapsed_s, 8.0, frozenset(holding)) is due
    fleet.workers[1].killed_at = 1.0
    assert fleet.kill_due(elapsed_s, 8.0, frozenset(holding)) is False  # one kill only


def test_worker_properties_replace_endpoints_credentials_stream_and_worker_id() -> None:
    original = (
        "executableName = python3 p.py\nkinesisEndpoint=https://x\nAwsCredentialsProvider = Profile|p\n"
        "streamName: s\nworkerId = w\nfailoverTimeMillis = 2000\n"
    )
    text = worker_properties(original, endpoint="http://127.0.0.1:1", region="us-east-1", stream="local")
    assert "https://x" not in text and "Profile|p" not in text and "workerId" not in text
    assert "kinesisEndpoint = http://127.0.0.1:1" in text and "streamName = local" in text
    assert "executableName = python3 p.py" in text and "failoverTimeMillis = 2000" in text


def test_three_workers_share_the_shards_and_take_over_from_a_killed_one(tmp_path: Path) -> None:
    properties = tmp_path / "app.properties"
    properties.write_text(
        f"executableName = {sys.executable} {REPO / 'samples' / 'python' / 'sample_processor.py'}\n"
        "applicationName = fleet-test\nstreamName = fleet-stream\ninitialPositionInStream = TRIM_HORIZON\n"
        "failoverTimeMillis = 2000\nidleTimeBetweenReadsInMillis = 250\n"
    )
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    args = ("--local", "--workers", "3", "--kill-after", "6", "--status-interval", "1", "--refreshes", "26")
    done = run_cli("run", *args, properties=properties, env=env, cwd=tmp_path, timeout_s=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    screens = done.stdout.split("lease table fleet-test at ")
    spread = [s for s in screens if "leases 4, shards 4, workers 3, unclaimed 0" in s]
    assert spread, done.stdout[-3000:]  # at some point all three workers held leases
    assert "SIGKILLed local-3" in done.stdout
    last = screens[-1]
    assert "leases 4, shards 4, workers 2, unclaimed 0, expired 0" in last, last  # taken over
    assert "local-3" not in last.split("lease key")[1].split("leases per cluster")[0]
    assert "worker logs:" in done.stdout
