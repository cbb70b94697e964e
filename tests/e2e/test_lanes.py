"""Lanes (``shardsPerChild``): one child process serves several shards, as users run it.

A daemon process on kinesalite + dynalite (a split needs kinesalite) with real children: the recording
processor on each of our clients that takes the offer (Python, Node and Go, each given a processor
factory), and amazon_kclpy's unmodified sample, which never sees a lane line and gets a child per shard as
before.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend
from tests.support.figures import FIGURES
from tests.support.fleet import Fleet
from tests.support.paths import CHILDREN, RECORDER, REPO, VENV_BIN
from tests.support.recorder import data_of
from tests.support.requirements import require_tool
from tests.support.streams import put, wait_for_stream

pytestmark = [
    pytest.mark.integration,
    pytest.mark.e2e,
    pytest.mark.parametrize("backend", ["kinesalite+dynalite"], indirect=True),
]

KCLPY_SAMPLE = VENV_BIN / "sample_kclpy_app.py"
GO_CACHE = REPO / ".cache" / "go"


def recording_child(client: str, tmp_path: Path) -> str:
    """The ``executableName`` of the recording processor on ``client`` (a Go one is built first)."""
    if client == "python":
        return f"{sys.executable} {RECORDER}"
    if client == "node":
        return f"{require_tool('node')} {CHILDREN / 'recording_processor.js'}"
    go = require_tool("go")
    env = {
        **os.environ,
        "GOCACHE": str(GO_CACHE / "build"),
        "GOPATH": str(GO_CACHE / "path"),
        "GOFLAGS": "-mod=mod",
        "GOPROXY": "off",
        "GOTOOLCHAIN": "local",
    }
    binary = tmp_path / "recording-processor"
    built = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=CHILDREN / "recording_go",
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    return str(binary)


@pytest.mark.parametrize(
    "client",
    [
        "python",
        pytest.param("node", marks=pytest.mark.clients),
        pytest.param("go", marks=pytest.mark.clients),
    ],
)
def test_one_child_serves_several_shards_across_a_split(
    client: str,
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> None:
    executable = recording_child(client, tmp_path)
    fleet = Fleet(tmp_path, backend, lease_table.table_name, make_stream(3), extra="shardsPerChild = 4\n")
    try:
        put(aws_clients, fleet.stream, range(300))
        daemon = fleet.start("daemon-a", executable)
        fleet.wait(
            lambda: data_of(fleet.recorded()) >= {f"record-{n}" for n in range(300)}, 60, "300 records"
        )
        log = daemon.log.read_text()
        assert log.count("started child pid") == 1, fleet.logs()
        assert "serves up to 4 shards (lanes)" in log

        kinesis = aws_clients.kinesis
        first = min(
            kinesis.list_shards(StreamName=fleet.stream)["Shards"],
            key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]),
        )
        low, high = (int(first["HashKeyRange"][k]) for k in ("StartingHashKey", "EndingHashKey"))
        kinesis.split_shard(
            StreamName=fleet.stream, ShardToSplit=first["ShardId"], NewStartingHashKey=str((low + high) // 2)
        )
        wait_for_stream(aws_clients, fleet.stream)
        put(aws_clients, fleet.stream, range(300, 600))
        fleet.wait(lambda: len(data_of(fleet.recorded())) >= 600, 90, "600 records across the split")
        fleet.wait(lambda: bool(fleet.recorded("shard_ended")), 30, "the parent's shard end")
        assert daemon.stop(signal.SIGTERM) == 0, daemon.tail()
    finally:
        fleet.close()

    log = daemon.log.read_text()
    children = log.count("started child pid")
    FIGURES[f"lanes (shardsPerChild = 4, {client} client)"] = (
        f"5 shards held over the run in {children} child process(es)"
    )
    assert children <= 2, fleet.logs()  # 5 shards held (3, then the parent's 2 children) in 1 or 2 processes
    assert "Traceback" not in log
    assert {row["shard"] for row in fleet.recorded("shard_ended")} == {first["ShardId"]}
    assert len(fleet.recorded("shutdown")) == 4  # every open shard got shutdownRequested on its lane
    for lease in lease_table.list_leases(consistent=True).leases:
        assert lease.checkpoint.sequence_number.isdigit() or lease.checkpoint.sequence_number == "SHARD_END"


@pytest.mark.clients
def test_amazon_kclpy_children_never_see_a_lane_and_get_a_child_per_shard(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> None:
    assert KCLPY_SAMPLE.exists(), "amazon_kclpy is installed by scripts/bootstrap.sh"
    fleet = Fleet(tmp_path, backend, lease_table.table_name, make_stream(2), extra="shardsPerChild = 4\n")
    try:
        last = put(aws_clients, fleet.stream, range(400))
        daemon = fleet.start("daemon-a", str(KCLPY_SAMPLE))

        def checkpointed() -> bool:
            leases = lease_table.list_leases(consistent=True).leases
            return {lease.lease_key: lease.checkpoint.sequence_number for lease in leases} == last

        daemon_log = daemon.log
        # the sample checkpoints its first batch at once: 200 records a shard are one batch
        fleet.wait(checkpointed, 60, "both shards checkpointed at their last record")
        assert daemon.stop() == 0, fleet.logs()
    finally:
        fleet.close()
    log = daemon_log.read_text()
    assert "did not take the offer of lanes" in log
    assert log.count("started child pid") == 2
