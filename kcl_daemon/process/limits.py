"""The process's own limits, raised for the children it starts."""

from __future__ import annotations

import logging
import resource

logger = logging.getLogger(__name__)


def raise_open_file_limit() -> None:
    """Raise the soft limit on open files to the hard limit, as the JVM does for the Java daemon.

    Each child takes four descriptors (three pipes and the pidfd that reports its exit): a worker with
    256 shards needs over 1,000, above the soft limit of 1,024 many systems start processes with.
    """
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 65536)
        if soft != resource.RLIM_INFINITY and soft < target:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            logger.debug("open file limit raised from %d to %d", soft, target)
    except (ValueError, OSError) as exc:  # a container may refuse it: the worker runs with what it has
        logger.info("open file limit left at its soft value: %s", exc)
