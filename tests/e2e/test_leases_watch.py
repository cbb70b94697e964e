"""`kcl-daemon leases --watch` on both emulators, and from a daemon's metrics endpoint; the --html plot."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from tests.support.daemon import run_cli
from tests.support.emulators import Backend

pytestmark = [pytest.mark.integration, pytest.mark.e2e]
UNUSED = Backend("none", "http://127.0.0.1:9", "http://127.0.0.1:9")  # --metrics-url reads no table


def properties(tmp_path: Path, backend: Backend, table: str) -> Path:
    path = tmp_path / "app.properties"
    path.write_text(
        f"applicationName = {table}\nregionName = us-east-1\n"
        f"kinesisEndpoint = {backend.kinesis_endpoint}\ndynamoDBEndpoint = {backend.dynamodb_endpoint}\n"
        "failoverTimeMillis = 200\n"
    )
    return path


def test_watch_redraws_the_spread_and_keeps_a_plot(
    tmp_path: Path, backend: Backend, lease_table: DynamoLeaseTable
) -> None:
    owners = ["zone-a-1", "zone-a-1", "zone-a-1", "zone-b-1", None]
    for index, owner in enumerate(owners):
        lease = Lease(f"shardId-{index:012d}", ExtendedSequenceNumber("TRIM_HORIZON"))
        lease_table.create_lease(lease)
        if owner is not None:
            lease_table.take(lease, owner)
    plot = tmp_path / "leases.html"
    done = run_cli(
        "leases",
        *("--watch", "--interval", "0.3", "--refreshes", "3", "--html", str(plot)),
        properties=properties(tmp_path, backend, lease_table.table_name),
    )
    assert done.returncode == 0, done.stderr
    screens = done.stdout.split(f"lease table {lease_table.table_name} at ")
    assert len(screens) == 4  # three redraws
    last = screens[-1]
    assert "leases 5, shards ?, workers 2, unclaimed 1" in last
    assert "expired 4" in last  # nobody renews them: expired after failoverTimeMillis of watching
    assert "zone-a-1  " + "#" * 40 + " 3" in last and "zone  " + "#" * 40 + " 4" in last
    page = plot.read_text()
    assert page.count("<polyline") == 3 and "zone-b-1" in page and "3 observation(s)" in page


def test_watch_reads_a_daemons_metrics_endpoint(tmp_path: Path) -> None:
    from kcl_daemon.metrics.prometheus import serve
    from kcl_daemon.metrics.registry import DaemonMetrics

    metrics = DaemonMetrics(process_metrics=False)
    metrics.update_total_shards(3)
    leases = [Lease(f"s{i}", ExtendedSequenceNumber("LATEST"), lease_owner=o) for i, o in enumerate("aab")]
    metrics.update_fleet(leases, frozenset())
    endpoint = serve(metrics, 0)
    try:
        done = run_cli(
            "leases",
            *("--watch", "--refreshes", "1", "--metrics-url", endpoint.url),
            properties=properties(tmp_path, UNUSED, "unused"),
        )
    finally:
        endpoint.close()
    assert done.returncode == 0, done.stderr
    assert "leases 3, shards 3, workers 2, unclaimed 0" in done.stdout
    assert "a  " + "#" * 40 + " 2" in done.stdout
