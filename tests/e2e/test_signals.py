"""Signals end to end: real daemon processes, real children, real signals.

The first SIGTERM/SIGINT/SIGHUP stops gracefully; the second stops at once (children SIGKILLed, exit
130) however stuck the children are; a signal during start-up stops the daemon promptly.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.daemon import Daemon
from tests.support.paths import FAULTY

pytestmark = pytest.mark.e2e


def wait_for(check: Callable[[], bool], limit_s: float, what: str) -> None:
    deadline = time.monotonic() + limit_s
    while not check():
        assert time.monotonic() < deadline, f"{what} not within {limit_s}s"
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def child_pids(state: Path) -> list[int]:
    path = state / "pids"
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def start_daemon(tmp_path: Path, command: str, properties: str, *args: str) -> Daemon:
    props = tmp_path / "app.properties"
    props.write_text(properties, encoding="utf-8")
    return Daemon(command, *args, properties=props, log=tmp_path / "daemon.log", cwd=tmp_path)


def finish(daemon: Daemon, limit_s: float) -> tuple[int, str]:
    """The exit status and the log (stdout and stderr) of a daemon that must exit within ``limit_s``."""
    code = daemon.wait(limit_s)
    if code is None:
        pytest.fail(f"the daemon did not exit within {limit_s}s; log: {daemon.text()[-3000:]}")
    return code, daemon.text()


def hanging_replay(tmp_path: Path) -> tuple[Daemon, Path]:
    state = tmp_path / "state"
    state.mkdir()
    records = tmp_path / "records.jsonl"
    lines = [
        {"text": "poison" if i == 5 else f"r{i}", "partitionKey": "pk", "sequenceNumber": str(100 + i)}
        for i in range(20)
    ]
    records.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    daemon = start_daemon(
        tmp_path,
        "replay",
        f"executableName = {sys.executable} {FAULTY} hang {state}\n",  # no timeoutInSeconds: waits forever
        "--records",
        str(records),
        "--batch-size",
        "5",
    )
    wait_for(lambda: (state / "faults.count").exists(), 30, "the child hanging on its batch")
    return daemon, state


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_replay_second_signal_stops_at_once_and_no_child_outlives_it(tmp_path: Path, sig: int) -> None:
    daemon, state = hanging_replay(tmp_path)
    daemon.send(sig)
    time.sleep(1.0)
    assert daemon.exit_status is None, "the first signal waits for the child to answer"
    sent = time.monotonic()
    daemon.send(sig)
    code, err = finish(daemon, 15)
    took = time.monotonic() - sent
    assert code == 130, err[-3000:]
    assert took < 5, f"the second signal took {took:.1f}s"
    assert "stopping at once" in err and "stopped at once by a second" in err
    assert "Traceback" not in err
    pids = child_pids(state)
    assert pids and not any(alive(pid) for pid in pids)


def local_run(tmp_path: Path, fault: str) -> tuple[Daemon, Path, Path]:
    state = tmp_path / "state"
    state.mkdir()
    log = tmp_path / "daemon.log"
    props = tmp_path / "app.properties"
    props.write_text(
        f"executableName = {sys.executable} {FAULTY} {fault} {state}\n"
        "applicationName = signals\nstreamName = signals\nregionName = us-east-1\n"
        "initialPositionInStream = TRIM_HORIZON\nidleTimeBetweenReadsInMillis = 250\n",
        encoding="utf-8",
    )
    daemon = Daemon("run", "--local", "--status-interval", "1", properties=props, log=log, cwd=tmp_path)
    return daemon, state, log


def stop_and_wait(daemon: Daemon, limit_s: float) -> int | None:
    """The exit status, or None if it did not exit within ``limit_s`` (it is killed then)."""
    return daemon.wait(limit_s)


def test_run_second_signal_kills_stuck_children_and_exits_130(tmp_path: Path) -> None:
    daemon, state, log = local_run(tmp_path, "hang-any")
    try:
        wait_for(lambda: (state / "faults.count").exists(), 60, "a child hanging on its first batch")
        daemon.send(signal.SIGTERM)
        time.sleep(1.0)
        assert daemon.exit_status is None, "the first signal waits for the children (shutdown grace)"
        sent = time.monotonic()
        daemon.send(signal.SIGTERM)
        code = stop_and_wait(daemon, 15)
    finally:
        daemon.kill()
    text = log.read_text(errors="replace")
    assert code == 130, text[-3000:]
    assert time.monotonic() - sent < 6, "a second signal stops within a few seconds"
    assert "received again: stopping at once" in text and "Traceback" not in text
    pids = child_pids(state)
    assert pids and not any(alive(pid) for pid in pids), "no child outlives the daemon"


def test_run_sighup_stops_gracefully_like_sigterm(tmp_path: Path) -> None:
    daemon, state, log = local_run(tmp_path, "none")
    wait_for(lambda: (state / "delivered.log").exists(), 60, "records delivered")
    daemon.send(signal.SIGHUP)
    code = stop_and_wait(daemon, 30)
    text = log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    assert "SIGHUP received: stopping gracefully" in text and "lease(s) released" in text


def test_a_signal_during_start_up_stops_promptly_even_with_a_hanging_endpoint(tmp_path: Path) -> None:
    import socket

    with socket.socket() as hanging:  # accepts connections (the backlog) and never answers
        hanging.bind(("127.0.0.1", 0))
        hanging.listen(16)
        endpoint = f"http://127.0.0.1:{hanging.getsockname()[1]}"
        props = tmp_path / "app.properties"
        props.write_text(
            f"executableName = {sys.executable} {FAULTY} none {tmp_path}\n"
            "applicationName = signals\nstreamName = signals\nregionName = us-east-1\n"
            f"kinesisEndpoint = {endpoint}\ndynamoDBEndpoint = {endpoint}\n",
            encoding="utf-8",
        )
        env = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test"}
        daemon = Daemon("run", properties=props, log=tmp_path / "daemon.log", env=env)
        # past the imports and the signal handlers, then blocked on the lease table's DescribeTable
        wait_for(lambda: " starting: " in daemon.text() or daemon.exit_status is not None, 60, "start-up")
        time.sleep(0.5)
        assert daemon.exit_status is None, daemon.text()[-3000:]
        sent = time.monotonic()
        daemon.send(signal.SIGTERM)
        code, err = finish(daemon, 20)
    took = time.monotonic() - sent
    assert code == 0, err[-3000:]
    assert took < 5, f"stopping during start-up took {took:.1f}s"
    assert "stopped during start-up" in err and "Traceback" not in err
