"""Translate botocore failures into the project's error tree (``AwsError`` and its subclasses).

The one place where exceptions of the layers below (botocore, its event-stream parser, urllib3,
``http.client``, sockets and TLS) become the project's errors. Whatever way a transport fails - a
refused or reset connection, a timeout, a reply cut short, garbage, a TLS handshake closed half-way, an
event-stream frame with a bad checksum - the caller sees :class:`TransientNetwork` (retriable).

:func:`guard_responses` is installed on every client the daemon builds: botocore makes one attempt per
call (the named policies retry), and when that attempt's 2xx reply is cut short or fails its checksum,
botocore would otherwise hand the partial body over as an empty success (a scan with no leases, a
missing lock item, a write without its item).
"""

from __future__ import annotations

import http.client
import json
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

import urllib3.exceptions
from botocore.eventstream import ParserError as EventStreamError
from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.parsers import ResponseParserError

from kcl_daemon.errors import (
    AwsError,
    DependencyUnavailable,
    IteratorExpired,
    LeaseConflict,
    Throttled,
    TransientNetwork,
)

if TYPE_CHECKING:
    from botocore.awsrequest import AWSResponse
    from botocore.client import BaseClient
    from botocore.model import OperationModel

CONDITIONAL_CHECK_FAILED: Final = "ConditionalCheckFailedException"

_BY_CODE: Final[dict[str, type[AwsError]]] = {
    CONDITIONAL_CHECK_FAILED: LeaseConflict,
    "ResourceNotFoundException": DependencyUnavailable,
    "ProvisionedThroughputExceededException": Throttled,
    "ThrottlingException": Throttled,
    "Throttling": Throttled,
    "RequestLimitExceeded": Throttled,
    "LimitExceededException": Throttled,
    "TransactionConflictException": Throttled,
    "InternalServerError": TransientNetwork,
    "InternalFailure": TransientNetwork,
    "ServiceUnavailable": TransientNetwork,
    "ServiceUnavailableException": TransientNetwork,
    "ExpiredIteratorException": IteratorExpired,
}


class IncompleteResponse(HTTPClientError):
    """A 2xx reply that is shorter than its Content-Length, fails its CRC32, or is not JSON."""


def _check_reply(
    *,
    http_response: AWSResponse | None = None,
    parsed: object = None,
    model: OperationModel | None = None,
    **_: object,
) -> None:
    """``after-call`` handler: refuse a successful-looking reply that is not whole.

    With one attempt per call, botocore hands such a reply over as it parsed it: a body cut short or
    garbled reads as an empty result (DynamoDB's CRC32 check would only ask for another attempt)."""
    if http_response is None or not 200 <= getattr(http_response, "status_code", 0) < 300:
        return
    if getattr(model, "has_event_stream_output", False):
        return  # an event stream has no length; its frames carry their own checksums
    headers = http_response.headers
    body = http_response.content
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) != len(body):
        raise IncompleteResponse(error=f"a reply of {len(body)} bytes where {declared} were announced")
    crc = headers.get("x-amz-crc32")
    if crc is not None and crc.isdigit() and int(crc) != zlib.crc32(body) & 0xFFFFFFFF:
        raise IncompleteResponse(error="a reply whose CRC32 does not match its body")
    if isinstance(parsed, dict) and set(parsed) <= _METADATA_ONLY and not _well_formed(headers, body):
        # botocore reads a body it cannot parse as an empty result
        raise IncompleteResponse(error="a reply that is neither JSON nor XML")


_METADATA_ONLY: Final = frozenset({"ResponseMetadata"})


def _well_formed(headers: Mapping[str, str], body: bytes) -> bool:
    """Whether a body that botocore parsed to nothing is really an empty result (JSON or XML)."""
    if not body.strip():
        return True
    if "json" in str(headers.get("content-type", "")):
        try:
            return isinstance(json.loads(body), dict)
        except ValueError:
            return False
    return body.lstrip().startswith(b"<")


def guard_responses(client: BaseClient) -> None:
    """Make ``client`` raise on a truncated or corrupt 2xx reply instead of returning it as a success."""
    client.meta.events.register("after-call", _check_reply, unique_id="kcl-guard-responses")


def error_code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _from_client_error(
    exc: ClientError, what: str, overrides: Mapping[str, type[AwsError]] | None = None
) -> AwsError:
    code = error_code(exc)
    cls = overrides.get(code) if overrides else None
    if cls is None:
        cls = _BY_CODE.get(code)
    if cls is None:
        status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        cls = TransientNetwork if status >= 500 else AwsError
    message = exc.response.get("Error", {}).get("Message", "")
    return cls(f"{what}: {code or 'unknown error'}: {message}".rstrip(": "))


@contextmanager
def map_aws_errors(what: str, overrides: Mapping[str, type[AwsError]] | None = None) -> Iterator[None]:
    """Re-raise botocore errors from the block as ``AwsError`` subclasses, chained; ``what`` names the call.

    ``ConditionalCheckFailedException`` -> :class:`LeaseConflict`; ``ResourceNotFoundException`` ->
    :class:`DependencyUnavailable`; throttling codes -> :class:`Throttled`;
    ``ExpiredIteratorException`` -> :class:`IteratorExpired`; connection failures, timeouts, replies cut
    short, broken event streams, urllib3 / http.client / socket / TLS errors and 5xx ->
    :class:`TransientNetwork`; any other botocore error -> :class:`AwsError`. ``overrides`` (error code
    -> class) take precedence, for codes whose meaning depends on the call.
    """
    try:
        yield
    except ClientError as exc:
        raise _from_client_error(exc, what, overrides) from exc
    except (BotoConnectionError, HTTPClientError, ResponseParserError) as exc:
        raise TransientNetwork(f"{what}: {exc}") from exc
    except BotoCoreError as exc:
        raise AwsError(f"{what}: {exc}") from exc
    except (EventStreamError, urllib3.exceptions.HTTPError, http.client.HTTPException, OSError) as exc:
        # below botocore's own mapping: an event stream that broke, a connection that died mid-read
        raise TransientNetwork(f"{what}: the connection broke: {type(exc).__name__}: {exc}") from exc
