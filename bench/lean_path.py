"""CPU per idle GetRecords call for the candidate request paths, against kinesalite and moto_server.

Issue 30, point 1: the daemon spends 1.6-2.5 ms of CPU per idle GetRecords call, most of it in
botocore. This script makes the same idle call (a one-shard stream with nothing in it, ``Limit`` 10000)
many times through each candidate, one after the other in one process, and prints the CPU this process
spent per call (``time.process_time``: every thread, the C runtime's included; the emulators are other
processes) and the ratio to botocore's:

* ``botocore``: today's path (:class:`kcl_daemon.aws.kinesis.Kinesis` over a boto3 client, body parsed by
  :mod:`kcl_daemon.aws.records_page`).
* ``kcl_daemon.aws.lean``: the chosen path as the daemon uses it (``Kinesis`` on the lean path).
* ``kcl_daemon.aws.lean on the event loop``: the same, awaited on an event loop
  (``Kinesis.get_records_async``, :mod:`kcl_daemon.aws.lean.aio`), as the polling readers call it.
* ``http.client``: the standard library's client on one keep-alive connection, signed as below.
* ``urllib3``: a urllib3 connection pool, the request body by orjson, signed by
  :mod:`kcl_daemon.aws.lean.sigv4` (signing key cached per day), the reply parsed by orjson.
* ``urllib3+crt-sign``: the same, signed by awscrt's SigV4 signer instead.
* ``awscrt``: awscrt's HTTP client and its signer.
* ``aiohttp`` and ``aiohttp+uvloop``: one asyncio session, signed by the lean signer.

    PYTHONPATH=. .venv/bin/python bench/lean_path.py [--calls 400] [--rounds 3] [--emulators kinesalite,moto]

awscrt, aiohttp and uvloop are not dependencies of the project (``pip install awscrt aiohttp uvloop``);
a candidate whose library is missing is listed without figures. Each round runs every candidate for
``--calls`` calls (after 20 warm-up calls); the figure is the median over rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests.support

import orjson
import urllib3

from kcl_daemon.aws.clients import ClientSettings, build_clients
from kcl_daemon.aws.kinesis import Kinesis
from kcl_daemon.aws.lean.sigv4 import FrozenCredentials, Signer, amz_date
from kcl_daemon.aws.provision import ensure_stream
from kcl_daemon.core.shards.iterator import IteratorPosition, IteratorType
from tests.support.emulators import REGION, Emulator, use_dummy_credentials

TARGET = "Kinesis_20131202.GetRecords"
CONTENT_TYPE = "application/x-amz-json-1.1"
CREDS = FrozenCredentials("test", "test", None)


def _host(endpoint: str) -> tuple[str, int, str]:
    parts = urlsplit(endpoint)
    assert parts.hostname is not None
    assert parts.port is not None
    return parts.hostname, parts.port, parts.netloc


def botocore_path(endpoint: str, iterator: str, *, lean: bool = False) -> Callable[[], None]:
    clients = build_clients(
        ClientSettings(region=REGION, kinesis_endpoint=endpoint, dynamodb_endpoint=endpoint)
    )
    kinesis = Kinesis(clients.kinesis, lean=lean)
    assert kinesis.lean == lean
    state = {"it": iterator}

    def call() -> None:
        result = kinesis.get_records(state["it"], 10000)
        state["it"] = result.next_iterator or state["it"]

    return call


def urllib3_path(endpoint: str, iterator: str, *, crt_sign: bool = False) -> Callable[[], None]:
    host, port, netloc = _host(endpoint)
    pool = urllib3.HTTPConnectionPool(host, port, maxsize=4, retries=False, timeout=urllib3.Timeout(2, 5))
    signer = Signer("kinesis", REGION)
    sign = crt_signer(netloc) if crt_sign else None
    state = {"it": iterator}

    def call() -> None:
        body = orjson.dumps({"ShardIterator": state["it"], "Limit": 10000})
        if sign is None:
            headers = signer.headers(netloc, TARGET, CONTENT_TYPE, body, CREDS, amz_date(datetime.now(UTC)))
        else:
            headers = sign(body)
        reply = pool.urlopen("POST", "/", body=body, headers=headers, retries=False)
        if reply.status != 200:
            raise RuntimeError(reply.data)
        page = orjson.loads(reply.data)
        state["it"] = page.get("NextShardIterator") or state["it"]

    return call


def http_client_path(endpoint: str, iterator: str) -> Callable[[], None]:
    """The standard library's ``http.client``: one connection, headers and body in one send."""
    import http.client

    host, port, netloc = _host(endpoint)
    connection = http.client.HTTPConnection(host, port, timeout=5)
    signer = Signer("kinesis", REGION)
    state = {"it": iterator}

    def call() -> None:
        body = orjson.dumps({"ShardIterator": state["it"], "Limit": 10000})
        headers = signer.headers(netloc, TARGET, CONTENT_TYPE, body, CREDS, amz_date(datetime.now(UTC)))
        headers["Host"] = netloc
        try:
            connection.request("POST", "/", body, headers)
            reply = connection.getresponse()
        except (http.client.HTTPException, OSError):  # kinesalite closed the keep-alive connection
            connection.close()
            connection.request("POST", "/", body, headers)
            reply = connection.getresponse()
        data = reply.read()
        if reply.status != 200:
            raise RuntimeError(data)
        page = orjson.loads(data)
        state["it"] = page.get("NextShardIterator") or state["it"]

    return call


def crt_signer(netloc: str) -> Callable[[bytes], dict[str, str]]:
    from awscrt import auth, http

    provider = auth.AwsCredentialsProvider.new_static(CREDS.access_key, CREDS.secret_key)
    config = auth.AwsSigningConfig(
        algorithm=auth.AwsSigningAlgorithm.V4,
        signature_type=auth.AwsSignatureType.HTTP_REQUEST_HEADERS,
        credentials_provider=provider,
        region=REGION,
        service="kinesis",
    )

    def sign(body: bytes) -> dict[str, str]:
        request = http.HttpRequest(
            "POST",
            "/",
            http.HttpHeaders([("host", netloc), ("content-type", CONTENT_TYPE), ("x-amz-target", TARGET)]),
            io.BytesIO(body),
        )
        auth.aws_sign_request(request, config).result()
        return dict(request.headers)

    return sign


def awscrt_path(endpoint: str, iterator: str) -> Callable[[], None]:
    from awscrt import auth, http

    host, port, netloc = _host(endpoint)
    connections: list[Any] = []

    def connection() -> Any:  # kinesalite closes a keep-alive connection now and then: open another
        if not connections or not connections[0].is_open():
            connections[:] = [http.HttpClientConnection.new(host_name=host, port=port).result(5)]
        return connections[0]

    provider = auth.AwsCredentialsProvider.new_static(CREDS.access_key, CREDS.secret_key)
    config = auth.AwsSigningConfig(
        algorithm=auth.AwsSigningAlgorithm.V4,
        signature_type=auth.AwsSignatureType.HTTP_REQUEST_HEADERS,
        credentials_provider=provider,
        region=REGION,
        service="kinesis",
    )
    state = {"it": iterator}

    def call() -> None:
        body = orjson.dumps({"ShardIterator": state["it"], "Limit": 10000})
        request = http.HttpRequest(
            "POST",
            "/",
            http.HttpHeaders(
                [
                    ("host", netloc),
                    ("content-type", CONTENT_TYPE),
                    ("x-amz-target", TARGET),
                    ("content-length", str(len(body))),
                ]
            ),
            io.BytesIO(body),
        )
        auth.aws_sign_request(request, config).result()
        chunks: list[bytes] = []
        status: list[int] = []
        stream = connection().request(
            request,
            on_response=lambda status_code, **_: status.append(status_code),
            on_body=lambda chunk, **_: chunks.append(chunk),
        )
        stream.activate()
        stream.completion_future.result(5)
        if status[0] != 200:
            raise RuntimeError(b"".join(chunks))
        page = orjson.loads(b"".join(chunks))
        state["it"] = page.get("NextShardIterator") or state["it"]

    return call


def aiohttp_path(endpoint: str, iterator: str, *, uvloop: bool = False) -> Callable[[], None]:
    """The calls run on an event loop in a thread of their own; ``call`` waits for one."""
    import aiohttp

    _, _, netloc = _host(endpoint)
    signer = Signer("kinesis", REGION)
    if uvloop:
        import uvloop as uv

        loop: asyncio.AbstractEventLoop = uv.new_event_loop()
    else:
        loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    session: Any = asyncio.run_coroutine_threadsafe(_session(aiohttp), loop).result()
    state = {"it": iterator}
    url = endpoint + "/"

    async def once() -> None:
        body = orjson.dumps({"ShardIterator": state["it"], "Limit": 10000})
        headers = signer.headers(netloc, TARGET, CONTENT_TYPE, body, CREDS, amz_date(datetime.now(UTC)))
        async with session.post(url, data=body, headers=headers) as reply:
            data = await reply.read()
            if reply.status != 200:
                raise RuntimeError(data)
        page = orjson.loads(data)
        state["it"] = page.get("NextShardIterator") or state["it"]

    async def many(n: int) -> None:
        for _ in range(n):
            await once()

    def call_n(n: int) -> None:
        asyncio.run_coroutine_threadsafe(many(n), loop).result()

    call_n.batched = True  # type: ignore[attr-defined]
    return call_n


def lean_async_path(endpoint: str, iterator: str) -> Callable[[], None]:
    """The lean path on the event loop, as the polling readers await it (``Kinesis.get_records_async``
    on a loop in a thread of its own; ``call`` runs a batch of calls there)."""
    clients = build_clients(
        ClientSettings(region=REGION, kinesis_endpoint=endpoint, dynamodb_endpoint=endpoint)
    )
    kinesis = Kinesis(clients.kinesis)
    assert kinesis.reads_async()
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    state = {"it": iterator}

    async def many(n: int) -> None:
        for _ in range(n):
            result = await kinesis.get_records_async(state["it"], 10000)
            state["it"] = result.next_iterator or state["it"]

    def call_n(n: int) -> None:
        asyncio.run_coroutine_threadsafe(many(n), loop).result()

    call_n.batched = True  # type: ignore[attr-defined]
    return call_n


async def _session(aiohttp: Any) -> Any:
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5))


def _cpu() -> float:
    return time.process_time()


def measure(call: Callable[..., None], calls: int) -> tuple[float, float]:
    """(CPU ms per call, wall ms per call)."""
    batched = getattr(call, "batched", False)
    cpu, wall = _cpu(), time.perf_counter()
    if batched:
        call(calls)
    else:
        for _ in range(calls):
            call()
    return (_cpu() - cpu) * 1000 / calls, (time.perf_counter() - wall) * 1000 / calls


CANDIDATES: dict[str, Callable[[str, str], Callable[..., None]]] = {
    "botocore": botocore_path,
    "kcl_daemon.aws.lean": lambda e, i: botocore_path(e, i, lean=True),
    "kcl_daemon.aws.lean on the event loop": lean_async_path,
    "urllib3": urllib3_path,
    "http.client": http_client_path,
    "urllib3+crt-sign": lambda e, i: urllib3_path(e, i, crt_sign=True),
    "awscrt": awscrt_path,
    "aiohttp": aiohttp_path,
    "aiohttp+uvloop": lambda e, i: aiohttp_path(e, i, uvloop=True),
}


def run(name: str, endpoint: str, calls: int, rounds: int) -> None:
    clients = build_clients(
        ClientSettings(region=REGION, kinesis_endpoint=endpoint, dynamodb_endpoint=endpoint)
    )
    stream = f"lean-{int(time.time())}"
    ensure_stream(clients.kinesis, stream, 1)
    kinesis = Kinesis(clients.kinesis)
    shard = kinesis.list_shards(stream)[0].shard_id
    paths: dict[str, Callable[..., None]] = {}
    missing: list[str] = []
    for candidate, make in CANDIDATES.items():
        iterator = kinesis.get_shard_iterator(stream, shard, IteratorPosition(IteratorType.LATEST))
        try:
            paths[candidate] = make(endpoint, iterator)
        except ImportError as exc:  # awscrt, aiohttp and uvloop are not the project's dependencies
            missing.append(f"{candidate} ({exc.name} is not installed)")
            continue
        measure(paths[candidate], 20)  # warm up: connections, caches
    figures: dict[str, list[tuple[float, float]]] = {c: [] for c in paths}
    for _ in range(rounds):
        for candidate, call in paths.items():
            figures[candidate].append(measure(call, calls))
    base = statistics.median(cpu for cpu, _ in figures["botocore"])
    print(f"\n{name}: {calls} idle GetRecords calls per candidate and round, {rounds} rounds (median)")
    print("| candidate | CPU ms per call | / botocore | wall ms per call |")
    print("| --- | --- | --- | --- |")
    for candidate, values in figures.items():
        cpu = statistics.median(v[0] for v in values)
        wall = statistics.median(v[1] for v in values)
        print(f"| {candidate} | {cpu:.3f} | {cpu / base:.2f} | {wall:.2f} |")
    for candidate in missing:
        print(f"| {candidate} | - | - | - |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--emulators", default="kinesalite,moto")
    args = parser.parse_args()
    use_dummy_credentials()
    with tempfile.TemporaryDirectory(prefix="lean-path-") as logs:
        for name in args.emulators.split(","):
            emulator = (
                Emulator.kinesalite(Path(logs)) if name == "kinesalite" else Emulator.moto_server(Path(logs))
            )
            emulator.start()
            try:
                run(emulator.name, emulator.endpoint, args.calls, args.rounds)
            finally:
                emulator.stop()


if __name__ == "__main__":
    main()
