"""A loopback HTTP proxy in front of a Kinesis emulator that attributes every call to its calling process.

The Spark source runs in several Python processes that all get the same ``spark.executorEnv.*``
variables (the driver's source runner too), so neither an environment variable nor anything the
caller says about itself tells a driver-side call from an executor's. The proxy does not ask the
caller: for each new connection it finds the peer's socket in ``/proc/net/tcp``, the process that
holds it (``/proc/<pid>/fd``), and walks that process's ancestors to the nearest JVM:

* ``org.apache.spark.executor.CoarseGrainedExecutorBackend`` -> ``executor`` (a Python worker of an
  executor JVM);
* any other Spark JVM (``org.apache.spark.deploy.SparkSubmit``: the driver, which also hosts the
  source runner, the planners and, on ``local[N]``, the tasks) -> ``driver``;
* no JVM ancestor -> ``other`` (the bench itself putting records).

On ``local[N]`` tasks run in Python workers of the driver JVM, so there ``driver`` counts them too:
attribution by process only means something on ``local-cluster`` or a real cluster.

Per role it counts calls by operation and the records GetRecords returned. Linux only; binds
127.0.0.1; forwards plain HTTP/1.1 with keep-alive.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import threading
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

EXECUTOR_JVM = "org.apache.spark.executor.CoarseGrainedExecutorBackend"


def _inode_of(local_port: int, remote_port: int) -> str | None:
    """The socket inode of the TCP connection 127.0.0.1:local_port -> 127.0.0.1:remote_port."""
    want_local, want_remote = f"0100007F:{local_port:04X}", f"0100007F:{remote_port:04X}"
    for table in ("/proc/net/tcp",):
        for line in Path(table).read_text().splitlines()[1:]:
            parts = line.split()
            if parts[1] == want_local and parts[2] == want_remote:
                return parts[9]
    return None


def _pid_holding(inode: str) -> int | None:
    target = f"socket:[{inode}]"
    with os.scandir("/proc") as processes:
        for entry in processes:
            if not entry.name.isdigit():
                continue
            try:
                with os.scandir(f"/proc/{entry.name}/fd") as fds:
                    for fd in fds:
                        try:
                            if os.readlink(fd.path) == target:
                                return int(entry.name)
                        except OSError:
                            continue
            except OSError:
                continue
    return None


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def role_of(pid: int) -> tuple[str, int | None]:
    """(role, pid of the nearest JVM ancestor) of a process, from its ancestry (see module doc)."""
    current = pid
    for _ in range(12):
        if current <= 1:
            break
        try:
            argv = Path(f"/proc/{current}/cmdline").read_bytes().split(b"\0")
            parent = _parent(current)
        except OSError:
            break
        if argv and argv[0].endswith(b"java"):
            if any(arg == EXECUTOR_JVM.encode() for arg in argv):
                return "executor", current
            return "driver", current
        current = parent
    return "other", None


@dataclass
class Tally:
    calls: Counter[str] = field(default_factory=Counter)
    records: int = 0
    pids: set[int] = field(default_factory=set)

    def to_json(self) -> dict[str, object]:
        return {"calls": dict(self.calls), "records": self.records, "pids": sorted(self.pids)}


class AttributingProxy:
    """``with AttributingProxy(upstream) as proxy: proxy.endpoint`` ... ``proxy.report()``."""

    def __init__(self, upstream: str) -> None:
        split = urlsplit(upstream)
        self.upstream_host, self.upstream_port = split.hostname or "127.0.0.1", split.port or 80
        self.lock = threading.Lock()
        self.by_role: dict[str, Tally] = {}
        self.calls_by_pid: Counter[int] = Counter()
        self.executor_jvms: dict[int, int] = {}  # worker pid -> executor JVM pid
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                self.role, self.pid, self.jvm = "unknown", -1, None
                server_port = int(self.server.server_address[1])  # type: ignore[index]
                inode = _inode_of(int(self.client_address[1]), server_port)
                pid = None if inode is None else _pid_holding(inode)
                if pid is not None:
                    self.pid = pid
                    self.role, self.jvm = role_of(pid)
                self.upstream = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                try:
                    self.upstream.request("POST", self.path, body, headers)
                    response = self.upstream.getresponse()
                except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                    # the emulator closed an idle keep-alive connection: once more on a new one
                    # (only reads and control calls go through the proxy, so a resend is harmless)
                    self.upstream.close()
                    self.upstream = http.client.HTTPConnection(proxy.upstream_host, proxy.upstream_port)
                    self.upstream.request("POST", self.path, body, headers)
                    response = self.upstream.getresponse()
                payload = response.read()
                target = self.headers.get("X-Amz-Target", "?").rsplit(".", 1)[-1]
                records = 0
                if target == "GetRecords" and response.status == 200:
                    records = len(json.loads(payload).get("Records", []))
                proxy._count(self.role, self.pid, self.jvm, target, records)
                self.send_response(response.status)
                for key, value in response.getheaders():
                    if key.lower() not in ("connection", "transfer-encoding", "content-length"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def finish(self) -> None:
                super().finish()
                self.upstream.close()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(
            target=self.server.serve_forever, name="attributing-proxy", daemon=True
        )

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _count(self, role: str, pid: int, jvm: int | None, target: str, records: int) -> None:
        with self.lock:
            tally = self.by_role.setdefault(role, Tally())
            tally.calls[target] += 1
            tally.records += records
            tally.pids.add(pid)
            self.calls_by_pid[pid] += 1
            if role == "executor" and jvm is not None:
                self.executor_jvms[pid] = jvm

    def report(self) -> dict[str, dict[str, object]]:
        with self.lock:
            return {role: tally.to_json() for role, tally in sorted(self.by_role.items())}

    def calls(self, role: str, operation: str) -> int:
        with self.lock:
            tally = self.by_role.get(role)
            return 0 if tally is None else tally.calls[operation]

    def records(self) -> dict[str, int]:
        """Records GetRecords returned, by role."""
        with self.lock:
            return {role: tally.records for role, tally in sorted(self.by_role.items())}

    def reset(self) -> None:
        with self.lock:
            self.by_role.clear()
            self.calls_by_pid.clear()

    def __enter__(self) -> AttributingProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
