"""A batch of records held column by column, and its ``processRecords`` line written in one join.

A GetRecords page of 10,000 records used to become 10,000 record objects, then 10,000 dicts for the
JSON encoder, and its size was summed record by record. :class:`RecordColumns` keeps the page's own
strings instead - one list per wire field (payload as its padded base64 text, partition key, sequence
number, arrival in epoch ms, and the sub-sequence numbers only when one is not 0) - and
:func:`process_records_line` writes the line straight from those lists: the fixed text between the
fields is interleaved with them by list slicing and joined once, all in C, so no Python code runs per
record. The line is byte for byte what :func:`kcl_protocol.codec.encode_daemon_message` writes for the
same records as objects (key order, ``"action":"record"``, the integers as orjson writes them); a
field that would need escaping in JSON (a quote, a backslash, a control character) sends the whole
batch through that reference encoder instead.

Read as a sequence it gives :class:`~kcl_protocol.messages.EncodedRecord` objects, built on demand,
so code that looks at single records (the first and last of a batch, a record set aside) works
unchanged; slicing gives a :class:`RecordColumns` again.
"""

from __future__ import annotations

import binascii
from collections.abc import Iterable, Iterator, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Final, overload

import orjson

from kcl_protocol.messages import AnyRecord, EncodedRecord

#: Every byte a JSON string may hold as it is (UTF-8 included): all but the quote, the backslash and
#: the control characters. A field whose UTF-8 bytes are all in here is written without escaping.
_VERBATIM: Final = bytes(b for b in range(0x20, 0x100) if b not in b'"\\')
#: Joins a batch's payload texts: never a base64 character, never escaped in JSON, never padding.
JOIN_SEPARATOR: Final = "|"

if TYPE_CHECKING:  # slice is generic to type checkers only
    _Slice = slice[int | None, int | None, int | None]

_HEAD: Final = '{"action":"processRecords","records":['
_DATA: Final = '{"data":"'
_NEXT_DATA: Final = "," + _DATA
_KEY: Final = '","partitionKey":"'
_SEQUENCE: Final = '","sequenceNumber":"'
_ARRIVAL: Final = '","approximateArrivalTimestamp":'
_SUB: Final = ',"subSequenceNumber":'
_ZERO_SUB_END: Final = ',"subSequenceNumber":0,"action":"record"}'
_END: Final = ',"action":"record"}'


def _b64(data: bytes) -> str:
    return binascii.b2a_base64(data, newline=False).decode("ascii")


class RecordColumns(Sequence[EncodedRecord]):
    """User records as parallel lists of their wire fields (never copied: slices of the caller's lists
    may be shared). ``sub_sequence_numbers`` None means every record's is 0."""

    __slots__ = (
        "_joined_b64",
        "_payload_bytes",
        "_verbatim",
        "arrival_millis",
        "data_b64",
        "partition_keys",
        "sequence_numbers",
        "sub_sequence_numbers",
    )

    def __init__(
        self,
        data_b64: list[str],
        partition_keys: list[str],
        sequence_numbers: list[str],
        arrival_millis: list[int],
        sub_sequence_numbers: list[int] | None = None,
        *,
        joined_b64: str | None = None,
    ) -> None:
        """``joined_b64``: the payload texts already joined by :data:`JOIN_SEPARATOR` (a reader that
        searched them so hands its text on; else it is joined when first needed)."""
        count = len(data_b64)
        if not (
            len(partition_keys) == len(sequence_numbers) == len(arrival_millis) == count
            and (sub_sequence_numbers is None or len(sub_sequence_numbers) == count)
        ):
            raise ValueError("record columns must all have the same length")
        self.data_b64 = data_b64
        self.partition_keys = partition_keys
        self.sequence_numbers = sequence_numbers
        self.arrival_millis = arrival_millis
        self.sub_sequence_numbers = sub_sequence_numbers
        self._joined_b64 = joined_b64
        self._payload_bytes: int | None = None
        self._verbatim: bool | None = None

    @classmethod
    def of(cls, records: Iterable[AnyRecord]) -> RecordColumns:
        """The columns of ``records`` (payloads as bytes are base64-encoded once, here)."""
        data: list[str] = []
        keys: list[str] = []
        sequences: list[str] = []
        arrivals: list[int] = []
        subs: list[int] = []
        for record in records:
            data.append(record.data_b64 if type(record) is EncodedRecord else _b64(record.data))
            keys.append(record.partition_key)
            sequences.append(record.sequence_number)
            arrivals.append(record.approximate_arrival_timestamp)
            subs.append(record.sub_sequence_number)
        return cls(data, keys, sequences, arrivals, subs if any(subs) else None)

    # -- the sequence --------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.data_b64)

    @overload
    def __getitem__(self, index: int) -> EncodedRecord: ...

    @overload
    def __getitem__(self, index: _Slice) -> RecordColumns: ...

    def __getitem__(self, index: int | _Slice) -> EncodedRecord | RecordColumns:
        subs = self.sub_sequence_numbers
        if isinstance(index, slice):
            return RecordColumns(
                self.data_b64[index],
                self.partition_keys[index],
                self.sequence_numbers[index],
                self.arrival_millis[index],
                None if subs is None else subs[index],
            )
        return EncodedRecord(
            self.data_b64[index],
            self.partition_keys[index],
            self.sequence_numbers[index],
            0 if subs is None else subs[index],
            self.arrival_millis[index],
        )

    def __iter__(self) -> Iterator[EncodedRecord]:
        subs = self.sub_sequence_numbers
        return map(
            EncodedRecord,
            self.data_b64,
            self.partition_keys,
            self.sequence_numbers,
            repeat(0) if subs is None else subs,
            self.arrival_millis,
        )

    def __eq__(self, other: object) -> bool:
        """Equal to a sequence of the same records (as :class:`EncodedRecord` objects)."""
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RecordColumns({len(self)} records)"

    # -- what a batch needs to know ------------------------------------------------------------------

    @property
    def joined_b64(self) -> str:
        """The payload texts joined by :data:`JOIN_SEPARATOR`, once per batch (the byte size and the
        escaping check both read it). Raises TypeError if a payload is not text."""
        if self._joined_b64 is None:
            self._joined_b64 = JOIN_SEPARATOR.join(self.data_b64)
        return self._joined_b64

    @property
    def payload_bytes(self) -> int:
        """The payloads' total length in bytes, from their padded base64 text (nothing decoded)."""
        if self._payload_bytes is None:
            # Canonical base64 is a multiple of 4 characters, and '=' appears only as its padding.
            self._payload_bytes = sum(map(len, self.data_b64)) // 4 * 3 - self.joined_b64.count("=")
        return self._payload_bytes

    def verbatim(self) -> bool:
        """Whether every text field can be written into JSON as it is (no character needs escaping)."""
        if self._verbatim is None:
            try:
                text = self.joined_b64 + "".join(self.partition_keys) + "".join(self.sequence_numbers)
                self._verbatim = not text.encode("utf-8").translate(None, _VERBATIM)
            except (TypeError, UnicodeEncodeError):  # not text, or lone surrogates: the encoder decides
                self._verbatim = False
        return self._verbatim


def payload_bytes(records: Sequence[AnyRecord]) -> int:
    """The payload bytes of a batch, whichever way it holds its records (nothing is decoded)."""
    if type(records) is RecordColumns:
        return records.payload_bytes
    return sum(record.size for record in records)


def _numbers(values: list[int]) -> list[str]:
    """Each integer as orjson writes it (one call for the whole list; raises as orjson does)."""
    text = orjson.dumps(values).decode("ascii")
    return text[1:-1].split(",")


def process_records_line(records: RecordColumns, millis_behind_latest: int | None) -> bytes | None:
    """The ``processRecords`` line (with its ``\\n``) for ``records``; None when a field needs escaping
    (the caller then encodes the records one by one)."""
    count = len(records)
    tail = '],"millisBehindLatest":' + orjson.dumps(millis_behind_latest).decode("ascii") + "}\n"
    if not count:
        return (_HEAD + tail).encode("utf-8")
    if not records.verbatim():
        return None
    subs = records.sub_sequence_numbers
    width = 9 if subs is None else 11
    parts: list[str] = [_NEXT_DATA] * (count * width)  # every slot is overwritten but the openers
    parts[1::width] = records.data_b64
    parts[2::width] = [_KEY] * count
    parts[3::width] = records.partition_keys
    parts[4::width] = [_SEQUENCE] * count
    parts[5::width] = records.sequence_numbers
    parts[6::width] = [_ARRIVAL] * count
    parts[7::width] = _numbers(records.arrival_millis)
    if subs is None:
        parts[8::width] = [_ZERO_SUB_END] * count
    else:
        parts[8::width] = [_SUB] * count
        parts[9::width] = _numbers(subs)
        parts[10::width] = [_END] * count
    parts[0] = _HEAD + _DATA
    parts.append(tail)
    return "".join(parts).encode("utf-8")
