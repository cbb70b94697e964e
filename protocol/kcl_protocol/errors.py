"""Errors of the wire protocol, and the Java names a checkpoint reply can carry.

Tree::

    ProtocolError
    ├── LocalProtocolError   the daemon side misused the conversation (a bug in the caller)
    └── RemoteProtocolError  the child broke the protocol (wrong responseFor, ...)

A non-JSON or blank line from a child is *not* an error: the codec reports it as noise and the
conversation skips it, exactly as the Java daemon does.
"""

from __future__ import annotations

import enum


class ProtocolError(Exception):
    """Base of every protocol error."""


class LocalProtocolError(ProtocolError):
    """The caller drove the conversation out of order (e.g. sent an action while one is outstanding)."""


class RemoteProtocolError(ProtocolError):
    """The child sent something the protocol forbids at this point."""


class CheckpointErrorName(enum.StrEnum):
    """The `error` values of a checkpoint reply: Java exception simple names, exactly as Java sends them."""

    SHUTDOWN = "ShutdownException"
    THROTTLING = "ThrottlingException"
    INVALID_STATE = "InvalidStateException"
    DEPENDENCY = "KinesisClientLibDependencyException"
    ILLEGAL_ARGUMENT = "IllegalArgumentException"
