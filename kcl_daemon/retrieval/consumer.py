"""The stream consumer an enhanced fan-out worker reads through, resolved once and shared by its shards.

The first shard that needs it (on a worker thread) resolves it under the ``KINESIS`` retry policy: a
configured ``fanoutConfig.consumerArn`` is checked to be ACTIVE; otherwise the consumer named
``fanoutConfig.consumerName`` (default: the application name) is reused or registered. Later shards
get the cached ARN. Nothing here ever deregisters (``kcl-daemon deregister-consumer`` does, on request).
"""

from __future__ import annotations

import logging
import threading

from kcl_daemon.aws.fanout import Fanout
from kcl_daemon.retry import KINESIS

logger = logging.getLogger(__name__)


class ConsumerResolver:
    def __init__(self, fanout: Fanout, stream_name: str, name: str, arn: str | None = None) -> None:
        self._fanout = fanout
        self._stream_name = stream_name
        self._name = name
        self._configured_arn = arn
        self._arn: str | None = None
        self._lock = threading.Lock()

    def arn(self) -> str:
        """The consumer's ARN (blocking; resolved on first use)."""
        with self._lock:
            if self._arn is None:
                self._arn = self._resolve()
            return self._arn

    def _resolve(self) -> str:
        if self._configured_arn:
            arn = KINESIS.call(self._fanout.check_consumer, self._configured_arn)
            logger.info("enhanced fan-out through the configured consumer %s", arn)
            return arn
        stream_arn = KINESIS.call(self._fanout.stream_arn, self._stream_name)
        arn = KINESIS.call(self._fanout.ensure_consumer, stream_arn, self._name)
        logger.info("enhanced fan-out through consumer %s (%s)", self._name, arn)
        return arn
