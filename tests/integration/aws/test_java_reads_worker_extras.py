"""Java KCL 3.x reads a kcl-daemon WorkerMetricStats item, extra attribute and all, as a valid worker.

The item is written by our :class:`WorkerMetricsTable`; ``tests/fixtures/java/ReadMetrics.java`` scans the
table through Java's own ``WorkerMetricStats`` bean (the DynamoDB enhanced client, as Java's leader
does) and prints what a Java leader would see. Runs when ``javac`` and the KCL jars are there
(``pip install --no-deps --target .cache/java-kcl-3 kclpy-ext==3.1.3.post4``), else skips. ~5 s.
"""

from __future__ import annotations

import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.worker_metrics_table import WorkerMetricsTable
from kcl_daemon.core.leader.decider import WorkerState
from kcl_daemon.core.leader.worker_metrics import WorkerMetricStats
from kcl_daemon.core.leader.zones import WorkerExtras, extras_to_attribute
from tests.support.emulators import Backend
from tests.support.paths import FIXTURES, REPO

pytestmark = pytest.mark.integration

JARS = REPO / ".cache" / "java-kcl-3" / "amazon_kclpy" / "jars"
SOURCE = FIXTURES / "java" / "ReadMetrics.java"


def test_java_sees_our_metrics_items_as_valid_workers(
    tmp_path: Path, backend: Backend, aws_clients: AwsClients
) -> None:
    if shutil.which("javac") is None or shutil.which("java") is None or not JARS.is_dir():
        pytest.skip(f"needs javac, java and the KCL 3.x jars in {JARS}")
    classpath = f"{JARS}/*"
    subprocess.run(["javac", "-d", str(tmp_path), "-cp", classpath, str(SOURCE)], check=True, timeout=120)
    table = WorkerMetricsTable(aws_clients.dynamodb, f"metrics-{uuid.uuid4().hex[:8]}")
    table.create_table_if_missing()
    now = time.time()
    active = extras_to_attribute(WorkerExtras("az1", 2.0))
    restarting = extras_to_attribute(WorkerExtras("az2", 1.0, WorkerState.RESTARTING, now + 60))
    table.publish(WorkerMetricStats("ours", now, {"C": (12.5, 14.0)}, {"C": (100.0,)}, extra=active))
    table.publish(WorkerMetricStats("ours-restarting", now, {"C": (3.0,)}, {"C": (100.0,)}, extra=restarting))
    try:
        done = subprocess.run(
            [
                "java",
                "-cp",
                f"{tmp_path}:{classpath}",
                "ReadMetrics",
                backend.dynamodb_endpoint,
                table.table_name,
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        aws_clients.dynamodb.delete_table(TableName=table.table_name)
    assert done.returncode == 0, done.stdout + done.stderr[:1500]
    seen = {line.split(" ", 1)[0]: line for line in done.stdout.splitlines()}
    assert set(seen) == {"ours", "ours-restarting"}, done.stdout + done.stderr
    assert "valid=true default=false failing=false C=12.8" in seen["ours"]
    assert "valid=true" in seen["ours-restarting"]
