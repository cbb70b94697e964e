"""One emulator process (moto_server, kinesalite or dynalite) on a fixed loopback port, restarted if it dies.

kinesalite and dynalite died on a request whose client vanished mid-body (a SIGKILLed daemon); they now
run with ``survive_aborted_requests.js`` preloaded, and this is the backstop for any other death: without
it every later test of the session would fail on a refused connection. An :class:`Emulator` keeps its
port for the whole session, so endpoints handed to session-scoped fixtures stay valid: :meth:`ensure_alive`
(called around every integration test) restarts a dead or deaf process on the same port and records why.
State is lost with the process; every test creates its own streams and tables.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from botocore.exceptions import BotoCoreError, ClientError

STARTUP_TIMEOUT_S = 30.0


class EmulatorError(RuntimeError):
    """The emulator did not start (its log tail is in the message)."""


class Emulator:
    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        port: int,
        probes: Sequence[Callable[[str], None]],
        log_path: Path,
    ) -> None:
        self.name, self.argv, self.port, self.probes, self.log_path = name, list(argv), port, probes, log_path
        self.endpoint = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen[bytes] | None = None
        self.startup_s = 0.0
        self.restarts: list[str] = []  # why each restart happened

    def start(self) -> None:
        """Start the process and wait until every probe answers."""
        started = time.monotonic()
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        while True:
            if self.process.poll() is not None:
                raise EmulatorError(f"{self.name} exited with {self.process.returncode}:\n{self._log_tail()}")
            try:
                for probe in self.probes:
                    probe(self.endpoint)
                break
            except (BotoCoreError, ClientError):
                if time.monotonic() - started > STARTUP_TIMEOUT_S:
                    self.stop()
                    raise EmulatorError(
                        f"{self.name} did not answer within {STARTUP_TIMEOUT_S}s:\n{self._log_tail()}"
                    ) from None
                time.sleep(0.02)
        self.startup_s = time.monotonic() - started

    def problem(self) -> str | None:
        """Why the emulator cannot serve (exited, or its port refuses connections), or None."""
        if self.process is None:
            return "not started"
        code = self.process.poll()
        if code is not None:
            return f"exited with {code}"
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2.0):
                return None
        except OSError as exc:
            return f"port {self.port} refuses connections ({exc})"

    def ensure_alive(self, context: str) -> str | None:
        """Restart a dead or deaf emulator on the same port; return what happened (None if it was fine)."""
        problem = self.problem()
        if problem is None:
            return None
        note = f"{self.name} {problem} ({context}); restarted on port {self.port}"
        self.stop()
        with self.log_path.open("ab") as log:
            log.write(f"\n=== {note} ===\n".encode())
        self.start()
        self.restarts.append(note)
        return note

    def stop(self) -> None:
        """Stop the process by its PID: SIGTERM, then SIGKILL after 5 s."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

    def _log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
