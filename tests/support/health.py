"""Asking a daemon's health endpoints (``/healthz``, ``/readyz`` on its metrics port) from a test."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any


def ask(base_url: str, path: str) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON body) of ``path``; (0, {}) while nothing listens yet."""
    try:
        with urllib.request.urlopen(f"{base_url}{path}", timeout=5) as response:  # noqa: S310 - loopback
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except OSError:
        return 0, {}


def failing_checks(body: Mapping[str, Any]) -> dict[str, str]:
    """check name -> detail, of the checks that failed."""
    return {check["name"]: check["detail"] for check in body.get("checks", []) if not check["ok"]}
