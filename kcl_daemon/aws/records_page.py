"""GetRecords without botocore's response parsing: the raw JSON body, parsed with orjson.

Profiling showed botocore's parsing of a GetRecords page to be most of the daemon's CPU: for every
record it base64-decodes ``Data`` and builds a timezone-aware ``datetime`` (through dateutil) for
``ApproximateArrivalTimestamp``, which the daemon then turns back into epoch milliseconds, and the
protocol needs the payload in base64 again. This module keeps boto3 as the client (signing, endpoints,
credentials, connection pooling and error parsing stay botocore's) and only takes over the parse of a
*successful* GetRecords response:

* :func:`install` registers a ``before-parse.kinesis.GetRecords`` handler on one client. While
  :func:`raw_body` is active in the calling thread, the handler moves a 2xx body aside (into the
  parsed response under :data:`RAW_BODY_KEY`) and hands botocore an empty object to parse. Error
  responses (status >= 300) are left to botocore, so errors map exactly as before. Outside
  :func:`raw_body` (any other caller of the same client) nothing changes.
* :func:`parse_page` turns the body into a :class:`RecordsPage` whose records are held column by
  column (:class:`PageRecords`: no object per record), payloads still the base64 text Kinesis sent;
  the de-aggregator decodes only KPL aggregates.
"""

from __future__ import annotations

import binascii
import contextlib
import math
import operator
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import repeat
from typing import TYPE_CHECKING, Any, Final, NamedTuple, overload

import orjson

from kcl_daemon.core.shards.graph import ChildShard

if TYPE_CHECKING:
    from mypy_boto3_kinesis import KinesisClient

#: Where the handler puts the raw body in the parsed response.
RAW_BODY_KEY: Final = "kclDaemonRawBody"
_EVENT: Final = "before-parse.kinesis.GetRecords"
_ACTIVE = threading.local()


class EncodedRawRecord(NamedTuple):
    """One Kinesis record as GetRecords returns it, its payload still the base64 text of the response.

    A named tuple, not a dataclass: a page builds thousands of them, and a tuple is built in half the
    time of a frozen dataclass."""

    data_b64: str
    partition_key: str
    sequence_number: str
    approximate_arrival_timestamp: int  # epoch milliseconds

    @property
    def data(self) -> bytes:
        return binascii.a2b_base64(self.data_b64)


class PageRecords(Sequence[EncodedRawRecord]):
    """A page's records column by column, as the page parsed them (no object per record): a sequence
    of :class:`EncodedRawRecord` built on demand for readers that want single records; the polling
    reader hands the columns on as they are (:meth:`kcl_daemon.retrieval.deaggregate.Deaggregator.columns`).
    """

    __slots__ = ("arrival_millis", "data_b64", "partition_keys", "sequence_numbers")

    def __init__(
        self,
        data_b64: list[str],
        partition_keys: list[str],
        sequence_numbers: list[str],
        arrival_millis: list[int],
    ) -> None:
        self.data_b64 = data_b64
        self.partition_keys = partition_keys
        self.sequence_numbers = sequence_numbers
        self.arrival_millis = arrival_millis

    @classmethod
    def of(cls, records: Iterable[EncodedRawRecord]) -> PageRecords:
        rows = list(records)
        return cls(
            [r.data_b64 for r in rows],
            [r.partition_key for r in rows],
            [r.sequence_number for r in rows],
            [r.approximate_arrival_timestamp for r in rows],
        )

    def __len__(self) -> int:
        return len(self.sequence_numbers)

    @overload
    def __getitem__(self, index: int) -> EncodedRawRecord: ...

    @overload
    def __getitem__(self, index: slice) -> PageRecords: ...

    def __getitem__(self, index: int | slice) -> EncodedRawRecord | PageRecords:
        if isinstance(index, slice):
            return PageRecords(
                self.data_b64[index],
                self.partition_keys[index],
                self.sequence_numbers[index],
                self.arrival_millis[index],
            )
        return EncodedRawRecord(
            self.data_b64[index],
            self.partition_keys[index],
            self.sequence_numbers[index],
            self.arrival_millis[index],
        )

    def __iter__(self) -> Iterator[EncodedRawRecord]:
        return map(
            EncodedRawRecord, self.data_b64, self.partition_keys, self.sequence_numbers, self.arrival_millis
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PageRecords({len(self)} records)"


@dataclass(frozen=True, slots=True)
class RecordsPage:
    records: PageRecords
    next_iterator: str | None
    millis_behind_latest: int | None
    child_shards: tuple[ChildShard, ...]


def _move_body_aside(
    response_dict: dict[str, Any], customized_response_dict: dict[str, Any], **_: Any
) -> None:
    if not getattr(_ACTIVE, "on", False) or response_dict.get("status_code", 500) >= 300:
        return
    body = response_dict.get("body")
    if isinstance(body, bytes | bytearray):
        customized_response_dict[RAW_BODY_KEY] = bytes(body)
        response_dict["body"] = b"{}"


def install(client: KinesisClient) -> None:
    """Let :func:`raw_body` calls on ``client`` return GetRecords bodies unparsed (idempotent)."""
    events = client.meta.events
    events.unregister(_EVENT, unique_id="kcl-daemon-raw-get-records")
    events.register(_EVENT, _move_body_aside, unique_id="kcl-daemon-raw-get-records")


@contextlib.contextmanager
def raw_body() -> Iterator[None]:
    """Within this block (this thread only), GetRecords on an installed client returns the raw body."""
    previous = getattr(_ACTIVE, "on", False)
    _ACTIVE.on = True
    try:
        yield
    finally:
        _ACTIVE.on = previous


def _millis_of_seconds(seconds: float) -> int:
    """Epoch seconds as epoch milliseconds exactly as botocore's ``datetime`` gets there: the fraction
    rounded half-even to the microsecond on its own (``datetime.fromtimestamp``), then floored to the ms.
    ``round(seconds * 1e6)`` differs from it by one in rare cases (the product rounds in binary)."""
    fraction, whole = math.modf(seconds)
    micros = round(fraction * 1e6)
    return (int(whole) * 1_000_000 + micros) // 1000


def epoch_millis_of(value: object) -> int:
    """``ApproximateArrivalTimestamp`` (epoch seconds as a JSON number, as the JSON protocol sends it)
    as epoch milliseconds, rounded to the microsecond first as botocore's ``datetime`` does."""
    if value is None:
        return 0
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _millis_of_seconds(float(value))
    if isinstance(value, str):
        try:
            return epoch_millis_of(float(value))
        except ValueError:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            return round(moment.timestamp() * 1_000_000) // 1000
    raise ValueError(f"ApproximateArrivalTimestamp is neither a number nor a string: {value!r}")


def _child(child: Mapping[str, Any]) -> ChildShard:
    hash_range = child["HashKeyRange"]
    return ChildShard(
        shard_id=child["ShardId"],
        parent_shard_ids=tuple(child.get("ParentShards", ())),
        starting_hash_key=int(hash_range["StartingHashKey"]),
        ending_hash_key=int(hash_range["EndingHashKey"]),
    )


_DATA = operator.itemgetter("Data")
_KEY = operator.itemgetter("PartitionKey")
_SEQUENCE = operator.itemgetter("SequenceNumber")
_ARRIVAL_TYPES: Final = frozenset({float, int, str, type(None)})


def _arrivals_in_millis(stamps: list[Any]) -> list[int]:
    """``ApproximateArrivalTimestamp`` of every record in epoch ms, each distinct stamp converted once
    (records put together share theirs)."""
    if not set(map(type, stamps)) <= _ARRIVAL_TYPES:  # a bool, a list...: let the converter say what
        return [epoch_millis_of(stamp) for stamp in stamps]
    table = {stamp: epoch_millis_of(stamp) for stamp in set(stamps)}
    return list(map(table.__getitem__, stamps))


def parse_page(body: bytes) -> RecordsPage:
    """The GetRecords response body as a page. Raises ValueError/KeyError/TypeError when malformed.

    No code runs per record: each field is taken out of the parsed records by ``map`` into a column,
    and joining a column checks that its fields are strings."""
    obj = orjson.loads(body)
    if not isinstance(obj, dict):
        raise TypeError("the GetRecords response is not a JSON object")
    raw = obj.get("Records") or ()
    data, keys, sequences = list(map(_DATA, raw)), list(map(_KEY, raw)), list(map(_SEQUENCE, raw))
    for column in (data, keys, sequences):
        try:
            "".join(column)
        except TypeError:
            raise TypeError("Data, PartitionKey and SequenceNumber must be strings") from None
    arrivals = _arrivals_in_millis(list(map(dict.get, raw, repeat("ApproximateArrivalTimestamp"))))
    behind = obj.get("MillisBehindLatest")
    return RecordsPage(
        records=PageRecords(data, keys, sequences, arrivals),
        next_iterator=obj.get("NextShardIterator") or None,
        millis_behind_latest=None if behind is None else int(behind),
        child_shards=tuple(_child(c) for c in obj.get("ChildShards") or ()),
    )
