"""Metrics: one registry (:class:`DaemonMetrics`) and three exporters.

* Prometheus (:mod:`kcl_daemon.metrics.prometheus`): ``run --metrics-port``, 127.0.0.1 by default;
* CloudWatch (:mod:`kcl_daemon.metrics.cloudwatch`): Java's ``metricsLevel``, ``metricsEnabledDimensions``,
  ``metricsBufferTimeMillis`` and ``metricsMaxQueueSize``, PutMetricData batched in the background;
* OpenTelemetry (:mod:`kcl_daemon.metrics.otlp`, the optional ``otel`` extra): ``run --otlp-endpoint``,
  with the metric and attribute names of KCL 3.5.

The daemon reports through the small observer interfaces of :mod:`kcl_daemon.metrics.observer`, which
cost nothing when metrics are off; the metric list itself is data (:mod:`kcl_daemon.metrics.catalog`).

May import: ``supervise``, ``aws``, ``config``, ``core`` and the root utilities.
"""
