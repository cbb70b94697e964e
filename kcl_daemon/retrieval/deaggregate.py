"""KPL de-aggregation (contract §1.12) through ``aws_kinesis_agg``, with the library's silent failures shown.

The library (``iter_deaggregate_records``) splits aggregates; this wrapper adds what it lacks:

* **Undecodable aggregates are counted.** A record with the KPL magic prefix whose checksum is wrong,
  that is too short, or whose protobuf does not parse comes back from the library as one undecoded
  record. That is also the Java behaviour (the record is delivered whole, sub-sequence 0), but silently;
  here it is counted (``stats.undecodable``) and logged with its sequence number and size only.
* **Bad table indexes never reach the library.** A sub-record whose partition-key or explicit-hash-key
  index points outside its table makes the library print the whole aggregate, payload included, to
  stderr and stop. We check first: the sub-records before the bad one are delivered (as Java does),
  the rest are dropped, counted (``stats.partial``) and logged without payloads.
* **Explicit hash keys are read correctly.** The library gives every sub-record the first explicit
  hash key once any sub-record has one (it does not check ``HasField``); we read them from the
  protobuf ourselves.
* **Hash-range filtering.** Each user record's effective hash key (its explicit hash key, else the MD5
  of its UTF-8 partition key as a 128-bit big-endian integer) must lie in the shard's hash range; if
  one does not, the whole aggregate is dropped (Java ``AggregatorUtil``: duplicates a KPL aggregate
  can carry across a reshard) and counted.

Plain records pass through with sub-sequence number 0. A record whose payload is still the base64 text
of the GetRecords response (:class:`~kcl_daemon.aws.records_page.EncodedRawRecord`) and that cannot be
an aggregate (its text does not start with the magic's base64, ``84maw``) becomes a
:class:`kcl_protocol.EncodedRecord` without being decoded; only possible aggregates are decoded.
:meth:`Deaggregator.columns` gives the same records as a :class:`kcl_protocol.RecordColumns` batch, and
hands a page read in columns on unchanged when no payload in it can be an aggregate. Never logs
payloads.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final, Protocol

import aws_kinesis_agg
from aws_kinesis_agg import deaggregator

from kcl_daemon.aws.kinesis import AnyRawRecord, RawRecord
from kcl_daemon.aws.records_page import EncodedRawRecord, PageRecords
from kcl_daemon.core.leases.lease import MAX_HASH_KEY
from kcl_daemon.core.shards.hash_keys import effective_hash_key
from kcl_protocol import AnyRecord, EncodedRecord, Record, RecordColumns
from kcl_protocol.columns import JOIN_SEPARATOR

logger = logging.getLogger(__name__)

MAGIC: Final[bytes] = aws_kinesis_agg.MAGIC
DIGEST_SIZE: Final[int] = aws_kinesis_agg.DIGEST_SIZE
#: Every base64 text of a payload that starts with MAGIC starts with this (its first 3 bytes, 6 more bits).
MAGIC_B64_PREFIX: Final[str] = base64.b64encode(MAGIC).decode("ascii")[:5]
# The library's generated module imports its sibling ``config_pb2`` as a top-level module, which works
# only after ``deaggregator`` has put the package directory on sys.path: take it from there.
messages_pb2: Final[ModuleType] = deaggregator.messages_pb2
# protobuf ships no type stubs here; the library raises (and itself catches) exactly this class.
_DecodeError: Final[type[Exception]] = importlib.import_module("google.protobuf.message").DecodeError


@dataclass(slots=True)
class DeaggregationStats:
    aggregates: int = 0  # Kinesis records that were KPL aggregates
    user_records: int = 0  # user records taken out of aggregates (before range filtering)
    undecodable: int = 0  # magic prefix but bad checksum/size/protobuf: delivered undecoded
    partial: int = 0  # aggregates cut short at a bad partition/explicit-hash-key index
    out_of_range_aggregates: int = 0  # aggregates dropped: a user record outside the shard's hash range
    out_of_range_records: int = 0  # user records dropped with them


class _PackedRecord(Protocol):
    """One sub-record of the KPL's ``AggregatedRecord`` protobuf (what this module reads of it)."""

    partition_key_index: int
    explicit_hash_key_index: int
    data: bytes

    def HasField(self, name: str) -> bool: ...


class _Aggregate(Protocol):
    """The KPL's ``AggregatedRecord`` protobuf (the library ships no types)."""

    partition_key_table: Sequence[str]
    explicit_hash_key_table: Sequence[str]
    records: Sequence[_PackedRecord]

    def ParseFromString(self, data: bytes) -> int: ...


@dataclass(frozen=True, slots=True)
class _SubRecord:
    data: bytes
    partition_key: str
    explicit_hash_key: int | None


def _parse_aggregate(data: bytes) -> tuple[_Aggregate | None, str | None]:
    """(AggregatedRecord, None) for a well-formed aggregate, else (None, why not). ``data`` has the magic."""
    body = data[len(MAGIC) :]
    if len(body) <= DIGEST_SIZE:
        return None, "it is too short to be an aggregate"
    message, digest = body[:-DIGEST_SIZE], body[-DIGEST_SIZE:]
    if hashlib.md5(message, usedforsecurity=False).digest() != digest:  # the KPL format's checksum
        return None, "its MD5 checksum does not match"
    aggregate: _Aggregate = messages_pb2.AggregatedRecord()
    try:
        aggregate.ParseFromString(message)
    except _DecodeError:
        return None, "its protobuf does not parse"
    return aggregate, None


def _sub_records(aggregate: _Aggregate) -> tuple[list[_SubRecord], int | None]:
    """Every sub-record up to the first one with a bad table index (returned as the second item)."""
    keys = list(aggregate.partition_key_table)
    hash_keys = list(aggregate.explicit_hash_key_table)
    subs: list[_SubRecord] = []
    for index, sub in enumerate(aggregate.records):
        if sub.partition_key_index >= len(keys):
            return subs, index
        explicit: int | None = None
        if sub.HasField("explicit_hash_key_index"):
            if sub.explicit_hash_key_index >= len(hash_keys):
                return subs, index
            try:
                explicit = int(hash_keys[sub.explicit_hash_key_index])
            except ValueError:
                return subs, index
        subs.append(_SubRecord(bytes(sub.data), str(keys[sub.partition_key_index]), explicit))
    return subs, None


def _library_split(raw: RawRecord) -> list[dict[str, Any]]:
    shaped = {
        "SequenceNumber": raw.sequence_number,
        "PartitionKey": raw.partition_key,
        "ApproximateArrivalTimestamp": raw.approximate_arrival_timestamp,
        "Data": raw.data,
    }
    return [
        record["kinesis"] for record in deaggregator.iter_deaggregate_records([shaped], data_format="Boto3")
    ]


def _decoded(raw: AnyRawRecord) -> RawRecord:
    if type(raw) is EncodedRawRecord:
        return RawRecord(raw.data, raw.partition_key, raw.sequence_number, raw.approximate_arrival_timestamp)
    return raw  # type: ignore[return-value]


class Deaggregator:
    """Turns one shard's Kinesis records into user records; ``stats`` counts what happened."""

    def __init__(
        self, shard_id: str, starting_hash_key: int = 0, ending_hash_key: int = MAX_HASH_KEY
    ) -> None:
        self.shard_id = shard_id
        self.starting_hash_key = starting_hash_key
        self.ending_hash_key = ending_hash_key
        self.stats = DeaggregationStats()

    def deaggregate(self, records: Iterable[AnyRawRecord]) -> list[AnyRecord]:
        out: list[AnyRecord] = []
        for raw in records:
            if type(raw) is EncodedRawRecord:
                if not raw.data_b64.startswith(MAGIC_B64_PREFIX):
                    out.append(
                        EncodedRecord(
                            raw.data_b64,
                            raw.partition_key,
                            raw.sequence_number,
                            0,
                            raw.approximate_arrival_timestamp,
                        )
                    )
                    continue
                raw = RawRecord(
                    raw.data, raw.partition_key, raw.sequence_number, raw.approximate_arrival_timestamp
                )
            out.extend(record for record, _ in self._one(raw))  # type: ignore[arg-type]
        return out

    def columns(self, records: Sequence[AnyRawRecord]) -> RecordColumns:
        """:meth:`deaggregate` as a :class:`~kcl_protocol.RecordColumns` batch. A page held in columns
        none of whose payloads can be an aggregate (one search of the joined base64 texts for the
        magic's) is handed on as it is: its lists become the batch's, nothing per record."""
        if type(records) is PageRecords:
            texts = records.data_b64
            joined = JOIN_SEPARATOR.join(texts)
            if not joined.startswith(MAGIC_B64_PREFIX) and JOIN_SEPARATOR + MAGIC_B64_PREFIX not in joined:
                return RecordColumns(
                    texts,
                    records.partition_keys,
                    records.sequence_numbers,
                    records.arrival_millis,
                    joined_b64=joined,
                )
        return RecordColumns.of(self.deaggregate(records))

    def deaggregate_with_hash_keys(self, records: Iterable[AnyRawRecord]) -> list[tuple[Record, int | None]]:
        """Like :meth:`deaggregate`, with each user record's explicit hash key (None: it has none); payloads
        come out decoded, whether or not the page kept them as base64."""
        return [pair for raw in records for pair in self._one(_decoded(raw))]

    def _plain(self, raw: RawRecord) -> Record:
        return Record(raw.data, raw.partition_key, raw.sequence_number, 0, raw.approximate_arrival_timestamp)

    def _one(self, raw: RawRecord) -> list[tuple[Record, int | None]]:
        if not raw.data.startswith(MAGIC):
            return [(self._plain(raw), None)]
        aggregate, problem = _parse_aggregate(raw.data)
        if aggregate is None:
            return [(self._undecodable(raw, problem or "it is not an aggregate"), None)]
        self.stats.aggregates += 1
        subs, bad_index = _sub_records(aggregate)
        if bad_index is None:
            subs = self._through_library(raw, subs)
        else:
            # The library would print the aggregate (payload included) to stderr here: do not call it.
            self.stats.partial += 1
            logger.error(
                "shard %s: KPL aggregate %s has a bad partition/explicit-hash-key index in sub-record %d "
                "of %d; delivering the %d sub-records before it",
                self.shard_id,
                raw.sequence_number,
                bad_index,
                len(aggregate.records),
                len(subs),
            )
        self.stats.user_records += len(subs)
        outside = [
            s
            for s in subs
            if not self.starting_hash_key
            <= effective_hash_key(s.partition_key, s.explicit_hash_key)
            <= self.ending_hash_key
        ]
        if outside:
            self.stats.out_of_range_aggregates += 1
            self.stats.out_of_range_records += len(subs)
            logger.info(
                "shard %s: dropping KPL aggregate %s (%d user records): %d of them hash outside the "
                "shard's range (a duplicate from before a reshard)",
                self.shard_id,
                raw.sequence_number,
                len(subs),
                len(outside),
            )
            return []
        return [
            (
                Record(s.data, s.partition_key, raw.sequence_number, sub, raw.approximate_arrival_timestamp),
                s.explicit_hash_key,
            )
            for sub, s in enumerate(subs)
        ]

    def _undecodable(self, raw: RawRecord, problem: str) -> Record:
        split = _library_split(raw)
        if len(split) != 1 or split[0].get("aggregated"):
            logger.error(
                "shard %s: aws_kinesis_agg split record %s although %s",
                self.shard_id,
                raw.sequence_number,
                problem,
            )
        self.stats.undecodable += 1
        logger.warning(
            "shard %s: record %s (%d bytes) starts with the KPL magic but %s; delivering it undecoded",
            self.shard_id,
            raw.sequence_number,
            len(raw.data),
            problem,
        )
        return self._plain(raw)

    def _through_library(self, raw: RawRecord, subs: list[_SubRecord]) -> list[_SubRecord]:
        """The library's split, with explicit hash keys from our own parse; ours if the two disagree."""
        split = _library_split(raw)
        agreed = len(split) == len(subs) and all(
            one.get("aggregated") and one.get("subSequenceNumber") == index for index, one in enumerate(split)
        )
        if not agreed:
            logger.error(
                "shard %s: aws_kinesis_agg returned %d records for aggregate %s of %d sub-records; "
                "using our own parse",
                self.shard_id,
                len(split),
                raw.sequence_number,
                len(subs),
            )
            return subs
        return [
            _SubRecord(base64.b64decode(one["data"]), str(one["partitionKey"]), sub.explicit_hash_key)
            for one, sub in zip(split, subs, strict=True)
        ]
