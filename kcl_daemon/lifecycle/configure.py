"""Turn the parsed :class:`Settings` into the shard consumer's :class:`ConsumerSettings` (seconds inside)."""

from __future__ import annotations

from kcl_daemon.aws.clients import client_settings_from
from kcl_daemon.config.settings import Settings
from kcl_daemon.core.lifecycle.dead_letter_address import parse_dead_letter_address
from kcl_daemon.core.lifecycle.poison import PoisonPolicy
from kcl_daemon.core.lifecycle.restart_policy import RestartPolicy
from kcl_daemon.dead_letters.sinks import DeadLetterSink, open_sink
from kcl_daemon.lifecycle.shard_consumer import ConsumerSettings
from kcl_daemon.process.child import StopTimeouts
from kcl_daemon.process.session import ActionTimeouts


def consumer_settings(settings: Settings, *, return_when_parked: bool) -> ConsumerSettings:
    shutdown = settings.shutdown_timeout_s
    per_action = {
        "initialize": settings.initialize_timeout_s,
        "processRecords": settings.process_records_timeout_s,
        "shardEnded": shutdown,
        "leaseLost": shutdown,
        "shutdownRequested": shutdown,
    }
    return ConsumerSettings(
        timeouts=ActionTimeouts(
            default_s=settings.action_timeout_s,
            per_action_s={k: v for k, v in per_action.items() if v is not None},
            write_s=settings.child_write_timeout_s,
            stall_warning_s=settings.child_stall_warning_s or None,
        ),
        stop=StopTimeouts(settings.child_stop_timeout_s, settings.child_stop_timeout_s),
        restart=RestartPolicy(
            initial_backoff_s=settings.child_restart_backoff_s,
            max_backoff_s=settings.child_restart_max_backoff_s,
            max_consecutive_failures=settings.child_max_consecutive_failures,
        ),
        call_process_records_even_for_empty_record_list=settings.call_process_records_even_for_empty_record_list,
        child_channel=settings.child_channel,
        return_when_parked=return_when_parked,
        poison_policy=PoisonPolicy(settings.poison_record_policy),
        max_delivery_attempts=settings.max_delivery_attempts,
        dead_letters=dead_letter_sink(settings),
        application=settings.application_name or "",
    )


def dead_letter_sink(settings: Settings) -> DeadLetterSink | None:
    """The sink of ``deadLetterDestination`` when ``poisonRecordPolicy`` is DEAD_LETTER (else None)."""
    if settings.poison_record_policy != PoisonPolicy.DEAD_LETTER or settings.dead_letter_destination is None:
        return None
    address = parse_dead_letter_address(settings.dead_letter_destination)
    return open_sink(address, client_settings_from(settings))
