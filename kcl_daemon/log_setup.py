"""Log output for the CLI: a readable line format by default, or one JSON object per line (orjson).

Every record carries the shard id and worker id from :mod:`kcl_daemon.log_context`. Child stderr is
logged under the ``kcl_daemon.child`` logger, so it is easy to filter or route.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime

import orjson

from kcl_daemon.config.secrets import MaskingFilter
from kcl_daemon.log_context import ContextFilter

HUMAN_FORMAT = "%(asctime)s %(levelname)-7s [%(shard_id)s] %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "shard": getattr(record, "shard_id", "-"),
            "worker": getattr(record, "worker_id", "-"),
            "message": record.getMessage(),
        }
        if record.exc_info:
            payload["exception"] = record.exc_text or self.formatException(record.exc_info)
        return orjson.dumps(payload).decode()


def configure_logging(level: str = "INFO", log_format: str = "text") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(ContextFilter())
    handler.addFilter(MaskingFilter())  # a password in an endpoint URL never reaches the log
    handler.setFormatter(JsonFormatter() if log_format == "json" else logging.Formatter(HUMAN_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # botocore is chatty at DEBUG and could echo request bodies; keep it at WARNING.
    logging.getLogger("botocore").setLevel(logging.WARNING)
