"""Count DynamoDB and Kinesis calls, throttles and errors by operation, from botocore's events.

Registered on each client's event system: ``after-call`` sees every answered call (an error answer
carries ``Error.Code``); ``after-call-error`` sees calls that got no answer (connection errors, read
timeouts). Throttling is recognised by error code, as botocore's own retry handler does.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

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


def instrument(client: Any, service: str, counters: CallCounters) -> None:
    """Count every call ``client`` makes under ``service`` (``dynamodb``, ``kinesis``)."""

    def after_call(*, model: Any, parsed: Any = None, **_: Any) -> None:
        code = ""
        if isinstance(parsed, dict):
            error = parsed.get("Error")
            if isinstance(error, dict):
                code = str(error.get("Code") or "")
        counters.call(service, model.name, error=bool(code), throttled=code in THROTTLE_CODES)

    def after_call_error(*, model: Any = None, **_: Any) -> None:
        name = getattr(model, "name", "unknown")
        counters.call(service, name, error=True, throttled=False)

    prefix = client.meta.service_model.service_id.hyphenize()
    client.meta.events.register(f"after-call.{prefix}", after_call, unique_id=f"kcl-metrics-{service}")
    client.meta.events.register(
        f"after-call-error.{prefix}", after_call_error, unique_id=f"kcl-metrics-error-{service}"
    )
