"""The in-memory Kinesis endpoint of ``bench/scaling.py`` (``_memory_kinesis.js``), from Python.

kinesalite is one Node process that serves about 35,000 records/s here, so a drain read from it measures
kinesalite, not the daemon reading it. This endpoint holds each stream's records in memory, each rendered
to its JSON once, and answers ``GetShardIterator`` and ``GetRecords`` by joining a page's bytes; every other
call goes to the upstream emulator (kinesalite: ``ListShards`` and the stream's shape stay kinesalite's).
It speaks HTTP/1.1 on one port (kcl-daemon) and h2c on another (the Java SDK, which speaks only HTTP/2 to
Kinesis), over the same records, so both daemons read it the same way and no proxy stands in Java's path.

Unlike ``tests/support/replay_kinesis.py`` (the Spark bench's read-only copy, served from the bench's own
process) it runs in a process of its own, so its work is not under the bench's GIL, and it makes the
records itself: the backlog at :meth:`MemoryKinesis.hold`, the steady producer's through
:meth:`MemoryKinesis.append`. Nothing is put into kinesalite. Not a benchmark itself.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final

SCRIPT: Final = Path(__file__).resolve().parent / "_memory_kinesis.js"


@dataclass(frozen=True, slots=True)
class Stats:
    """What the endpoint served since it started (``first_get_records_at``: since the last mark)."""

    calls: Counter[str]
    records: int
    first_get_records_at: float | None
    appended: int


class MemoryKinesis:
    """The endpoint's process: ``endpoint`` (HTTP/1.1) and ``h2c_endpoint`` (HTTP/2, for Java)."""

    def __init__(self, upstream: str, log: Path | None = None) -> None:
        node = shutil.which("node")
        if node is None:
            raise RuntimeError("node is not installed: the in-memory Kinesis endpoint needs it")
        self._log = log.open("ab") if log is not None else subprocess.DEVNULL
        self._process = subprocess.Popen(
            [node, str(SCRIPT), upstream], stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL
        )
        assert self._process.stdout is not None
        words = self._process.stdout.readline().decode().split()
        if len(words) != 3 or words[0] != "ready":
            self.close()
            raise RuntimeError(f"the in-memory Kinesis endpoint did not start: {words}")
        self.endpoint = f"http://127.0.0.1:{words[1]}"
        self.h2c_endpoint = f"http://127.0.0.1:{words[2]}"
        self.pid = self._process.pid

    def _call(self, path: str, body: dict[str, Any] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        method = "GET" if data is None else "POST"
        request = urllib.request.Request(self.endpoint + path, data=data, method=method)  # noqa: S310
        with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310 - 127.0.0.1
            return json.loads(response.read())

    def hold(self, stream: str, shard_ids: list[str], per_shard: int, size: int = 100) -> Counter[str]:
        """Serve ``stream`` from memory from now on, its shards holding ``per_shard`` records of ``size``
        bytes each; the records per shard."""
        reply = self._call(
            "/_bench/hold", {"stream": stream, "shards": shard_ids, "perShard": per_shard, "size": size}
        )
        return Counter(reply["perShard"])

    def append(self, stream: str, count: int) -> Counter[str]:
        """``count`` more records, round-robin over the shards; the records per shard now."""
        return Counter(self._call("/_bench/append", {"stream": stream, "count": count})["perShard"])

    def mark(self) -> None:
        """Forget the first GetRecords seen: :meth:`stats` gives the first one after this."""
        self._call("/_bench/mark", {})

    def stats(self) -> Stats:
        raw = self._call("/_bench/stats")
        return Stats(Counter(raw["calls"]), raw["records"], raw["firstGetRecordsAt"], raw["appended"])

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        if self._log is not subprocess.DEVNULL:
            self._log.close()  # type: ignore[union-attr]

    def __enter__(self) -> MemoryKinesis:
        return self

    def __exit__(
        self, _t: type[BaseException] | None, _e: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()
