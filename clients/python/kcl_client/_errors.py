"""The exceptions a record processor can see, and which checkpoint errors are worth retrying.

Checkpoint failures arrive from the daemon as the simple class name of the Java exception
(``"ThrottlingException"``, ``"ShutdownException"``, ...). They are never mapped to Python classes: one
:class:`CheckpointError` carries the name, so code written for any daemon version keeps working.
"""

from __future__ import annotations

from typing import Final

THROTTLING: Final = "ThrottlingException"
SHUTDOWN: Final = "ShutdownException"
INVALID_STATE: Final = "InvalidStateException"
DEPENDENCY: Final = "KinesisClientLibDependencyException"
ILLEGAL_ARGUMENT: Final = "IllegalArgumentException"

#: Errors that say "try again later": the lease table was throttled or briefly unreachable.
RETRIABLE_ERRORS: Final = frozenset({THROTTLING, DEPENDENCY})


class CheckpointError(Exception):
    """The daemon refused a checkpoint.

    ``name`` is the Java exception name the daemon sent, for example:

    * ``ThrottlingException``: the lease table is throttled; retry later (``retriable``);
    * ``KinesisClientLibDependencyException``: the lease table failed in some other way (``retriable``);
    * ``ShutdownException``: this worker no longer holds the lease; stop checkpointing;
    * ``InvalidStateException``: no checkpointer for this action, or the lease table is unusable;
    * ``IllegalArgumentException``: the position is outside what was delivered, or malformed.

    ``sequence_number`` and ``sub_sequence_number`` are the position that was requested (``None`` for
    "everything delivered so far").
    """

    def __init__(self, name: str, sequence_number: str | None = None, sub_sequence_number: int | None = None):
        super().__init__(name, sequence_number, sub_sequence_number)
        self.name = name
        self.sequence_number = sequence_number
        self.sub_sequence_number = sub_sequence_number

    @property
    def retriable(self) -> bool:
        """True when trying the same checkpoint again later may succeed."""
        return self.name in RETRIABLE_ERRORS

    def __str__(self) -> str:
        where = "everything delivered so far" if self.sequence_number is None else self.sequence_number
        if self.sequence_number is not None and self.sub_sequence_number is not None:
            where = f"{where}/{self.sub_sequence_number}"
        return f"{self.name} while checkpointing at {where}"


class ProtocolError(Exception):
    """The daemon sent something this client cannot act on (a known action with missing or mistyped fields).

    :func:`kcl_client.run` lets it propagate: the process exits with status 1 and a traceback, which is
    what the daemon expects of a child that cannot continue.
    """
