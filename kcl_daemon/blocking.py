"""Bounded, named thread pools for the blocking calls the event loop hands off (boto3, mostly).

``loop.run_in_executor(ThreadPoolExecutor, fn)`` costs more than the call it hands off when the call is
a quick one, and a worker with hundreds of shards makes hundreds of them a second (a GetRecords per
shard per read interval, a renewal per lease every failover/3): each builds a ``concurrent.futures``
future (a condition and a lock), checks for an idle thread through a semaphore, and chains that future
to an asyncio one. Profiled at 256 idle shards, that handoff was the event loop's largest cost.

:class:`BlockingPool` is an ``Executor`` (``submit`` and ``loop.run_in_executor`` work as with any
pool) with a cheaper path for coroutines, :meth:`BlockingPool.run`: the call goes on a queue with the
asyncio future it resolves, and the thread resolves it with one ``call_soon_threadsafe``.
:func:`run_blocking` takes that path when the pool offers it, so code that is handed a plain
``ThreadPoolExecutor`` (tests) works the same.

Threads start only when a call finds no idle one, up to ``max_workers``, and are daemon threads: a
call still blocked when the process exits (a hung connection) does not hold the exit up. A call whose
awaiting coroutine was cancelled before a thread took it is skipped.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import itertools
import queue
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar, TypeVarTuple, cast

T = TypeVar("T")
P = ParamSpec("P")
Ts = TypeVarTuple("Ts")

#: (call, report) where report(result, error) runs on the pool's thread; None stops one thread
_Work = tuple[Callable[[], object], Callable[[object, BaseException | None], None]] | None


class BlockingPool(concurrent.futures.Executor):
    def __init__(self, max_workers: int, thread_name_prefix: str) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be at least 1, not {max_workers}")
        self.max_workers = max_workers
        self.name = thread_name_prefix
        self._queue: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._busy = 0  # threads running a call
        self._pending = 0  # calls on the queue no thread has taken yet
        self._numbers = itertools.count()
        self._shutdown = False

    @property
    def threads(self) -> int:
        """Threads started so far."""
        return len(self._threads)

    def _put(self, work: _Work) -> None:
        thread = None
        with self._lock:
            if self._shutdown:
                raise RuntimeError(f"pool {self.name} is shut down")
            self._pending += 1
            free = len(self._threads) - self._busy
            if self._pending > free and len(self._threads) < self.max_workers:
                thread = threading.Thread(
                    target=self._serve, name=f"{self.name}_{next(self._numbers)}", daemon=True
                )
                self._threads.append(thread)
        self._queue.put(work)
        if thread is not None:
            thread.start()

    def _serve(self) -> None:
        while True:
            work = self._queue.get()
            if work is None:
                return
            with self._lock:
                self._pending -= 1
                self._busy += 1
            call, report = work
            try:
                result = call()
            except BaseException as exc:  # noqa: BLE001 - handed to the caller, whatever it is
                error: BaseException | None = exc
                result = None
            else:
                error = None
            with self._lock:  # free again before the caller hears of it: its next call finds this thread
                self._busy -= 1
            report(result, error)

    # -- the coroutine path ----------------------------------------------------------------------

    async def run(self, fn: Callable[[*Ts], T], /, *args: *Ts) -> T:
        """``fn(*args)`` on one of the pool's threads; cancelling the caller skips a call not yet begun."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()

        def call() -> T | None:
            return None if future.cancelled() else fn(*args)

        def report(result: object, error: BaseException | None) -> None:
            if loop.is_closed():
                return  # the caller's loop ended (an immediate stop): nobody is left to hear of it
            with contextlib.suppress(RuntimeError):  # closed between the check and the call
                loop.call_soon_threadsafe(_resolve, future, result, error)

        self._put((call, report))
        return await future

    # -- the Executor interface ------------------------------------------------------------------

    def submit(
        self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs
    ) -> concurrent.futures.Future[T]:
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def call() -> T | None:
            return fn(*args, **kwargs) if future.set_running_or_notify_cancel() else None

        def report(result: object, error: BaseException | None) -> None:
            if future.cancelled():
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(cast(T, result))  # fn's result: the call ran, so it returned a T

        self._put((call, report))
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            if self._shutdown:
                return
            self._shutdown = True
            threads = list(self._threads)
        for _ in threads:
            self._queue.put(None)
        if wait:
            for thread in threads:
                thread.join()


def _resolve(future: asyncio.Future[T], result: object, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(cast(T, result))  # fn's result: a call skipped as cancelled left the future done


async def run_blocking(executor: concurrent.futures.Executor, fn: Callable[[*Ts], T], /, *args: *Ts) -> T:
    """``fn(*args)`` on ``executor``: :meth:`BlockingPool.run` when it is one, else ``run_in_executor``."""
    if isinstance(executor, BlockingPool):
        return await executor.run(fn, *args)
    call = functools.partial(fn, *args) if args else fn
    return await asyncio.get_running_loop().run_in_executor(executor, call)
