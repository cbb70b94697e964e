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
* :func:`parse_page` turns the body into a :class:`RecordsPage` of :class:`EncodedRawRecord`, whose
  payload stays the base64 text Kinesis sent; the de-aggregator decodes only KPL aggregates.
"""

from __future__ import annotations

import binascii
import contextlib
import math
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Final, NamedTuple

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


@dataclass(frozen=True, slots=True)
class RecordsPage:
    records: tuple[EncodedRawRecord, ...]
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


def parse_page(body: bytes) -> RecordsPage:
    """The GetRecords response body as a page. Raises ValueError/KeyError/TypeError when malformed."""
    obj = orjson.loads(body)
    if not isinstance(obj, dict):
        raise TypeError("the GetRecords response is not a JSON object")
    records: list[EncodedRawRecord] = []
    seen: dict[float, int] = {}
    for r in obj.get("Records") or ():
        data, key, sequence = r["Data"], r["PartitionKey"], r["SequenceNumber"]
        if type(data) is not str or type(key) is not str or type(sequence) is not str:
            raise TypeError("Data, PartitionKey and SequenceNumber must be strings")
        arrival = r.get("ApproximateArrivalTimestamp")
        if type(arrival) is float:  # records put together share their stamp: convert each one once
            millis = seen.get(arrival)
            if millis is None:
                millis = seen[arrival] = _millis_of_seconds(arrival)
        else:
            millis = epoch_millis_of(arrival)
        records.append(EncodedRawRecord(data, key, sequence, millis))
    behind = obj.get("MillisBehindLatest")
    return RecordsPage(
        records=tuple(records),
        next_iterator=obj.get("NextShardIterator") or None,
        millis_behind_latest=None if behind is None else int(behind),
        child_shards=tuple(_child(c) for c in obj.get("ChildShards") or ()),
    )
