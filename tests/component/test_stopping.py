"""exit_promptly never cuts short a process because of threads that ran before the daemon started."""

from __future__ import annotations

import threading

import pytest

from kcl_daemon.stopping import exit_promptly


def test_threads_from_before_the_daemon_do_not_make_it_exit_hard() -> None:
    release = threading.Event()
    blocked = threading.Thread(target=release.wait, name="embedder's thread")
    blocked.start()
    try:
        with pytest.raises(SystemExit) as exited:
            exit_promptly(3, grace_s=0.05, older=frozenset(threading.enumerate()))
        assert exited.value.code == 3
    finally:
        release.set()
        blocked.join()
