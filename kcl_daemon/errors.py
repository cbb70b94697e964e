"""The project's error tree. Every class says whether retrying can help (``retriable``).

::

    KclError
    ├── ConfigError              bad properties/YAML; carries every problem found, not just the first
    ├── RecordsFileError         bad `replay --records` input; names the line
    ├── CommandFailed            an operator command refused or failed; carries its exit status
    ├── CheckpointRefused        a checkpoint the daemon will not write; carries the Java error name
    ├── ChildFault               a record-processor child misbehaved; its shard restarts it   (retriable)
    │   ├── ChildSpawnFailed         the executable could not be started
    │   ├── ChildExited              stdout reached EOF / the process died mid-conversation
    │   ├── ChildTimeout             no protocol message within the action's timeout
    │   ├── ChildProtocolViolation   wrong responseFor, or a shard end without a SHARD_END checkpoint
    │   ├── ChildLineTooLong         a stdout line longer than the configured limit
    │   └── ChildNotReading          the child stopped reading stdin (write timed out or pipe broke)
    └── AwsError                 an AWS call failed in a way no subclass describes
        ├── LeaseConflict            a conditional write failed: another writer got there first
        │   └── LeaseUnreadable          the lease item cannot be decoded: treated as not ours
        ├── Throttled                throttled or over a rate limit                           (retriable)
        ├── DependencyUnavailable    the lease table or the stream does not exist (fatal at startup)
        │   ├── ShardNotFound            GetShardIterator/GetRecords: shard or stream gone = shard end
        │   └── LeaseTableGone           the lease table vanished while running, for the failover time
        ├── TransientNetwork         connection failure, timeout, or a 5xx from the service   (retriable)
        ├── IteratorExpired          a shard iterator expired; get a new one, then read again (retriable)
        └── InconsistentResponse     a response that breaks the API contract; read again     (retriable)

``kcl_daemon.aws.errors.map_aws_errors()`` raises the ``AwsError`` branch; it is the only place that
sees botocore exceptions (``kcl_daemon.aws`` is the only package that imports boto3).

What a shell sees is :class:`ExitStatus`, defined here once; the CLI maps errors to it in one place
(``kcl_daemon.cli.exit_on_errors``).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence


class ExitStatus(enum.IntEnum):
    """Every exit status of ``kcl-daemon``."""

    OK = 0  #: a graceful stop, or a command that did what it was asked
    FAILED = 1  #: the worker could not start or go on; an AWS call or the input's processing failed
    CONFIG = 2  #: bad configuration or input: every problem is listed and nothing was started
    INTERRUPTED = 130  #: a second signal stopped it at once (128 + SIGINT, as shells report Ctrl-C)


class KclError(Exception):
    """Root of every error kcl-daemon raises on purpose."""

    retriable: bool = False

    def __str__(self) -> str:
        message = super().__str__()
        return f"[{type(self).__name__}] {message}" if message else type(self).__name__


class ConfigError(KclError):
    """The configuration is invalid. ``problems`` lists every problem, each naming its key and source."""

    def __init__(self, problems: Sequence[str], warnings: Sequence[str] = ()) -> None:
        self.problems = tuple(problems)
        #: warnings found on the way, shown together with the problems
        self.warnings = tuple(warnings)
        super().__init__("; ".join(self.problems))


class RecordsFileError(KclError):
    """A `replay` records file is unreadable or has a bad line."""


class CheckpointUnusable(KclError):
    """A stored checkpoint cannot be used to read its shard (see ``core.checkpoint_validity``)."""


class CheckpointRefused(KclError):
    """A checkpoint request was refused; ``java_name`` is what the child receives in ``error``."""

    def __init__(self, java_name: str, reason: str) -> None:
        self.java_name = java_name
        self.reason = reason
        super().__init__(f"{java_name}: {reason}")


class ChildFault(KclError):
    """A record-processor child failed; the shard stops it and starts a new one from the last checkpoint."""

    retriable = True


class ChildSpawnFailed(ChildFault):
    pass


class ChildExited(ChildFault):
    pass


class ChildTimeout(ChildFault):
    pass


class ChildProtocolViolation(ChildFault):
    pass


class ChildLineTooLong(ChildFault):
    pass


class ChildNotReading(ChildFault):
    pass


class DeadLetterWriteFailed(KclError):
    """A poison record could not be written to the dead-letter destination (its shard waits and retries)."""

    retriable = True


class AwsError(KclError):
    """An AWS call failed. Subclasses say how; a bare ``AwsError`` is a non-retriable client error."""


class LeaseConflict(AwsError):
    """A conditional write failed: the lease changed since we read it (lost, taken, or already there)."""


class LeaseUnreadable(LeaseConflict):
    """A lease item this worker wrote or re-read cannot be decoded (a corrupt attribute).

    Only that lease is affected: it is given up (its child hears ``leaseLost``) and left to whoever
    repairs the item; takers skip it meanwhile.
    """


class Throttled(AwsError):
    """The service throttled the call or a rate limit was hit; back off and retry."""

    retriable = True


class DependencyUnavailable(AwsError):
    """The lease table or the stream does not exist (or never became ACTIVE)."""


class TransientNetwork(AwsError):
    """The endpoint could not be reached, the connection broke, a timeout hit, or the service had a 5xx."""

    retriable = True


class IteratorExpired(AwsError):
    """A shard iterator expired (older than 5 minutes) or is no longer valid for GetRecords.

    Retrying the same call cannot help, retrying the *read* can: the polling source gets a new iterator
    after the last record it fetched, then retries. Only GetRecords raises it.
    """

    retriable = True


class ShardNotFound(DependencyUnavailable):
    """GetShardIterator/GetRecords found no such shard or stream: the shard ended with no children (6.6)."""


class LeaseTableGone(DependencyUnavailable):
    """The lease table was deleted while the worker ran and stayed missing for the failover time.

    Fatal: recreating it would start every shard again from the initial position, silently reprocessing
    or skipping data; the worker stops and exits non-zero instead.
    """


class InconsistentResponse(AwsError):
    """A response breaks the API contract (e.g. GetRecords with a next iterator *and* child shards)."""

    retriable = True


class CommandFailed(KclError):
    """An operator command refused its input or failed; ``message`` is the whole story for the shell and
    ``status`` the :class:`ExitStatus` it ends with (``kcl_daemon.cli.exit_on_errors`` prints and exits)."""

    def __init__(self, message: str, status: ExitStatus = ExitStatus.FAILED) -> None:
        self.message = message
        self.status = status
        super().__init__(message)
