"""The polling reader's settings (contract §2.2 "Retrieval", §7), in seconds; Java names appear only here."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Final

from kcl_daemon.config.slices import RetrievalSlice
from kcl_daemon.core.shards.read_pacing import effective_idle_s
from kcl_daemon.retry import GET_RECORDS, RetryPolicy

MAX_RECORDS_LIMIT: Final = 10000


@dataclass(frozen=True, slots=True)
class RetrievalSettings:
    #: ``maxRecords``: GetRecords ``Limit``, 1..10000.
    max_records: int = MAX_RECORDS_LIMIT
    #: ``idleTimeBetweenReadsInMillis``: spacing between GetRecords calls; below 0.2 s counts as 0.2 s.
    idle_between_reads_s: float = 1.5
    #: ``millisBehindLatestThresholdForReducedTps``; 0 disables it.
    reduced_tps_threshold_s: float = 0.0
    #: ``initialPositionInStreamExtended``: the instant an ``AT_TIMESTAMP`` checkpoint reads from.
    at_timestamp: datetime | None = None
    #: Backoff for throttling, network trouble, expired iterators and inconsistent responses.
    retry: RetryPolicy = GET_RECORDS
    #: ``retrievalMode`` resolved: POLLING (GetRecords) or FANOUT (SubscribeToShard).
    mode: str = "POLLING"
    #: ``fanoutConfig.consumerName`` (None: the application name) and ``fanoutConfig.consumerArn``.
    consumer_name: str | None = None
    consumer_arn: str | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.max_records <= MAX_RECORDS_LIMIT:
            raise ValueError(f"max_records must be 1..{MAX_RECORDS_LIMIT}, not {self.max_records}")
        if self.idle_between_reads_s < 0 or self.reduced_tps_threshold_s < 0:
            raise ValueError("read intervals cannot be negative")
        if self.at_timestamp is not None and self.at_timestamp.tzinfo is None:
            raise ValueError("at_timestamp must be timezone-aware")

    @property
    def effective_idle_s(self) -> float:
        return effective_idle_s(self.idle_between_reads_s)


def resolve_mode(retrieval_mode: str, java_rule: str, *, from_file: bool) -> str:
    """POLLING or FANOUT for the worker.

    ``retrievalMode`` POLLING/FANOUT decides. DEFAULT follows Java's rule (``java_rule``: fan-out unless
    a polling key is set) for settings loaded from a properties/YAML file, which is what the rule is
    about; settings built in code (tests, benchmarks) with DEFAULT poll.
    """
    if retrieval_mode in ("POLLING", "FANOUT"):
        return retrieval_mode
    return java_rule if from_file else "POLLING"


def retrieval_settings(settings: RetrievalSlice) -> RetrievalSettings:
    """The worker's reader settings from the retrieval slice (``retrievalMode`` resolved)."""
    return RetrievalSettings(
        max_records=settings.max_records,
        idle_between_reads_s=settings.idle_between_reads_s,
        reduced_tps_threshold_s=settings.reduced_tps_threshold_s,
        at_timestamp=settings.at_timestamp,
        mode=resolve_mode(settings.mode_setting, settings.mode_by_java_rule, from_file=settings.from_file),
        consumer_name=settings.consumer_name,
        consumer_arn=settings.consumer_arn,
    )
