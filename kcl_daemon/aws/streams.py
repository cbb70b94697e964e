"""DescribeStreamSummary: a stream's identity (account, name, creation epoch) for multi-stream applications,
and its retention period (``kcl-daemon checkpoint``'s AT_TIMESTAMP search).

The account comes from the stream ARN and the creation epoch from ``StreamCreationTimestamp`` (whole
seconds, as Java's ``StreamIdentifier``). A stream that does not exist, or is being deleted, has no
identity (``None``): it is picked up by a later sync once it exists. Other failures raise the
project's errors (:mod:`kcl_daemon.aws.errors`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kcl_daemon.aws.errors import map_aws_errors
from kcl_daemon.core.stream_identity import StreamIdentity, identity_from_arn
from kcl_daemon.errors import AwsError, DependencyUnavailable

if TYPE_CHECKING:
    from mypy_boto3_kinesis import KinesisClient


def describe_stream_identity(client: KinesisClient, stream_name: str) -> StreamIdentity | None:
    """The identity of ``stream_name``; None when it does not exist or is DELETING."""
    what = f"describe stream {stream_name}"
    try:
        with map_aws_errors(what):
            summary = client.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]
    except DependencyUnavailable:
        return None
    if summary.get("StreamStatus") == "DELETING":
        return None
    try:
        created = summary["StreamCreationTimestamp"]
        return identity_from_arn(summary["StreamARN"], int(created.timestamp()))
    except (KeyError, ValueError, AttributeError) as exc:
        raise AwsError(f"{what}: malformed response: {exc!r}") from exc


def retention_s(client: KinesisClient, stream_name: str) -> float:
    """How long the stream keeps records (``RetentionPeriodHours``), in seconds."""
    with map_aws_errors(f"describe stream {stream_name}"):
        summary = client.describe_stream_summary(StreamName=stream_name)["StreamDescriptionSummary"]
    return float(summary.get("RetentionPeriodHours", 24)) * 3600
