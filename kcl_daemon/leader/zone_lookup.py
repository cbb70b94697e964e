"""Ask the environment which availability zone this worker runs in (``zoneFromEnvironment=true``).

Two cheap sources, tried in order, each with a short timeout; any failure means "no zone from here"
and is logged at debug level (the worker then falls back to the worker-id prefix):

* ECS task metadata v4: ``$ECS_CONTAINER_METADATA_URI_V4/task`` -> ``AvailabilityZone``;
* EC2 instance metadata (IMDSv2): a session token by ``PUT /latest/api/token``, then
  ``GET /latest/meta-data/placement/availability-zone`` (skipped when
  ``AWS_EC2_METADATA_DISABLED=true``, as the AWS SDKs do).

Parsing is pure (:mod:`kcl_daemon.core.leader.zones`); this module only does the HTTP.
"""

from __future__ import annotations

import logging
import os
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Final

from kcl_daemon.core.leader.zones import zone_from_ecs_task_metadata, zone_from_imds

logger = logging.getLogger(__name__)

IMDS_ENDPOINT: Final = "http://169.254.169.254"
ECS_METADATA_ENV: Final = "ECS_CONTAINER_METADATA_URI_V4"
TIMEOUT_S: Final = 1.0


def _fetch(
    url: str, timeout_s: float, method: str = "GET", headers: Mapping[str, str] | None = None
) -> str | None:
    """The body of an HTTP(S) answer with status 2xx; None on any failure (logged at debug level)."""
    if not url.startswith(("http://", "https://")):
        return None
    request = urllib.request.Request(url, method=method, headers=dict(headers or {}))  # noqa: S310 - http(s) only
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310 - http(s) only
            body: bytes = response.read(65536)
            return body.decode("utf-8", "replace")
    except (OSError, urllib.error.URLError, ValueError) as exc:
        logger.debug("zone lookup: %s %s failed: %s", method, url, exc)
        return None


def zone_from_ecs(environ: Mapping[str, str], timeout_s: float = TIMEOUT_S) -> str | None:
    base = environ.get(ECS_METADATA_ENV)
    if not base:
        return None
    body = _fetch(base.rstrip("/") + "/task", timeout_s)
    return zone_from_ecs_task_metadata(body) if body is not None else None


def zone_from_ec2(
    environ: Mapping[str, str], endpoint: str = IMDS_ENDPOINT, timeout_s: float = TIMEOUT_S
) -> str | None:
    if environ.get("AWS_EC2_METADATA_DISABLED", "").lower() == "true":
        return None
    token = _fetch(
        endpoint + "/latest/api/token", timeout_s, "PUT", {"X-aws-ec2-metadata-token-ttl-seconds": "60"}
    )
    if not token:
        return None
    body = _fetch(
        endpoint + "/latest/meta-data/placement/availability-zone",
        timeout_s,
        headers={"X-aws-ec2-metadata-token": token.strip()},
    )
    return zone_from_imds(body) if body is not None else None


def zone_from_environment(
    environ: Mapping[str, str] | None = None, imds_endpoint: str = IMDS_ENDPOINT, timeout_s: float = TIMEOUT_S
) -> str | None:
    """ECS first, then EC2; None when neither answers."""
    env = os.environ if environ is None else environ
    zone = zone_from_ecs(env, timeout_s) or zone_from_ec2(env, imds_endpoint, timeout_s)
    logger.info("zone from the environment: %s", zone or "none found")
    return zone
