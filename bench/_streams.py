"""Shared pieces of the benchmarks that feed a stream and prepare its lease table: a steady producer
(:class:`Producer`) and the unowned TRIM_HORIZON leases a shard sync would write (:func:`prepare_leases`).

Not a benchmark itself: ``scaling.py``, ``process_tree.py`` and ``dynamodb_cost.py`` import it
(``bench/`` is on ``sys.path`` when they run as scripts).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from typing import Protocol

from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import ExtendedSequenceNumber
from kcl_daemon.core.shards.graph import Shard


class Puts(Protocol):
    """A bench's stream: puts ``count`` more records."""

    def put(self, count: int) -> None: ...


class Producer:
    """Puts ``per_s`` records per second into the stream on a thread, every 100 ms."""

    def __init__(self, stream: Puts, per_s: float) -> None:
        self._stream, self._per_s = stream, per_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="producer", daemon=True)
        self.behind_s = 0.0

    def _run(self) -> None:
        started, sent = time.monotonic(), 0
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self._per_s)
            if due > sent:
                self._stream.put(due - sent)
                sent = due
            self.behind_s = max(self.behind_s, time.monotonic() - started - sent / self._per_s)
            self._stop.wait(0.1)

    def __enter__(self) -> Producer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)


def prepare_leases(clients: AwsClients, app: str, shards: Iterable[Shard]) -> None:
    """The lease table (with the GSI KCL 3.x wants: dynalite refuses to add it later, java-mld.md) and one
    unowned TRIM_HORIZON lease per shard, as a shard sync would write them."""
    table = DynamoLeaseTable(clients.dynamodb, app)
    table.create_table_if_missing(poll_s=0.1)
    for shard in shards:
        table.create_lease(
            Lease(
                shard.shard_id,
                ExtendedSequenceNumber("TRIM_HORIZON"),
                starting_hash_key=shard.starting_hash_key,
                ending_hash_key=shard.ending_hash_key,
            )
        )
