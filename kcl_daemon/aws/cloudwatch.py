"""PutMetricData: plain data points in, boto3 calls out, in batches CloudWatch accepts.

The data point's shape (:class:`Datum`) is owned here, where it meets the API; the metrics package
builds data points and hands them down.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Final, cast

from kcl_daemon.aws.clients import ClientSettings, make_client
from kcl_daemon.aws.errors import map_aws_errors

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_cloudwatch.literals import StandardUnitType
    from mypy_boto3_cloudwatch.type_defs import MetricDatumTypeDef


@dataclass(frozen=True, slots=True)
class Datum:
    """One PutMetricData data point."""

    name: str
    unit: str
    value: float
    dimensions: tuple[tuple[str, str], ...]
    timestamp: datetime


#: Data points per PutMetricData call (CloudWatch accepts up to 1000 and 1 MB).
BATCH: Final = 500


def build_cloudwatch_client(settings: ClientSettings, endpoint: str | None) -> CloudWatchClient:
    return make_client(settings, "cloudwatch", endpoint=endpoint)


def _datum_dict(datum: Datum) -> MetricDatumTypeDef:
    return {
        "MetricName": datum.name,
        "Dimensions": [{"Name": name, "Value": value} for name, value in datum.dimensions],
        "Value": datum.value,
        "Unit": cast("StandardUnitType", datum.unit),  # the catalog's units are CloudWatch's
        "Timestamp": datum.timestamp,
    }


class CloudWatchPublisher:
    """Blocking; call it from the exporter's own thread. Raises the project's AwsError subclasses."""

    def __init__(self, client: CloudWatchClient) -> None:
        self._client = client

    def put(self, namespace: str, datums: Sequence[Datum]) -> int:
        """Publish ``datums``; returns the number of PutMetricData calls made."""
        calls = 0
        for start in range(0, len(datums), BATCH):
            chunk = [_datum_dict(d) for d in datums[start : start + BATCH]]
            with map_aws_errors(f"PutMetricData to namespace {namespace}"):
                self._client.put_metric_data(Namespace=namespace, MetricData=chunk)
            calls += 1
        return calls
