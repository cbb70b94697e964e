"""The Kinesis sink's decisions: which rows are valid, how they fill PutRecords calls, what to resend.

* :func:`check_columns`: the frame's columns against ``data`` / ``partitionKey`` / ``explicitHashKey``.
* :func:`entry_problem`: one row against the service's limits (partition key of 1 to 256 characters,
  data plus partition key at most 1 MiB, an explicit hash key a decimal in 0..2^128-1).
* :class:`CallFiller`: entries into calls of at most 500 entries and 5 MiB (data plus partition keys).
* :func:`retry_plan`: from a PutRecords response, the entries to send again (throttled, internal
  failure) and the ones that failed for good.
* :func:`misrouted`: a KPL aggregate that landed on a shard whose hash range does not hold every one of
  its user records (the shard map changed under the writer): readers drop such an aggregate whole, so
  its records must be sent again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from kcl_daemon.core.leases.lease import MAX_HASH_KEY
from kcl_daemon.core.shards.graph import Shard

MAX_ENTRIES_PER_CALL: Final = 500
MAX_BYTES_PER_CALL: Final = 5 * 1024 * 1024
MAX_RECORD_BYTES: Final = 1024 * 1024
MAX_PARTITION_KEY_CHARS: Final = 256
#: Per-entry error codes worth sending again; any other code (KMS access, a disabled key) fails the task.
RETRIABLE_CODES: Final = frozenset(
    {"ProvisionedThroughputExceededException", "InternalFailure", "KMSThrottlingException"}
)

DATA: Final = "data"
PARTITION_KEY: Final = "partitionKey"
EXPLICIT_HASH_KEY: Final = "explicitHashKey"


def check_columns(columns: Mapping[str, str]) -> list[str]:
    """Problems with a frame's columns (name -> Spark type name) for the sink; empty when it fits.

    ``data`` (binary or string) and ``partitionKey`` (string) are required, ``explicitHashKey``
    (string) is optional; any other column is a problem, so a misspelt column cannot drop data.
    """
    problems = []
    for name, wanted in ((DATA, ("binary", "string")), (PARTITION_KEY, ("string",))):
        kind = columns.get(name)
        if kind is None:
            problems.append(f"column {name!r} is required")
        elif kind not in wanted:
            problems.append(f"column {name!r} is {kind}, not {' or '.join(wanted)}")
    ehk = columns.get(EXPLICIT_HASH_KEY)
    if ehk is not None and ehk != "string":
        problems.append(f"column {EXPLICIT_HASH_KEY!r} is {ehk}, not string")
    extra = sorted(set(columns) - {DATA, PARTITION_KEY, EXPLICIT_HASH_KEY})
    if extra:
        problems.append(
            f"column(s) {', '.join(map(repr, extra))} are not written anywhere: select only "
            f"{DATA}, {PARTITION_KEY} and optionally {EXPLICIT_HASH_KEY}"
        )
    return problems


def entry_size(data: bytes, partition_key: str) -> int:
    """What an entry counts against the record and call limits: its data plus its partition key."""
    return len(data) + len(partition_key.encode("utf-8"))


def entry_problem(data: bytes | None, partition_key: str | None, explicit_hash_key: str | None) -> str | None:
    """Why this row cannot be sent (None when it can)."""
    if data is None:
        return "data is null"
    if partition_key is None or not 1 <= len(partition_key) <= MAX_PARTITION_KEY_CHARS:
        return f"partitionKey must have 1 to {MAX_PARTITION_KEY_CHARS} characters"
    size = entry_size(data, partition_key)
    if size > MAX_RECORD_BYTES:
        return f"data and partitionKey are {size} bytes, over the {MAX_RECORD_BYTES}-byte record limit"
    if explicit_hash_key is not None and (
        not explicit_hash_key.isdigit() or not 0 <= int(explicit_hash_key) <= MAX_HASH_KEY
    ):
        return "explicitHashKey must be a decimal integer in 0..2^128-1"
    return None


class CallFiller:
    """Decides when the entries collected so far make a full PutRecords call.

    ``fits(size)`` says whether one more entry of ``size`` bytes joins the current call; if not, the
    caller sends the call and starts a new one with that entry (:meth:`reset`).
    """

    def __init__(self, max_entries: int = MAX_ENTRIES_PER_CALL, max_bytes: int = MAX_BYTES_PER_CALL) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.entries = 0
        self.bytes = 0

    def fits(self, size: int) -> bool:
        return self.entries < self.max_entries and self.bytes + size <= self.max_bytes

    def add(self, size: int) -> None:
        self.entries += 1
        self.bytes += size

    @property
    def full(self) -> bool:
        return self.entries >= self.max_entries

    def reset(self) -> None:
        self.entries = 0
        self.bytes = 0


def calls_for(
    sizes: Sequence[int], max_entries: int = MAX_ENTRIES_PER_CALL, max_bytes: int = MAX_BYTES_PER_CALL
) -> list[range]:
    """The entries (by index, in order) of each PutRecords call for entries of these sizes."""
    filler = CallFiller(max_entries, max_bytes)
    calls: list[range] = []
    first = 0
    for index, size in enumerate(sizes):
        if not filler.fits(size) and filler.entries:
            calls.append(range(first, index))
            filler.reset()
            first = index
        filler.add(size)
    if filler.entries:
        calls.append(range(first, len(sizes)))
    return calls


@dataclass(frozen=True, slots=True)
class EntryResult:
    """One entry of a PutRecords response."""

    shard_id: str | None = None
    sequence_number: str | None = None
    error_code: str | None = None
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class Failure:
    index: int
    code: str
    message: str


@dataclass(frozen=True, slots=True)
class RetryPlan:
    """Indexes (into the call) to send again, and the entries that failed for good."""

    retry: tuple[int, ...]
    failed: tuple[Failure, ...]

    @property
    def done(self) -> bool:
        return not self.retry and not self.failed


def retry_plan(results: Sequence[EntryResult]) -> RetryPlan:
    """Sort a response's failed entries into those worth sending again and those that failed for good."""
    retry: list[int] = []
    failed: list[Failure] = []
    for index, result in enumerate(results):
        if result.error_code is None:
            continue
        if result.error_code in RETRIABLE_CODES:
            retry.append(index)
        else:
            failed.append(Failure(index, result.error_code, result.error_message or ""))
    return RetryPlan(tuple(retry), tuple(failed))


def misrouted(hash_keys: Iterable[int], landed: Shard | None) -> bool:
    """True when an aggregate of user records with these hash keys landed on a shard (``landed``; None:
    not in the listing) whose hash range does not hold them all."""
    if landed is None:
        return True
    return any(not landed.starting_hash_key <= key <= landed.ending_hash_key for key in hash_keys)
