"""Count DynamoDB and Kinesis calls, throttles and errors by operation, from botocore's events; and
watch whether one table answers at all (:class:`TableContact`, for the readiness check).

Registered on each client's event system: ``after-call`` sees every answered call (an error answer
carries ``Error.Code``); ``after-call-error`` sees calls that got no answer (connection errors, read
timeouts). Throttling is recognised by error code, as botocore's own retry handler does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    from botocore.awsrequest import AWSResponse
    from botocore.client import BaseClient
    from botocore.model import OperationModel


THROTTLE_CODES: Final = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "Throttling",
        "LimitExceededException",
        "RequestLimitExceeded",
        "TooManyRequestsException",
        "ThrottledException",
        "RequestThrottled",
    }
)


class CallCounters(Protocol):
    def call(self, service: str, operation: str, *, error: bool, throttled: bool) -> None: ...


def instrument(client: BaseClient, service: str, counters: CallCounters) -> None:
    """Count every call ``client`` makes under ``service`` (``dynamodb``, ``kinesis``)."""

    def after_call(*, model: OperationModel, parsed: object = None, **_: object) -> None:
        code = ""
        if isinstance(parsed, dict):
            error = parsed.get("Error")
            if isinstance(error, dict):
                code = str(error.get("Code") or "")
        counters.call(service, model.name, error=bool(code), throttled=code in THROTTLE_CODES)

    def after_call_error(*, model: OperationModel | None = None, **_: object) -> None:
        name = getattr(model, "name", "unknown")
        counters.call(service, name, error=True, throttled=False)

    prefix = client.meta.service_model.service_id.hyphenize()
    client.meta.events.register(f"after-call.{prefix}", after_call, unique_id=f"kcl-metrics-{service}")
    client.meta.events.register(
        f"after-call-error.{prefix}", after_call_error, unique_id=f"kcl-metrics-error-{service}"
    )


#: Answers that say the table is there and the call was understood, even though it did not succeed.
_ANSWERED_CODES: Final = frozenset(
    {"ConditionalCheckFailedException", "TransactionCanceledException", "ValidationException"}
)
#: Answers that say the table cannot be used by this worker as things stand.
_REFUSED_CODES: Final = frozenset(
    {
        "AccessDeniedException",
        "UnrecognizedClientException",
        "ExpiredTokenException",
        "InvalidSignatureException",
        "MissingAuthenticationTokenException",
    }
)
_CONTEXT_KEY: Final = "kcl_table_name"


@dataclass(slots=True)
class TableContact:
    """Whether calls to one DynamoDB table get answers: the start of the current failure streak (None
    while the last call succeeded) and its last error. A conditional-check failure or a throttle is an
    answer; a connection failure, a 5xx or ``ResourceNotFoundException`` (the table is gone) is not.

    Written on the calling threads and read from the health endpoint's: plain attribute stores only.
    """

    table_name: str
    monotonic: Callable[[], float] = time.monotonic
    failing_since: float | None = None
    last_error: str | None = None
    calls: int = 0

    def answered(self) -> None:
        self.calls += 1
        self.failing_since = None
        self.last_error = None

    def failed(self, why: str) -> None:
        self.calls += 1
        if self.failing_since is None:
            self.failing_since = self.monotonic()
        self.last_error = why

    def failing_for(self, now: float) -> float | None:
        since = self.failing_since
        return None if since is None else max(now - since, 0.0)


def watch_table(client: BaseClient, contact: TableContact) -> None:
    """Report every call ``client`` (a DynamoDB client) makes on ``contact``'s table to ``contact``."""
    prefix = client.meta.service_model.service_id.hyphenize()
    table = contact.table_name

    def before(*, params: object = None, context: object = None, **_: object) -> None:
        if isinstance(params, dict) and isinstance(context, dict) and params.get("TableName") == table:
            context[_CONTEXT_KEY] = table

    def after_call(
        *,
        parsed: object = None,
        context: object = None,
        http_response: AWSResponse | None = None,
        **_: object,
    ) -> None:
        if not isinstance(context, dict) or context.get(_CONTEXT_KEY) != table:
            return
        error = parsed.get("Error") if isinstance(parsed, dict) else None
        code = str(error.get("Code") or "") if isinstance(error, dict) else ""
        status = getattr(http_response, "status_code", 200)
        if not code or code in _ANSWERED_CODES or code in THROTTLE_CODES:
            contact.answered()
        elif code == "ResourceNotFoundException":
            contact.failed(f"table {table} does not exist (ResourceNotFoundException)")
        elif status >= 500 or code in _REFUSED_CODES:
            contact.failed(f"{code} (HTTP {status})")
        else:
            contact.answered()  # answered, with an error that is about the request, not the table

    def after_call_error(*, exception: object = None, context: object = None, **_: object) -> None:
        if isinstance(context, dict) and context.get(_CONTEXT_KEY) == table:
            contact.failed(f"no answer: {type(exception).__name__}: {exception}")

    unique = f"kcl-contact-{table}"
    client.meta.events.register(f"before-parameter-build.{prefix}", before, unique_id=f"{unique}-before")
    client.meta.events.register(f"after-call.{prefix}", after_call, unique_id=f"{unique}-after")
    client.meta.events.register(f"after-call-error.{prefix}", after_call_error, unique_id=f"{unique}-error")
