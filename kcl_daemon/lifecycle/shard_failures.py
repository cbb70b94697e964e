"""What happens after a shard's task failed with an error that is not its child's fault.

Any exception on a shard's path (a lease-table or Kinesis error, a checkpoint the stream rejects, a bug)
is that shard's failure, never the worker's: the task starts again after an exponential backoff, and a
shard that keeps failing is parked (its lease kept, no child running, named in the status line) after
``childMaxConsecutiveFailures`` failures in a row. Errors that retrying can help (throttling, network
trouble; ``KclError.retriable``) back off the same way but never park: they are the service's fault.
"""

from __future__ import annotations

from dataclasses import dataclass

from kcl_daemon.core.lifecycle.restart_policy import Park, Restart, RestartPolicy
from kcl_daemon.errors import KclError


def is_retriable(error: BaseException) -> bool:
    return isinstance(error, KclError) and error.retriable


def describe(error: BaseException) -> str:
    """One line naming the error: the project's errors speak for themselves, others show their type."""
    if isinstance(error, KclError):
        return str(error)
    return f"{type(error).__name__}: {error}"


@dataclass(frozen=True, slots=True)
class TaskFailures:
    """Consecutive failures of one shard's task; reset when a task ends without one."""

    consecutive: int = 0
    last: str = ""

    def after(self, error: BaseException) -> TaskFailures:
        return TaskFailures(self.consecutive + 1, describe(error))


def decide_after_failure(policy: RestartPolicy, failures: TaskFailures, retriable: bool) -> Restart | Park:
    if not retriable and failures.consecutive >= policy.max_consecutive_failures:
        return Park(failures.consecutive)
    return Restart(policy.backoff_s(failures.consecutive), failures.consecutive)
