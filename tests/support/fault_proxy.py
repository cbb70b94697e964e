"""A fault-injecting HTTP proxy for the DynamoDB / Kinesis JSON APIs of the emulators (test helper).

Sits in front of dynalite, kinesalite or moto_server on 127.0.0.1 and forwards every request unchanged,
except that a chosen share of calls, optionally only some operations (the ``X-Amz-Target`` suffix,
e.g. ``UpdateItem``), get a fault:

* ``THROTTLE`` / ``ERROR_500``: DynamoDB's (or Kinesis') own throttling or internal-error reply;
* ``DROP``: the connection is closed without a reply;
* ``LATENCY``: the call is delayed by ``latency_s`` (added to any other fault).

``BEFORE`` faults answer without forwarding (the write never happened); ``AFTER`` faults forward the
call, let the emulator apply it, and then throw the reply away: the client sees an error for a write
that *was* applied, the case a lease manager must reconcile.

The proxy runs its own event loop on a background thread and is controlled at run time from the test
or benchmark: :meth:`FaultProxy.set_rules`, :meth:`FaultProxy.clear`, :attr:`FaultProxy.injected`.
Independent of kcl_daemon. Request and response bodies are passed through, never logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import random
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from tests.support.loopback_proxy import LoopbackProxy, read_message


class Fault(enum.StrEnum):
    THROTTLE = "throttle"
    ERROR_500 = "500"
    DROP = "drop"
    LATENCY = "latency"


class Phase(enum.StrEnum):
    BEFORE = "before"  # answer instead of forwarding
    AFTER = "after"  # forward, then replace the reply


@dataclass(frozen=True, slots=True)
class Rule:
    fault: Fault
    share: float = 1.0  # of the matching calls
    phase: Phase = Phase.BEFORE
    operations: frozenset[str] | None = None  # X-Amz-Target operations (UpdateItem, Scan, ...); None: all
    latency_s: float = 0.0
    limit: int | None = None  # fire at most this many times

    def matches(self, operation: str) -> bool:
        return self.operations is None or operation in self.operations


def rule(fault: Fault, share: float = 1.0, *, phase: Phase = Phase.BEFORE, ops: Iterable[str] | None = None,
         latency_s: float = 0.0, limit: int | None = None) -> Rule:  # fmt: skip
    return Rule(fault, share, phase, None if ops is None else frozenset(ops), latency_s, limit)


_REASONS = {200: "OK", 400: "Bad Request", 500: "Internal Server Error"}


def _error_reply(service: str, fault: Fault) -> bytes:
    dynamodb = service.startswith("DynamoDB")
    content_type = "application/x-amz-json-1.0" if dynamodb else "application/x-amz-json-1.1"
    prefix = "com.amazonaws.dynamodb.v20120810#" if dynamodb else ""
    if fault is Fault.THROTTLE:
        status, code = 400, "ProvisionedThroughputExceededException"
        message = (
            "The level of configured provisioned throughput for the table was exceeded."
            if dynamodb
            else "Rate exceeded for shard."
        )
    else:
        status, code = 500, "InternalServerError" if dynamodb else "InternalFailure"
        message = "Internal server error" if dynamodb else "Internal service failure."
    body = json.dumps({"__type": prefix + code, "message": message}).encode()
    head = (
        f"HTTP/1.1 {status} {_REASONS[status]}\r\nx-amzn-RequestId: fault-proxy\r\n"
        f"x-amzn-ErrorType: {code}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


@dataclass
class FaultProxy(LoopbackProxy):
    thread_name = "fault-proxy"

    upstream: str  # http://127.0.0.1:port
    seed: int = 0
    endpoint: str = ""
    calls: Counter[str] = field(default_factory=Counter)  # operation -> calls seen
    injected: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (op, fault, phase) -> n

    def __post_init__(self) -> None:
        self._init_proxy(self.upstream)
        self._rules: list[Rule] = []
        self._fired: Counter[int] = Counter()
        self._lock = threading.Lock()
        self._rng = random.Random(self.seed)

    # -- control (any thread) ----------------------------------------------------------------------

    def set_rules(self, *rules: Rule) -> None:
        with self._lock:
            self._rules = list(rules)
            self._fired.clear()

    def clear(self) -> None:
        self.set_rules()

    def total_injected(self) -> int:
        with self._lock:
            return sum(n for (_, fault, _), n in self.injected.items() if fault != Fault.LATENCY)

    def _choose(self, operation: str) -> tuple[float, Rule | None]:
        with self._lock:
            self.calls[operation] += 1
            latency, chosen = 0.0, None
            for index, candidate in enumerate(self._rules):
                if not candidate.matches(operation):
                    continue
                if candidate.limit is not None and self._fired[index] >= candidate.limit:
                    continue
                if self._rng.random() >= candidate.share:
                    continue
                if candidate.fault is Fault.LATENCY:
                    latency += candidate.latency_s
                    self._fired[index] += 1
                    self.injected[(operation, candidate.fault.value, candidate.phase.value)] += 1
                    continue
                if chosen is None:
                    chosen = candidate
                    latency += candidate.latency_s
                    self._fired[index] += 1
                    self.injected[(operation, candidate.fault.value, candidate.phase.value)] += 1
            return latency, chosen

    # -- one client connection -------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        self._writers.add(writer)
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        try:
            while True:
                request = await read_message(reader)
                if request is None:
                    return
                head, headers, body = request
                target = headers.get("x-amz-target", "")
                service, _, operation = target.partition(".")
                latency, chosen = self._choose(operation or "?")
                if latency:
                    await asyncio.sleep(latency)
                if chosen is not None and chosen.phase is Phase.BEFORE:
                    if chosen.fault is Fault.DROP:
                        return
                    writer.write(_error_reply(service, chosen.fault))
                    await writer.drain()
                    continue
                if upstream is None:
                    upstream = await asyncio.open_connection(self._up_host, self._up_port)
                up_reader, up_writer = upstream
                up_writer.write(head + body)
                await up_writer.drain()
                response = await read_message(up_reader)
                if response is None:
                    return
                if chosen is not None:  # AFTER: the call was applied; the reply is lost
                    if chosen.fault is Fault.DROP:
                        return
                    writer.write(_error_reply(service, chosen.fault))
                else:
                    writer.write(response[0] + response[2])
                await writer.drain()
                if response[1].get("connection", "").lower() == "close":
                    upstream[1].close()
                    upstream = None
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            if task is not None:
                self._handlers.discard(task)
            self._writers.discard(writer)
            if upstream is not None:
                upstream[1].close()
                with contextlib.suppress(BaseException):
                    await upstream[1].wait_closed()
            writer.close()
            with contextlib.suppress(BaseException):
                await writer.wait_closed()
