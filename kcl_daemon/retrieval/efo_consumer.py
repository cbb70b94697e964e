"""The stream consumer an enhanced fan-out worker reads through, resolved once and shared by its shards.

The first shard that needs it (on a worker thread) resolves it under the ``KINESIS`` retry policy: a
configured ``fanoutConfig.consumerArn`` is checked to be ACTIVE; otherwise the consumer named
``fanoutConfig.consumerName`` (default: the application name) is reused or registered. Later shards
get the cached ARN. The worker never deregisters: :func:`deregister_consumer` (``kcl-daemon
deregister-consumer``) does, only on request.
"""

from __future__ import annotations

import logging
import threading

from kcl_daemon.aws.clients import client_settings_from, make_client
from kcl_daemon.aws.fanout import Fanout
from kcl_daemon.config.settings import Settings
from kcl_daemon.errors import ConfigError
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


def deregister_consumer(settings: Settings) -> tuple[str, bool]:
    """``kcl-daemon deregister-consumer``: deregister the configured consumer (``fanoutConfig.consumerArn``,
    else ``fanoutConfig.consumerName`` or the application name on the stream). Returns (what, whether one
    existed). Raises :class:`ConfigError` when the configuration does not name one."""
    fanout = Fanout(make_client(client_settings_from(settings), "kinesis"))
    if settings.fanout_consumer_arn:
        arn = settings.fanout_consumer_arn
        return arn, KINESIS.call(fanout.deregister_consumer, None, None, arn)
    name = settings.fanout_consumer_name or settings.application_name
    stream = settings.effective_stream_name
    if name is None or stream is None:
        raise ConfigError(
            [
                "deregister-consumer needs fanoutConfig.consumerArn, or streamName/streamArn with "
                "fanoutConfig.consumerName or applicationName"
            ]
        )
    stream_arn = settings.stream_arn or KINESIS.call(fanout.stream_arn, stream)
    return f"{name} of {stream}", KINESIS.call(fanout.deregister_consumer, stream_arn, name)
