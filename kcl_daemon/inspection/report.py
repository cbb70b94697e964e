"""Render a :class:`LeaseTableReport` as an aligned text table or as JSON (Java's attribute names)."""

from __future__ import annotations

from collections.abc import Sequence

from kcl_daemon.inspection.table import LeaseTableReport


def report_json(report: LeaseTableReport) -> dict[str, object]:
    dist = report.distribution
    return {
        "tableName": report.table_name,
        "leases": [
            {
                "leaseKey": row.lease_key,
                "leaseOwner": row.owner,
                "leaseCounter": row.counter,
                "checkpoint": row.checkpoint.sequence_number,
                "checkpointSubSequenceNumber": row.checkpoint.sub_sequence_number,
                "parentShardIds": list(row.parents),
                "expired": row.expired,
            }
            for row in dist.rows
        ],
        "leasesPerWorker": dict(dist.per_worker),
        "leasesPerCluster": dict(dist.per_cluster),
        "unclaimed": list(dist.unclaimed),
        "expired": None if dist.expired is None else list(dist.expired),
        "finished": list(dist.finished),
        "shardsWithoutLease": None if dist.shards_without_lease is None else list(dist.shards_without_lease),
        "shardListError": report.shard_list_error,
        "skippedItems": list(report.skipped_items),
        "layout": None if report.layout is None else report.layout.as_json(),
        "layoutError": report.layout_error,
    }


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(cell) for cell in column) for column in zip(header, *rows, strict=False)]
    return [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in (header, *rows)
    ]


def _listing(title: str, keys: Sequence[str] | None, unknown: str) -> str:
    if keys is None:
        return f"{title}: {unknown}"
    return f"{title}: {len(keys)}" + (f"  ({' '.join(keys)})" if keys else "")


def report_text(report: LeaseTableReport) -> str:
    dist = report.distribution
    lines = [f"lease table {report.table_name}: {len(dist.rows)} lease(s)", ""]
    if dist.rows:
        lines += _table(
            (
                "lease key",
                "owner",
                "counter",
                "checkpoint",
                "parents",
                *(("expired",) if dist.expired is not None else ()),
            ),
            [
                (
                    row.lease_key,
                    row.owner or "-",
                    str(row.counter),
                    str(row.checkpoint),
                    ",".join(row.parents) or "-",
                    *(("yes" if row.expired else "no",) if dist.expired is not None else ()),
                )
                for row in dist.rows
            ],
        )
        lines.append("")
    for title, counts in (("leases per worker", dist.per_worker), ("leases per cluster", dist.per_cluster)):
        lines.append(f"{title}:")
        lines += ["  " + line for line in _table(("", ""), [(name, str(n)) for name, n in counts])[1:]] or [
            "  (none)"
        ]
    lines.append(_listing("unclaimed", dist.unclaimed, ""))
    lines.append(_listing("expired", dist.expired, "not checked (use --check-expiry)"))
    lines.append(_listing("finished (SHARD_END, awaiting cleanup)", dist.finished, ""))
    shard_note = f"unknown ({report.shard_list_error})" if report.shard_list_error else "unknown (no stream)"
    lines.append(_listing("shards without a lease", dist.shards_without_lease, shard_note))
    for problem in report.skipped_items:
        lines.append(f"skipped item: {problem}")
    if report.layout is not None:
        lines += ["", *report.layout.lines()]
    elif report.layout_error is not None:
        lines += ["", f"layout: unknown ({report.layout_error})"]
    return "\n".join(lines)
