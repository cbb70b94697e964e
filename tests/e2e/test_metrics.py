"""Metrics of a running daemon on the emulators: Prometheus scraped, CloudWatch on moto_server, OTLP
pushed to an in-test collector - one daemon process, all three exporters at once.

The daemon runs as users run it (``python -m kcl_daemon run --metrics-port ... --otlp-endpoint ...``) with
our recording processor; CloudWatch's endpoint is moto_server's for both backends.
"""

from __future__ import annotations

import http.server
import signal
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from prometheus_client.parser import text_string_to_metric_families

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.emulators import Backend, free_port
from tests.support.fleet import Fleet
from tests.support.streams import put

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


class Collector:
    """An OTLP/HTTP metrics receiver: keeps every metric name and the attribute keys seen with it."""

    def __init__(self) -> None:
        self.seen: dict[str, set[str]] = {}
        self.values: dict[str, float] = {}
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportMetricsServiceRequest()
                request.ParseFromString(body)
                for resource in request.resource_metrics:
                    for scope in resource.scope_metrics:
                        for metric in scope.metrics:
                            points = list(metric.sum.data_points) + list(metric.gauge.data_points)
                            keys = collector.seen.setdefault(metric.name, set())
                            for point in points:
                                keys.update(a.key for a in point.attributes)
                                value = point.as_double or point.as_int
                                collector.values[metric.name] = max(
                                    collector.values.get(metric.name, 0), value
                                )
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()

            def log_message(self, *_args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="otlp-collector", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    yield c
    c.close()


@pytest.fixture
def fleet(
    tmp_path: Path, backend: Backend, lease_table: DynamoLeaseTable, make_stream: Callable[[int], str]
) -> Iterator[Fleet]:
    fleet = Fleet(tmp_path, backend, lease_table.table_name, make_stream(4))
    yield fleet
    fleet.close()


def scrape(url: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - our own 127.0.0.1 endpoint
        text = response.read().decode()
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def total(found: dict[str, list[tuple[dict[str, str], float]]], name: str, **labels: str) -> float:
    return sum(v for lab, v in found.get(name, []) if all(lab.get(k) == want for k, want in labels.items()))


def test_prometheus_cloudwatch_and_otlp_of_a_running_daemon(
    fleet: Fleet,
    aws_clients: AwsClients,
    backend: Backend,
    moto_endpoint: str,
    collector: Collector,
) -> None:
    payload_bytes = sum(len(f"record-{n}") for n in range(300))
    put(aws_clients, fleet.stream, range(300))
    port = free_port()
    worker = "zone-a-worker1"
    fleet.extra = f"cloudWatchEndpoint = {moto_endpoint}\nmetricsBufferTimeMillis = 1000\n"
    daemon = fleet.start(worker, None, "--metrics-port", str(port), "--otlp-endpoint", collector.url)
    log = daemon.log
    url = f"http://127.0.0.1:{port}/metrics"
    found: dict[str, list[tuple[dict[str, str], float]]] = {}

    def delivered() -> bool:
        nonlocal found
        if daemon.exit_status is not None:
            raise AssertionError(log.read_text())
        try:
            found = scrape(url)
        except OSError:
            return False
        return (
            total(found, "kcl_shard_records_total") >= 300
            and total(found, "kcl_fleet_total_shards") == 4
            and total(found, "kcl_lease_renew_seconds_count") > 0
            and total(found, "kcl_fleet_worker_leases") == 4  # a scan after the takes (failover x 2)
        )

    try:
        deadline = time.monotonic() + 60
        while not delivered():
            assert time.monotonic() < deadline, (
                f"metrics incomplete: {sorted(found)}\n{log.read_text()[-3000:]}"
            )
            time.sleep(0.3)
        # per shard
        assert total(found, "kcl_shard_bytes_total") == payload_bytes
        assert len({lab["shard"] for lab, _ in found["kcl_shard_records_total"]}) == 4
        assert total(found, "kcl_shard_batches_total") >= 4
        assert all(v >= 0 for _, v in found["kcl_shard_millis_behind_latest"])
        assert all(0 <= v < 600_000 for _, v in found["kcl_shard_last_record_age_millis"])
        assert total(found, "kcl_child_action_seconds_count", action="initialize") == 4
        assert total(found, "kcl_child_action_seconds_count", action="processRecords") >= 4
        assert total(found, "kcl_shard_checkpoints_total") >= 4
        assert total(found, "kcl_child_restarts_total") == 0 and "kcl_child_restarts_total" in found
        assert total(found, "kcl_shard_parks_total") == 0 and "kcl_shard_parks_total" in found
        # per worker
        assert total(found, "kcl_worker_leases") == 4
        assert total(found, "kcl_leases_taken_total") == 4
        assert total(found, "kcl_leases_lost_total") == 0 and total(found, "kcl_leases_handed_off_total") == 0
        assert total(found, "kcl_lease_renew_failures_total") == 0
        assert total(found, "kcl_aws_calls_total", service="kinesis", operation="GetRecords") > 0
        assert total(found, "kcl_aws_calls_total", service="dynamodb", operation="UpdateItem") > 0
        assert total(found, "kcl_aws_errors_total", service="kinesis", operation="GetRecords") == 0
        assert "kcl_aws_throttles_total" in found or total(found, "kcl_aws_throttles_total") == 0
        # fleet
        assert total(found, "kcl_fleet_total_leases") == 4
        assert total(found, "kcl_fleet_unclaimed_leases") == 0
        assert total(found, "kcl_fleet_expired_leases") == 0
        assert total(found, "kcl_fleet_worker_leases", worker=worker) == 4
        assert total(found, "kcl_fleet_zone_leases", zone="zone") == 4
        assert total(found, "kcl_fleet_lease_skew") == 0
        # process metrics of the standard client library
        assert total(found, "process_resident_memory_bytes") > 0

        # CloudWatch, batched every second to moto_server
        import boto3  # noqa: TID251 - reading what the daemon published

        cloudwatch = boto3.client("cloudwatch", endpoint_url=moto_endpoint, region_name="us-east-1")

        def published() -> set[str]:
            listed = cloudwatch.list_metrics(Namespace=fleet.table)["Metrics"]
            return {m["MetricName"] for m in listed}

        deadline = time.monotonic() + 20
        while not {"RecordsProcessed", "MillisBehindLatest", "CurrentLeases", "TotalLeases"} <= published():
            assert time.monotonic() < deadline, f"CloudWatch got {published()}\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        dims = {
            d["Name"]
            for m in cloudwatch.list_metrics(Namespace=fleet.table, MetricName="RecordsProcessed")["Metrics"]
            for d in m["Dimensions"]
        }
        assert {"Operation", "ShardId", "WorkerIdentifier"} <= dims

        # OTLP, pushed every second to the collector
        deadline = time.monotonic() + 20
        while (
            "consumer.lag.duration" not in collector.seen
            or collector.values.get("aws.kinesis.client.records.processed", 0) < 1
        ):
            assert time.monotonic() < deadline, (
                f"OTLP got {sorted(collector.seen)}\n{log.read_text()[-3000:]}"
            )
            time.sleep(0.3)
        assert "aws.kinesis.shard.id" in collector.seen["consumer.lag.duration"]
        assert collector.values.get("aws.kinesis.client.records.processed", 0) >= 1
    finally:
        assert daemon.stop(signal.SIGTERM, timeout_s=30) == 0, log.read_text()[-3000:]
