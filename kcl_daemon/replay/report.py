"""What `replay` (and `dead-letters replay --processor`) say about each shard: a verdict, the
checkpoints the processor made and the delivery figures, as text lines or JSON."""

from __future__ import annotations

from kcl_daemon.replay.command import ShardReport


def verdict(report: ShardReport) -> str:
    """How the shard ended, in one phrase."""
    outcome = report.outcome
    if report.ended_cleanly and report.simulated_lease_loss:
        return "lease lost (simulated by --fail-checkpoint ShutdownException); the child answered leaseLost"
    if report.ended_cleanly:
        return "ended cleanly at SHARD_END"
    if outcome.parked_because:
        return f"PARKED: {outcome.parked_because}"
    reason = outcome.reason.name.lower() if outcome.reason else "none"
    return (
        f"did not end the shard (state {outcome.state.value}, reason {reason}, "
        f"checkpoint {outcome.checkpoint})"
    )


def report_lines(report: ShardReport) -> list[str]:
    """The shard's report as text: the verdict, every checkpoint, the figures, the last two failures."""
    stats = report.outcome.stats
    lines = [f"shard {report.outcome.shard_id}: {verdict(report)}"]
    for event in report.history:
        suffix = f"  -> {event.error}" if event.error else ""
        lines.append(f"  checkpoint {event.target}{suffix}")
    if not report.history:
        lines.append("  no checkpoints")
    lines.append(
        f"  {report.records_in_file} record(s) in the file, {stats.records_delivered} delivered in "
        f"{stats.batches} batch(es); child started {stats.child_starts} time(s), "
        f"failed {stats.child_failures}"
    )
    failures = stats.failure_messages
    if len(failures) > 2:
        lines.append(f"  ({len(failures) - 2} earlier failure(s) not shown; --json lists them all)")
    lines.extend(f"  failure: {message}" for message in failures[-2:])
    return lines


def report_json(report: ShardReport) -> dict[str, object]:
    """The shard's report as JSON (`replay --json`): every checkpoint and every failure."""
    outcome = report.outcome
    return {
        "shardId": outcome.shard_id,
        "endedCleanly": report.ended_cleanly,
        "simulatedLeaseLoss": report.simulated_lease_loss,
        "state": outcome.state.value,
        "reason": outcome.reason.name if outcome.reason else None,
        "checkpoint": str(outcome.checkpoint),
        "checkpoints": [
            {
                "sequenceNumber": e.target.sequence_number,
                "subSequenceNumber": e.target.sub_sequence_number,
                "error": e.error,
            }
            for e in report.history
        ],
        "recordsInFile": report.records_in_file,
        "recordsDelivered": outcome.stats.records_delivered,
        "batches": outcome.stats.batches,
        "childStarts": outcome.stats.child_starts,
        "childFailures": outcome.stats.child_failures,
        "failures": outcome.stats.failure_messages,
        "parkedBecause": outcome.parked_because,
    }
