"""The OpenTelemetry exporter (optional extra ``otel``): the registry's series as OTLP/HTTP metrics.

Instrument and attribute names are KCL 3.5's where it has them (``consumer.lag.duration``,
``aws.kinesis.shard.id``) and ``aws.kinesis.client.*`` otherwise (see the catalog). Counters become
cumulative observable counters, gauges observable gauges, and each histogram two observable counters,
``<name>.sum`` (in its unit) and ``<name>.count``. The SDK's own periodic reader pushes them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kcl_daemon.errors import ConfigError
from kcl_daemon.metrics.catalog import ATTRIBUTE_OF_LABEL, METRICS, Kind, MetricSpec
from kcl_daemon.metrics.registry import DaemonMetrics, Sample

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Observation

logger = logging.getLogger(__name__)

#: One registry snapshot serves every instrument of one collection.
_SNAPSHOT_REUSE_S = 0.5


def metrics_url(endpoint: str) -> str:
    """An OTLP/HTTP base URL (``http://host:4318``) or the full metrics URL."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/metrics") else endpoint + "/v1/metrics"


class OtlpExporter:
    def __init__(
        self, metrics: DaemonMetrics, endpoint: str, *, interval_s: float, attributes: dict[str, str]
    ) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
            from opentelemetry.sdk.resources import Resource
        except ImportError:
            raise ConfigError(
                ["--otlp-endpoint needs the otel extra: pip install 'kcl-daemon[otel]'"]
            ) from None
        self._metrics = metrics
        self._lock = threading.Lock()
        self._snapshot: list[Sample] = []
        self._taken_at = float("-inf")
        self.url = metrics_url(endpoint)
        reader = PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=self.url), export_interval_millis=interval_s * 1000
        )
        resource = Resource.create({"service.name": "kcl-daemon", **attributes})
        self._provider = MeterProvider(resource=resource, metric_readers=[reader])
        meter = self._provider.get_meter("kcl_daemon")
        for spec in METRICS:
            if spec.kind is Kind.GAUGE:
                meter.create_observable_gauge(spec.otel, [self._callback(spec)], unit=spec.otel_unit)
            elif spec.kind is Kind.COUNTER:
                meter.create_observable_counter(spec.otel, [self._callback(spec)], unit=spec.otel_unit)
            else:  # histograms and summaries: sum and count
                sums = self._callback(spec, part="sum")
                counts = self._callback(spec, part="count")
                meter.create_observable_counter(spec.otel + ".sum", [sums], unit=spec.otel_unit)
                meter.create_observable_counter(spec.otel + ".count", [counts], unit="1")
        logger.info("metrics: OTLP export to %s every %.0fs", self.url, interval_s)

    def _samples(self) -> list[Sample]:
        with self._lock:
            now = time.monotonic()
            if now - self._taken_at > _SNAPSHOT_REUSE_S:
                self._snapshot = self._metrics.snapshot()
                self._taken_at = now
            return self._snapshot

    def _callback(
        self, spec: MetricSpec, part: str = "value"
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        from opentelemetry.metrics import Observation

        def observe(_options: CallbackOptions) -> Iterable[Observation]:
            for sample in self._samples():
                if sample.family != spec.name:
                    continue
                attributes = {ATTRIBUTE_OF_LABEL.get(k, k): v for k, v in sample.labels}
                value = sample.count if part == "count" else sample.value * spec.scale
                yield Observation(value, attributes)

        return observe

    def close(self) -> None:
        """Export once more and stop (blocking: call it off the event loop)."""
        self._provider.shutdown()
