"""Kinesis data-plane and control-plane calls the daemon needs: ListShards (contract §6.2, §6.3),
GetShardIterator and GetRecords (contract §7), and PutRecords for the Spark sink. Results are plain
frozen dataclasses; no boto3 shape leaks.

GetRecords and GetShardIterator go over the lean request path (:mod:`kcl_daemon.aws.lean`) when the
client's settings allow it, and over botocore otherwise; the errors are the same either way. The lean
path also serves them on the event loop (``get_records_async``, ``get_shard_iterator_async``), which the
polling readers await directly where ``reads_async`` says they can.

For GetShardIterator and GetRecords, ``ResourceNotFoundException`` (shard or stream gone) raises
:class:`ShardNotFound` - shard end without children (contract §6.6) - and ``ExpiredIteratorException``
raises :class:`IteratorExpired`. ``InvalidArgumentException`` from GetRecords also raises
:class:`IteratorExpired`: the iterator is GetRecords' only argument besides ``Limit`` (which the caller
keeps within 1..10000), so the Java KCL's answer - get a new iterator - is the right one (contract §7).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final, NotRequired, TypedDict, cast

import orjson

from kcl_daemon.aws import records_page
from kcl_daemon.aws.errors import IncompleteResponse, map_aws_errors
from kcl_daemon.aws.lean.client import LeanJsonClient, lean_client_for
from kcl_daemon.aws.records_page import EncodedRawRecord
from kcl_daemon.core.shards.graph import ChildShard, Shard
from kcl_daemon.core.shards.iterator import IteratorPosition
from kcl_daemon.core.spark.puts import MAX_ENTRIES_PER_CALL, EntryResult
from kcl_daemon.errors import AwsError, InconsistentResponse, IteratorExpired, ShardNotFound

if TYPE_CHECKING:
    from mypy_boto3_kinesis import KinesisClient
    from mypy_boto3_kinesis.literals import ShardFilterTypeType, ShardIteratorTypeType
    from mypy_boto3_kinesis.type_defs import (
        ChildShardTypeDef,
        ListShardsInputTypeDef,
        PutRecordsRequestEntryTypeDef,
        RecordTypeDef,
        ShardFilterTypeDef,
        ShardTypeDef,
    )


class ShardFilterType(enum.StrEnum):
    AT_LATEST = "AT_LATEST"
    AT_TRIM_HORIZON = "AT_TRIM_HORIZON"
    AT_TIMESTAMP = "AT_TIMESTAMP"
    AFTER_SHARD_ID = "AFTER_SHARD_ID"
    FROM_TRIM_HORIZON = "FROM_TRIM_HORIZON"
    FROM_TIMESTAMP = "FROM_TIMESTAMP"


@dataclass(frozen=True, slots=True)
class ShardFilter:
    """The ListShards filter: ``timestamp`` for the *_TIMESTAMP types, ``shard_id`` for AFTER_SHARD_ID."""

    type: ShardFilterType
    timestamp: datetime | None = None
    shard_id: str | None = None

    def to_request(self) -> ShardFilterTypeDef:
        request: ShardFilterTypeDef = {"Type": cast("ShardFilterTypeType", str(self.type))}
        if self.timestamp is not None:
            request["Timestamp"] = self.timestamp
        if self.shard_id is not None:
            request["ShardId"] = self.shard_id
        return request


def shard_from_response(shard: ShardTypeDef) -> Shard:
    hash_range = shard["HashKeyRange"]
    sequence_range = shard["SequenceNumberRange"]
    ending = sequence_range.get("EndingSequenceNumber")
    return Shard(
        shard_id=shard["ShardId"],
        parent_shard_id=shard.get("ParentShardId"),
        adjacent_parent_shard_id=shard.get("AdjacentParentShardId"),
        starting_hash_key=int(hash_range["StartingHashKey"]),
        ending_hash_key=int(hash_range["EndingHashKey"]),
        starting_sequence_number=int(sequence_range["StartingSequenceNumber"]),
        ending_sequence_number=None if ending is None else int(ending),
    )


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One Kinesis record as GetRecords returns it (possibly a KPL aggregate)."""

    data: bytes
    partition_key: str
    sequence_number: str
    approximate_arrival_timestamp: int  # epoch milliseconds


#: A record from GetRecords: decoded by botocore, or (the raw path) its payload still base64 text.
AnyRawRecord = RawRecord | EncodedRawRecord


@dataclass(frozen=True, slots=True)
class GetRecordsResult:
    #: a tuple, or the page's columns (:class:`~kcl_daemon.aws.records_page.PageRecords`) on the raw path
    records: Sequence[AnyRawRecord]
    next_iterator: str | None  # None: the shard is closed and read to its end (or the response is bad)
    millis_behind_latest: int | None
    child_shards: tuple[ChildShard, ...]


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS: Final = timedelta(milliseconds=1)
_READ_ERRORS: Final = {"ResourceNotFoundException": ShardNotFound}
_GET_RECORDS_ERRORS: Final = {**_READ_ERRORS, "InvalidArgumentException": IteratorExpired}


def epoch_millis(value: datetime | float | None) -> int:
    """A timestamp as epoch milliseconds (naive = UTC); a missing one is 0.

    A number is epoch seconds as the service sent it (the Spark source's clients keep them so).
    """
    if value is None:
        return 0
    if isinstance(value, int | float):
        return round(value * 1000)
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return (value - _EPOCH) // _ONE_MS


def record_from_response(record: RecordTypeDef) -> RawRecord:
    return RawRecord(
        data=bytes(record["Data"]),
        partition_key=record["PartitionKey"],
        sequence_number=record["SequenceNumber"],
        approximate_arrival_timestamp=epoch_millis(record.get("ApproximateArrivalTimestamp")),
    )


def child_shard_from_response(child: ChildShardTypeDef) -> ChildShard:
    hash_range = child["HashKeyRange"]
    return ChildShard(
        shard_id=child["ShardId"],
        parent_shard_ids=tuple(child.get("ParentShards", ())),
        starting_hash_key=int(hash_range["StartingHashKey"]),
        ending_hash_key=int(hash_range["EndingHashKey"]),
    )


class IteratorArguments(TypedDict):
    """GetShardIterator's arguments but the stream and the shard."""

    ShardIteratorType: ShardIteratorTypeType
    StartingSequenceNumber: NotRequired[str]
    Timestamp: NotRequired[datetime]


def iterator_request(position: IteratorPosition) -> IteratorArguments:
    """The GetShardIterator arguments for ``position`` (without stream and shard)."""
    request: IteratorArguments = {"ShardIteratorType": cast("ShardIteratorTypeType", str(position.type))}
    if position.sequence_number is not None:
        request["StartingSequenceNumber"] = position.sequence_number
    if position.timestamp is not None:
        request["Timestamp"] = position.timestamp
    return request


def _iterator_from(what: str, body: bytes) -> str:
    """GetShardIterator's reply body on the lean path: the iterator."""
    try:
        iterator = orjson.loads(body).get("ShardIterator")
    except (ValueError, AttributeError) as exc:  # not a JSON object: as guard_responses says
        raise IncompleteResponse(error="a reply that is not a JSON object") from exc
    if not iterator or not isinstance(iterator, str):
        raise AwsError(f"{what}: the response has no ShardIterator")
    return iterator


def _page_from(what: str, body: bytes) -> GetRecordsResult:
    """GetRecords' reply body, parsed by :mod:`kcl_daemon.aws.records_page`."""
    try:
        page = records_page.parse_page(body)
    except (KeyError, ValueError, TypeError) as exc:  # a body cut short or garbled: read again
        raise InconsistentResponse(f"{what}: malformed response: {exc!r}") from exc
    return GetRecordsResult(page.records, page.next_iterator, page.millis_behind_latest, page.child_shards)


class Kinesis:
    """Synchronous Kinesis adapter over one boto3 client (thread-safe).

    With ``raw_get_records`` (the default) GetRecords responses are parsed by
    :mod:`kcl_daemon.aws.records_page` instead of botocore, and payloads stay base64 text. With ``lean``
    as well (the default), GetRecords and GetShardIterator skip botocore (:mod:`kcl_daemon.aws.lean`)
    when the client's settings allow it.
    """

    def __init__(self, client: KinesisClient, *, raw_get_records: bool = True, lean: bool = True) -> None:
        self._client = client
        self._raw = raw_get_records
        self._lean: LeanJsonClient | None = None
        if raw_get_records:
            records_page.install(client)
            if lean:
                self._lean = lean_client_for(client)

    @property
    def lean(self) -> bool:
        """Whether GetRecords and GetShardIterator take the lean request path."""
        return self._lean is not None

    def list_shards(self, stream_name: str, shard_filter: ShardFilter | None = None) -> list[Shard]:
        """Every shard ListShards returns, following ``NextToken`` (follow-up pages carry only the token).

        ``MaxResults`` is never set: the default page is 10000 shards, and moto's paging is broken.
        A missing stream raises :class:`DependencyUnavailable`.
        """
        what = f"list shards of stream {stream_name}"
        request: ListShardsInputTypeDef = {"StreamName": stream_name}
        if shard_filter is not None:
            request["ShardFilter"] = shard_filter.to_request()
        shards: list[Shard] = []
        while True:
            with map_aws_errors(what):
                page = self._client.list_shards(**request)
            try:
                shards.extend(shard_from_response(shard) for shard in page.get("Shards", []))
            except (KeyError, ValueError) as exc:
                raise AwsError(f"{what}: malformed shard in the response: {exc!r}") from exc
            token = page.get("NextToken")
            if not token:
                return shards
            request = {"NextToken": token}

    def get_shard_iterator(self, stream_name: str, shard_id: str, position: IteratorPosition) -> str:
        """A shard iterator at ``position``. A missing shard or stream raises :class:`ShardNotFound`."""
        what = f"get {position} iterator for {stream_name}/{shard_id}"
        if self._lean is not None and position.timestamp is None and self._lean.usable():
            return self._lean_shard_iterator(what, stream_name, shard_id, position)
        with map_aws_errors(what, _READ_ERRORS):
            response = self._client.get_shard_iterator(
                StreamName=stream_name, ShardId=shard_id, **iterator_request(position)
            )
        iterator = response.get("ShardIterator")
        if not iterator:
            raise AwsError(f"{what}: the response has no ShardIterator")
        return iterator

    def _lean_shard_iterator(
        self, what: str, stream_name: str, shard_id: str, position: IteratorPosition
    ) -> str:
        """GetShardIterator on the lean path (a timestamp position stays on botocore's serialiser)."""
        assert self._lean is not None
        request = {"StreamName": stream_name, "ShardId": shard_id, **iterator_request(position)}
        with map_aws_errors(what, _READ_ERRORS):
            return _iterator_from(what, self._lean.call("GetShardIterator", orjson.dumps(request)))

    def reads_async(self, position: IteratorPosition | None = None) -> bool:
        """Whether :meth:`get_records_async` (and, for ``position``, :meth:`get_shard_iterator_async`)
        can serve now: the lean path is on and no botocore ``Stubber`` answers for the client. When
        False, the caller runs the synchronous methods on a thread."""
        lean = self._lean
        return lean is not None and lean.usable() and (position is None or position.timestamp is None)

    async def get_shard_iterator_async(
        self, stream_name: str, shard_id: str, position: IteratorPosition
    ) -> str:
        """:meth:`get_shard_iterator` on the event loop (only where :meth:`reads_async` says so)."""
        assert self._lean is not None
        assert position.timestamp is None
        what = f"get {position} iterator for {stream_name}/{shard_id}"
        request = {"StreamName": stream_name, "ShardId": shard_id, **iterator_request(position)}
        with map_aws_errors(what, _READ_ERRORS):
            body = await self._lean.call_async("GetShardIterator", orjson.dumps(request))
            return _iterator_from(what, body)

    async def get_records_async(self, iterator: str, limit: int) -> GetRecordsResult:
        """:meth:`get_records` on the event loop (only where :meth:`reads_async` says so)."""
        assert self._lean is not None
        request = orjson.dumps({"ShardIterator": iterator, "Limit": limit})
        with map_aws_errors("get records", _GET_RECORDS_ERRORS):
            body = await self._lean.call_async("GetRecords", request)
        return _page_from("get records", body)

    def get_records(self, iterator: str, limit: int) -> GetRecordsResult:
        """One GetRecords call (``Limit`` = ``limit``, 1..10000).

        Raises :class:`IteratorExpired` for an expired or invalid iterator, :class:`ShardNotFound` when
        the shard or stream is gone, :class:`Throttled` when over the shard's read limits.
        """
        what = "get records"
        body: object = None
        with map_aws_errors(what, _GET_RECORDS_ERRORS):
            if self._lean is not None and self._lean.usable():
                request = orjson.dumps({"ShardIterator": iterator, "Limit": limit})
                body = self._lean.call("GetRecords", request)
            elif self._raw:
                with records_page.raw_body():
                    response = self._client.get_records(ShardIterator=iterator, Limit=limit)
                body = response.get(records_page.RAW_BODY_KEY)
            else:
                response = self._client.get_records(ShardIterator=iterator, Limit=limit)
        if isinstance(body, bytes):
            return _page_from(what, body)
        try:
            records = tuple(record_from_response(record) for record in response.get("Records", []))
            children = tuple(child_shard_from_response(c) for c in response.get("ChildShards") or ())
        except (KeyError, ValueError, TypeError) as exc:
            raise AwsError(f"{what}: malformed response: {exc!r}") from exc
        behind = response.get("MillisBehindLatest")
        return GetRecordsResult(
            records=records,
            next_iterator=response.get("NextShardIterator") or None,
            millis_behind_latest=None if behind is None else int(behind),
            child_shards=children,
        )

    def put_records(
        self, stream_name: str, entries: Sequence[tuple[bytes, str, str | None]]
    ) -> list[EntryResult]:
        """One PutRecords call of up to 500 ``(data, partition key, explicit hash key or None)``
        entries; one result per entry, in order (``error_code`` set on the entries that failed inside a
        successful call). A failure of the whole call raises the mapped :class:`AwsError`."""
        if len(entries) > MAX_ENTRIES_PER_CALL:
            raise ValueError(f"at most {MAX_ENTRIES_PER_CALL} entries per PutRecords, got {len(entries)}")
        request: list[PutRecordsRequestEntryTypeDef] = []
        for data, partition_key, explicit_hash_key in entries:
            entry: PutRecordsRequestEntryTypeDef = {"Data": data, "PartitionKey": partition_key}
            if explicit_hash_key is not None:
                entry["ExplicitHashKey"] = explicit_hash_key
            request.append(entry)
        with map_aws_errors(f"put records into stream {stream_name}"):
            response = self._client.put_records(StreamName=stream_name, Records=request)
        results = response.get("Records", [])
        if len(results) != len(entries):
            raise AwsError(
                f"put records into stream {stream_name}: {len(results)} results for {len(entries)} entries"
            )
        return [
            EntryResult(
                shard_id=result.get("ShardId"),
                sequence_number=result.get("SequenceNumber"),
                error_code=result.get("ErrorCode"),
                error_message=result.get("ErrorMessage"),
            )
            for result in results
        ]
