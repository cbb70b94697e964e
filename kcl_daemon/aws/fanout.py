"""Enhanced fan-out calls (contract §2.6): find, register or deregister the stream consumer, and
SubscribeToShard through botocore's event stream. Plain data out; errors in the project's tree.

* :meth:`Fanout.ensure_consumer` reuses a consumer of that name (waiting while it is ``CREATING``) or
  registers one; two workers racing to register both end up with the one consumer.
* :meth:`Fanout.subscribe` yields one :class:`FanoutEvent` per ``SubscribeToShardEvent``. Kinesis ends
  a subscription after 5 minutes; an error on the stream (``ResourceInUseException`` when another
  subscription is open, throttling, a reset connection) is raised as the mapped :class:`AwsError`.
* A reply whose initial response botocore cannot parse (a body cut short, not an event stream, a bad
  frame) is closed before :meth:`Fanout.subscribe` raises: botocore leaves that connection open, held
  only by the exception's frames, until the garbage collector finalises its socket unclosed.
* Deregistration happens only through :meth:`Fanout.deregister_consumer` (``kcl-daemon
  deregister-consumer``), never on shutdown: other workers of the application share the consumer.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, cast

import urllib3.exceptions

from kcl_daemon.aws.errors import map_aws_errors
from kcl_daemon.aws.kinesis import (
    RawRecord,
    child_shard_from_response,
    epoch_millis,
    record_from_response,
)
from kcl_daemon.core.shards.graph import ChildShard
from kcl_daemon.core.shards.iterator import IteratorPosition
from kcl_daemon.errors import AwsError, DependencyUnavailable, ShardNotFound, TransientNetwork

if TYPE_CHECKING:
    from botocore.eventstream import EventStream
    from mypy_boto3_kinesis import KinesisClient
    from mypy_boto3_kinesis.literals import ShardIteratorTypeType
    from mypy_boto3_kinesis.type_defs import (
        ConsumerDescriptionTypeDef,
        DeregisterStreamConsumerInputTypeDef,
        DescribeStreamConsumerInputTypeDef,
        StartingPositionTypeDef,
        SubscribeToShardEventStreamTypeDef,
        SubscribeToShardEventTypeDef,
    )

_NOT_FOUND: Final = "ResourceNotFoundException"
_IN_USE: Final = "ResourceInUseException"
_BEFORE_PARSE: Final = "before-parse.kinesis.SubscribeToShard"

#: per thread, the raw body of the SubscribeToShard reply botocore is parsing (botocore calls on the
#: caller's thread), so that :meth:`Fanout.subscribe` can close it when the parse fails
_unparsed = threading.local()


def _note_body(*, response_dict: Mapping[str, object] | None = None, **_: object) -> None:
    """``before-parse`` handler: remember this thread's reply body (a urllib3 response, or bytes)."""
    _unparsed.body = None if response_dict is None else response_dict.get("body")


def _close_unparsed() -> None:
    """Close the connection of a reply botocore failed to parse; its state is unknown, never reuse it."""
    close = getattr(getattr(_unparsed, "body", None), "close", None)
    if close is not None:
        with contextlib.suppress(Exception):  # the connection is already broken
            close()


class ConsumerInUse(AwsError):
    """Registering raced with another worker's registration (or the consumer is being deleted)."""

    retriable = True


@dataclass(frozen=True, slots=True)
class FanoutEvent:
    records: tuple[RawRecord, ...]
    #: None once the shard is closed and every record delivered (then ``child_shards`` says what follows)
    continuation_sequence_number: str | None
    millis_behind_latest: int | None
    child_shards: tuple[ChildShard, ...]


def starting_position(position: IteratorPosition) -> StartingPositionTypeDef:
    """SubscribeToShard's StartingPosition for an iterator position."""
    request: StartingPositionTypeDef = {"Type": cast("ShardIteratorTypeType", str(position.type))}
    if position.sequence_number is not None:
        request["SequenceNumber"] = position.sequence_number
    if position.timestamp is not None:
        request["Timestamp"] = position.timestamp
    return request


def event_from_response(event: SubscribeToShardEventTypeDef) -> FanoutEvent:
    behind = event.get("MillisBehindLatest")
    return FanoutEvent(
        records=tuple(record_from_response(r) for r in event.get("Records", ())),
        continuation_sequence_number=event.get("ContinuationSequenceNumber") or None,
        millis_behind_latest=None if behind is None else int(behind),
        child_shards=tuple(child_shard_from_response(c) for c in event.get("ChildShards") or ()),
    )


class Fanout:
    """Synchronous enhanced fan-out adapter over one boto3 Kinesis client (thread-safe)."""

    def __init__(self, client: KinesisClient) -> None:
        self._client = client
        client.meta.events.register(_BEFORE_PARSE, _note_body, unique_id="kcl-fanout-unparsed-body")

    def stream_arn(self, stream_name: str) -> str:
        with map_aws_errors(f"describe stream {stream_name}"):
            summary = self._client.describe_stream_summary(StreamName=stream_name)
        return summary["StreamDescriptionSummary"]["StreamARN"]

    def _describe(
        self, stream_arn: str | None, name: str | None, arn: str | None
    ) -> ConsumerDescriptionTypeDef | None:
        request: DescribeStreamConsumerInputTypeDef = (
            {"ConsumerARN": arn}
            if arn
            else {"StreamARN": cast("str", stream_arn), "ConsumerName": cast("str", name)}  # both given
        )
        try:
            with map_aws_errors(f"describe stream consumer {arn or name}", {_NOT_FOUND: ShardNotFound}):
                return self._client.describe_stream_consumer(**request)["ConsumerDescription"]
        except ShardNotFound:
            return None

    def ensure_consumer(
        self, stream_arn: str, name: str, *, wait_s: float = 120.0, poll_s: float = 1.0
    ) -> str:
        """The ARN of the ACTIVE consumer ``name`` of the stream, registering it if there is none."""
        deadline = time.monotonic() + wait_s
        while True:
            found = self._describe(stream_arn, name, None)
            if found is None:
                try:
                    with map_aws_errors(f"register stream consumer {name}", {_IN_USE: ConsumerInUse}):
                        self._client.register_stream_consumer(StreamARN=stream_arn, ConsumerName=name)
                except ConsumerInUse:
                    pass  # another worker registered it first: describe it again
            elif found.get("ConsumerStatus") == "ACTIVE":
                return str(found["ConsumerARN"])
            elif found.get("ConsumerStatus") == "DELETING":
                pass  # wait until it is gone, then register it again
            if time.monotonic() > deadline:
                raise DependencyUnavailable(f"stream consumer {name} did not become ACTIVE within {wait_s}s")
            time.sleep(poll_s)

    def check_consumer(self, consumer_arn: str) -> str:
        """A configured consumer ARN, checked to exist and be ACTIVE."""
        found = self._describe(None, None, consumer_arn)
        if found is None:
            raise DependencyUnavailable(f"stream consumer {consumer_arn} does not exist")
        if found.get("ConsumerStatus") != "ACTIVE":
            raise DependencyUnavailable(f"stream consumer {consumer_arn} is {found.get('ConsumerStatus')}")
        return consumer_arn

    def deregister_consumer(self, stream_arn: str | None, name: str | None, arn: str | None = None) -> bool:
        """Deregister the consumer (by ARN, or stream ARN + name); False if there was none."""
        request: DeregisterStreamConsumerInputTypeDef = (
            {"ConsumerARN": arn}
            if arn
            else {"StreamARN": cast("str", stream_arn), "ConsumerName": cast("str", name)}  # both given
        )
        try:
            with map_aws_errors(f"deregister stream consumer {arn or name}", {_NOT_FOUND: ShardNotFound}):
                self._client.deregister_stream_consumer(**request)
        except ShardNotFound:
            return False
        return True

    def subscribe(self, consumer_arn: str, shard_id: str, position: IteratorPosition) -> Subscription:
        """Open one subscription; iterate it for its events. A missing shard raises
        :class:`ShardNotFound`, another open subscription on the shard :class:`ConsumerInUse`."""
        what = f"subscribe to shard {shard_id}"
        _unparsed.body = None
        try:
            with map_aws_errors(what, _SUBSCRIBE_ERRORS):
                response = self._client.subscribe_to_shard(
                    ConsumerARN=consumer_arn,
                    ShardId=shard_id,
                    StartingPosition=starting_position(position),
                )
        except BaseException:
            _close_unparsed()
            raise
        finally:
            _unparsed.body = None  # closed, or the EventStream owns it: hold no reference
        return Subscription(what, response["EventStream"])


_SUBSCRIBE_ERRORS: Final[dict[str, type[AwsError]]] = {
    _NOT_FOUND: ShardNotFound,
    _IN_USE: ConsumerInUse,
    "InternalFailureException": TransientNetwork,  # the event stream's modeled name for a 500
}


class Subscription:
    """One open SubscribeToShard stream. Iterating yields its events until Kinesis ends it (about 5
    minutes), nothing arrives for the client's read timeout (it ends too), or it fails with a mapped
    :class:`AwsError`; :meth:`close` (from any thread) ends it."""

    def __init__(self, what: str, stream: EventStream[SubscribeToShardEventStreamTypeDef]) -> None:
        self._what = what
        self._stream = stream

    def __iter__(self) -> Iterator[FanoutEvent]:
        events: Iterator[SubscribeToShardEventStreamTypeDef] = iter(self._stream)
        try:
            while True:
                with map_aws_errors(self._what, _SUBSCRIBE_ERRORS):  # a broken stream: TransientNetwork
                    try:
                        event = next(events, None)
                    except urllib3.exceptions.ReadTimeoutError:
                        return  # nothing for a read timeout (an idle shard): end; the caller resubscribes
                if event is None:
                    return
                # an event of another kind carries none (the stubs know only this kind)
                body = cast("SubscribeToShardEventTypeDef | None", event.get("SubscribeToShardEvent"))
                if body is None:
                    continue
                try:
                    parsed = event_from_response(body)
                except (KeyError, ValueError, TypeError) as exc:
                    raise AwsError(f"{self._what}: malformed event: {exc!r}") from exc
                yield parsed
        finally:
            self.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing a stream another thread reads may race: harmless
            self._stream.close()


__all__ = [
    "ConsumerInUse",
    "Fanout",
    "FanoutEvent",
    "Subscription",
    "epoch_millis",
    "event_from_response",
    "starting_position",
]
