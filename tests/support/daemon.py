"""The daemon launcher: ``python -m kcl_daemon <command> --properties FILE ...`` as users run it.

:class:`Daemon` is a long-running process (``run``, ``replay``, ...) whose stdout and stderr go to one log
file (or, with ``log=None``, to a pipe the caller reads); it is stopped with a signal and reports its exit
status. :func:`run_cli` runs a command that ends by itself (``leases``, ``check-config``,
``deregister-consumer``, ...) and returns its output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

#: how the daemon is started; a benchmark may pass the ``kcl-daemon`` console script instead
PROGRAM: Final = (sys.executable, "-m", "kcl_daemon")


def daemon_argv(
    command: str, *args: str, properties: Path | str | None = None, program: Sequence[str] = PROGRAM
) -> list[str]:
    """``<program> <command> [--properties FILE] <args>``."""
    argv = [*program, command]
    if properties is not None:
        argv += ["--properties", str(properties)]
    return [*argv, *args]


def _environment(env: Mapping[str, str] | None) -> dict[str, str]:
    return {**os.environ, **(env or {})}


class Daemon:
    """One daemon process; ``env`` is added to this process's environment, ``cwd`` defaults to ours."""

    def __init__(
        self,
        command: str,
        *args: str,
        properties: Path | str | None = None,
        log: Path | None,
        name: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        program: Sequence[str] = PROGRAM,
    ) -> None:
        self.name = name or command
        self.log = log
        self.argv = daemon_argv(command, *args, properties=properties, program=program)
        # log=None: the caller reads the output from process.stdout, line by line
        with contextlib.nullcontext(subprocess.PIPE) if log is None else log.open("wb") as out:
            self.process = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                text=True,
                env=_environment(env),
                cwd=cwd,
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def exit_status(self) -> int | None:
        """The exit status (negative: the signal that ended it), or None while it runs."""
        return self.process.poll()

    def send(self, signum: int) -> None:
        """Send ``signum`` if the process still runs."""
        if self.process.poll() is None:
            self.process.send_signal(signum)

    def wait(self, timeout_s: float) -> int | None:
        """The exit status; None if it did not exit within ``timeout_s`` (it is SIGKILLed then)."""
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def stop(self, signum: int = signal.SIGTERM, timeout_s: float = 30.0) -> int:
        """Send ``signum`` and return the exit status; one that does not exit in time is SIGKILLed and
        the test fails with the end of its log."""
        self.send(signum)
        status = self.wait(timeout_s)
        if status is None:
            raise AssertionError(f"{self.name} did not stop within {timeout_s}s:\n{self.tail()}")
        return status

    def kill(self) -> None:
        """SIGKILL and reap, if it still runs."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def text(self) -> str:
        """The log so far."""
        if self.log is None:
            raise ValueError(f"{self.name} writes to a pipe, not a log file")
        return self.log.read_text(errors="replace")

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.text().splitlines()[-lines:])


def run_cli(
    command: str,
    *args: str,
    properties: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float = 60.0,
    program: Sequence[str] = PROGRAM,
) -> subprocess.CompletedProcess[str]:
    """Run a command to its end; its exit status, stdout and stderr (text)."""
    return subprocess.run(
        daemon_argv(command, *args, properties=properties, program=program),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=cwd,
        env=_environment(env),
        check=False,
    )
