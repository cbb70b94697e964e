"""AWS Signature Version 4 for the lean path's one request shape: ``POST /`` with a JSON body, no query.

botocore's signer rebuilds the canonical request from a generic request object and derives the signing
key (four HMACs) on every call; this one signs the only shape the AWS JSON protocols use, and keeps the
derived key per (secret key, day, region, service): a call costs one SHA-256 of the body, one of the
canonical request and one HMAC. The headers it signs are the ones the lean path sends
(``content-type``, ``host``, ``x-amz-date``, ``x-amz-target`` and, with temporary credentials,
``x-amz-security-token``); ``tests/unit/aws/test_lean_sigv4.py`` checks the result against botocore's
``SigV4Auth`` for the same inputs.
"""

from __future__ import annotations

import hashlib
import hmac
from datetime import UTC, datetime
from typing import Final, NamedTuple

ALGORITHM: Final = "AWS4-HMAC-SHA256"
_SHA256 = hashlib.sha256


class FrozenCredentials(NamedTuple):
    """A credential set of one moment (botocore's ``get_frozen_credentials()`` has the same fields)."""

    access_key: str
    secret_key: str
    token: str | None


def amz_date(moment: datetime) -> str:
    """``moment`` (aware) as SigV4's ``X-Amz-Date``: ``YYYYMMDDTHHMMSSZ`` in UTC."""
    return moment.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


class Signer:
    """Signs ``POST /`` JSON requests for one service in one region (thread-safe: the key cache is a
    single reference swapped whole)."""

    def __init__(self, service: str, region: str) -> None:
        self.service = service
        self.region = region
        self._key: tuple[str, str, bytes] | None = None  # (secret key, day, derived key)

    def _signing_key(self, secret_key: str, day: str) -> bytes:
        cached = self._key
        if cached is not None and cached[0] == secret_key and cached[1] == day:
            return cached[2]
        key = hmac.digest(("AWS4" + secret_key).encode(), day.encode(), "sha256")
        key = hmac.digest(key, self.region.encode(), "sha256")
        key = hmac.digest(key, self.service.encode(), "sha256")
        key = hmac.digest(key, b"aws4_request", "sha256")
        self._key = (secret_key, day, key)
        return key

    def headers(
        self,
        host: str,
        target: str,
        content_type: str,
        body: bytes,
        credentials: FrozenCredentials,
        stamp: str,
    ) -> dict[str, str]:
        """The request's headers, ``Authorization`` included. ``host`` is the Host header's value (with
        the port when it is not the scheme's default); ``stamp`` is :func:`amz_date` of now."""
        day = stamp[:8]
        token = credentials.token
        if token:
            canonical_headers = (
                f"content-type:{content_type}\nhost:{host}\nx-amz-date:{stamp}\n"
                f"x-amz-security-token:{token}\nx-amz-target:{target}\n"
            )
            signed = "content-type;host;x-amz-date;x-amz-security-token;x-amz-target"
        else:
            canonical_headers = (
                f"content-type:{content_type}\nhost:{host}\nx-amz-date:{stamp}\nx-amz-target:{target}\n"
            )
            signed = "content-type;host;x-amz-date;x-amz-target"
        canonical = f"POST\n/\n\n{canonical_headers}\n{signed}\n{_SHA256(body).hexdigest()}"
        scope = f"{day}/{self.region}/{self.service}/aws4_request"
        to_sign = f"{ALGORITHM}\n{stamp}\n{scope}\n{_SHA256(canonical.encode()).hexdigest()}"
        signature = hmac.new(
            self._signing_key(credentials.secret_key, day), to_sign.encode(), _SHA256
        ).hexdigest()
        headers = {
            "Content-Type": content_type,
            "X-Amz-Date": stamp,
            "X-Amz-Target": target,
            "Authorization": (
                f"{ALGORITHM} Credential={credentials.access_key}/{scope}, "
                f"SignedHeaders={signed}, Signature={signature}"
            ),
        }
        if token:
            headers["X-Amz-Security-Token"] = token
        return headers
