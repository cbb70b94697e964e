"""Put the metrics of one ``run`` together: the registry, the AWS call counters and the exporters.

CloudWatch is on unless ``metricsLevel`` is NONE, except where it cannot be meant: with a custom
kinesisEndpoint/dynamoDBEndpoint (emulators) or ``--local``, it is on only when cloudWatchEndpoint is
set. Prometheus is on with ``--metrics-port``; OTLP with ``--otlp-endpoint``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field

from kcl_daemon.aws.clients import AwsClients, ClientSettings
from kcl_daemon.aws.instrument import instrument
from kcl_daemon.clock import Clock
from kcl_daemon.config.settings import Settings
from kcl_daemon.metrics.cloudwatch import CloudWatchExporter
from kcl_daemon.metrics.cloudwatch_data import CloudWatchPlan
from kcl_daemon.metrics.otlp import OtlpExporter
from kcl_daemon.metrics.prometheus import PrometheusEndpoint, serve
from kcl_daemon.metrics.registry import DaemonMetrics

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MetricsOptions:
    """The ``run`` command line's metrics options."""

    port: int | None = None
    host: str = "127.0.0.1"
    otlp_endpoint: str | None = None


def cloudwatch_decision(settings: Settings, *, local: bool) -> tuple[bool, str]:
    """Whether to publish to CloudWatch, and why (for the start-up log line)."""
    if settings.metrics_level == "NONE":
        return False, "metricsLevel is NONE"
    if settings.cloudwatch_endpoint is not None:
        return True, f"cloudWatchEndpoint {settings.cloudwatch_endpoint}"
    if local:
        return False, "--local without cloudWatchEndpoint"
    if settings.kinesis_endpoint or settings.dynamodb_endpoint:
        return False, "custom kinesisEndpoint/dynamoDBEndpoint without cloudWatchEndpoint"
    return True, "the region's endpoint"


@dataclass
class MetricsRuntime:
    metrics: DaemonMetrics
    prometheus: PrometheusEndpoint | None = None
    cloudwatch: CloudWatchExporter | None = None
    otlp: OtlpExporter | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self, clock: Clock) -> None:
        """Start the background publishing (call on the event loop)."""
        if self.cloudwatch is not None:
            from kcl_daemon.core.supervise import WORKER_LOOP
            from kcl_daemon.supervise import supervise

            cloudwatch = self.cloudwatch
            loop = supervise(
                "cloudwatch-metrics", cloudwatch.run, WORKER_LOOP, clock=clock, on_fatal=_metrics_stopped
            )
            self._tasks.append(asyncio.create_task(loop, name="cloudwatch-metrics"))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.otlp is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.otlp.close)
        if self.prometheus is not None:
            self.prometheus.close()


def _metrics_stopped(name: str, why: str) -> None:
    logger.error("%s stopped for good (the worker goes on without it): %s", name, why)


def build_metrics(
    settings: Settings,
    options: MetricsOptions,
    clients: AwsClients,
    client_settings: ClientSettings | None,
    *,
    worker_id: str,
    stream: str,
    clock: Clock,
    local: bool = False,
) -> MetricsRuntime:
    """The registry with every exporter the settings and options ask for (raises OSError for a busy
    port, ConfigError for a missing extra)."""
    from kcl_daemon.core.inspection.distribution import cluster_of

    separator = settings.lease_cluster_separator
    metrics = DaemonMetrics(zone_of=lambda worker: cluster_of(worker, separator))
    instrument(clients.dynamodb, "dynamodb", metrics)
    instrument(clients.kinesis, "kinesis", metrics)
    runtime = MetricsRuntime(metrics)
    if options.port is not None:
        runtime.prometheus = serve(metrics, options.port, options.host)
    wanted, why = cloudwatch_decision(settings, local=local)
    if wanted:
        from kcl_daemon.aws.cloudwatch import CloudWatchPublisher, build_cloudwatch_client

        client = build_cloudwatch_client(client_settings or ClientSettings(), settings.cloudwatch_endpoint)
        instrument(client, "cloudwatch", metrics)
        plan = CloudWatchPlan.from_settings(
            settings.application_name or stream,
            settings.metrics_level,
            settings.metrics_enabled_dimensions,
            worker_id,
            stream,
        )
        runtime.cloudwatch = CloudWatchExporter(
            metrics,
            plan,
            CloudWatchPublisher(client).put,
            clock,
            buffer_s=settings.metrics_buffer_time_s,
            max_queue=settings.metrics_max_queue_size,
        )
        logger.info(
            "metrics: CloudWatch namespace %s, level %s, every %.0fs (%s)",
            plan.namespace,
            settings.metrics_level,
            settings.metrics_buffer_time_s,
            why,
        )
    else:
        logger.info("metrics: CloudWatch off (%s)", why)
    if options.otlp_endpoint is not None:
        runtime.otlp = OtlpExporter(
            metrics,
            options.otlp_endpoint,
            interval_s=settings.metrics_buffer_time_s,
            attributes={"aws.kinesis.stream.name": stream, "aws.kinesis.worker.id": worker_id},
        )
    return runtime
