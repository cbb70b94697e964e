"""Per-task logging context (worker id, shard id) carried in contextvars and stamped on every record.

The scheduler sets the shard id once in each shard's task; asyncio copies the context into every task
that shard starts (its child's stderr drain included), so all their log lines name the shard.
"""

from __future__ import annotations

import contextvars
import logging

shard_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("shard_id", default="-")
worker_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("worker_id", default="-")


class ContextFilter(logging.Filter):
    """Adds ``shard_id`` and ``worker_id`` attributes to every record that lacks them."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "shard_id"):
            record.shard_id = shard_id_var.get()
        if not hasattr(record, "worker_id"):
            record.worker_id = worker_id_var.get()
        return True
