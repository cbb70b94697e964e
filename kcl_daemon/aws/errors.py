"""Translate botocore failures into the project's error tree (``AwsError`` and its subclasses)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Final

from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

from kcl_daemon.errors import (
    AwsError,
    DependencyUnavailable,
    IteratorExpired,
    LeaseConflict,
    Throttled,
    TransientNetwork,
)

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
    ``ExpiredIteratorException`` -> :class:`IteratorExpired`; connection failures, timeouts and 5xx ->
    :class:`TransientNetwork`; anything else -> :class:`AwsError`. ``overrides`` (error code -> class)
    take precedence, for codes whose meaning depends on the call.
    """
    try:
        yield
    except ClientError as exc:
        raise _from_client_error(exc, what, overrides) from exc
    except (BotoConnectionError, HTTPClientError) as exc:
        raise TransientNetwork(f"{what}: {exc}") from exc
    except BotoCoreError as exc:
        raise AwsError(f"{what}: {exc}") from exc
