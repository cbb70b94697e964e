"""Child exits are watched without a thread per child (Python 3.11's default watcher starts one each)."""

from __future__ import annotations

import asyncio
import sys
import threading

import pytest

from kcl_daemon.process.child import ChildProcess

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="pidfds are Linux's")


def test_many_children_exit_with_their_status_and_add_no_threads() -> None:
    async def run() -> tuple[int, list[int | None]]:
        argv = [sys.executable, "-c", "import sys; sys.stdin.read(); sys.exit(3)"]
        children = [await ChildProcess.spawn(argv, line_limit_bytes=1024) for _ in range(12)]
        threads = threading.active_count()
        codes = await asyncio.gather(*(child.stop() for child in children))
        return threads, list(codes)

    before = threading.active_count()
    threads, codes = asyncio.run(run())
    assert codes == [3] * 12
    assert threads - before < 12  # not one waitpid thread per child
    _, again = asyncio.run(run())  # a second event loop: the watcher is not tied to the first
    assert again == [3] * 12
