"""The daemon's end of one child's log/metric channel: apply the policy, log, count, export.

Log lines are logged under ``kcl_daemon.child`` with the child's level (the shard id comes from the
log context of the shard's task, like the child's stderr). Metrics go to the shard's observer. A dropped
line is counted by reason; the first drop of each reason per child is logged as a warning, later ones
at debug, so a misbehaving child cannot flood the log either.
"""

from __future__ import annotations

import logging

from kcl_daemon.clock import Clock
from kcl_daemon.core.lifecycle.child_channel import (
    AcceptedLog,
    AcceptedMetric,
    ChannelLimits,
    ChannelState,
    Dropped,
    decide,
)
from kcl_daemon.metrics.observer import ShardObserver
from kcl_protocol import ChannelMessage

logger = logging.getLogger(__name__)
child_logger = logging.getLogger("kcl_daemon.child")


class ChannelSink:
    def __init__(self, observer: ShardObserver, clock: Clock, limits: ChannelLimits | None = None) -> None:
        self._observer = observer
        self._clock = clock
        self._limits = limits or ChannelLimits()
        self._state = ChannelState.start(self._limits, clock.monotonic())
        self._warned: set[str] = set()
        self.accepted = 0
        self.dropped = 0

    def __call__(self, message: ChannelMessage) -> None:
        verdict, self._state = decide(message, self._state, self._clock.monotonic(), self._limits)
        match verdict:
            case AcceptedLog(level=level, level_name=name, message=text):
                self.accepted += 1
                child_logger.log(level, "%s", text, extra={"child_channel": True})
                self._observer.child_log(name)
            case AcceptedMetric(name=name, value=value, unit=unit, dimensions=dims):
                self.accepted += 1
                self._observer.child_metric(name, value, unit, dims)
            case Dropped(reason=reason, detail=detail):
                self.dropped += 1
                self._observer.channel_dropped(reason)
                level = logging.DEBUG if reason in self._warned else logging.WARNING
                self._warned.add(reason)
                logger.log(level, "dropped a line of the child's channel (%s): %s", reason, detail)
