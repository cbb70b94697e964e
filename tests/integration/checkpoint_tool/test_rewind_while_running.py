"""`kcl-daemon checkpoint set` against a running fleet, on both emulators and in both lease modes: without
--handoff it refuses a lease a live worker holds and changes nothing; with --handoff it rewinds one shard
to TRIM_HORIZON, whose records are then processed exactly once more than before the rewind, while nothing
else moves (the other shard's records are not delivered again and its checkpoint stays where it was)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from kcl_daemon.aws.checkpoint_writes import AUDIT_ATTRIBUTE
from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from tests.support.daemons import recorded, start_daemon, wait_for
from tests.support.emulators import Backend
from tests.support.streams import put

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

MODES = {
    "3.x": {"leaseAssignmentStrategy": "LEASE_COUNT_BASED"},
    # One shard per worker: a lease the tool releases goes to whichever worker's taker runs first, and a
    # 2.x fleet left unbalanced by that steals it back, which can deliver a batch in flight twice (as any
    # 2.x rebalance does; docs/operating.md says so). The cap keeps the fleet's own balancing out of it.
    "2.x": {
        "clientVersionConfig": "CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1",
        "maxLeasesForWorker": 1,
    },
}


def checkpoint_cli(properties: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kcl_daemon", "checkpoint", "set", "--properties", str(properties), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("mode", sorted(MODES))
def test_rewind_one_shard_while_the_fleet_runs(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
    mode: str,
) -> None:
    stream = make_stream(2)
    last = put(aws_clients, stream, range(60))
    assert len(last) == 2, "both shards hold records"
    records = tmp_path / "records.jsonl"
    daemons = [
        start_daemon(
            tmp_path,
            backend,
            application=lease_table.table_name,
            stream=stream,
            worker=name,
            extra=MODES[mode],
        )
        for name in ("worker-a", "worker-b")
    ]
    try:

        def checkpoints() -> dict[str, tuple[str, str | None]]:
            return {
                lease.lease_key: (str(lease.checkpoint), lease.lease_owner)
                for lease in lease_table.list_leases(consistent=True).leases
            }

        def settled() -> bool:
            now = checkpoints()
            owners = Counter(owner for _, owner in now.values())
            done = all(now.get(shard, ("", None))[0] == seq for shard, seq in last.items())
            return done and sorted(owners.values()) == [1, 1] and None not in owners

        wait_for(settled, 60, "all records processed and checkpointed, one shard each", *daemons)
        before = checkpoints()
        # the baseline: 2.x steals while the fleet forms can deliver a batch twice already
        delivered = Counter(row["data"] for row in recorded(records))
        assert set(delivered) == {f"record-{n}" for n in range(60)}
        rewound, other = sorted(last)
        by_shard = {row["data"]: row["shard"] for row in recorded(records)}
        properties = tmp_path / "worker-a.properties"

        refused = checkpoint_cli(properties, "--shard", rewound, "--to", "TRIM_HORIZON", "--json")
        assert refused.returncode == 1, refused.stdout + refused.stderr
        answer = json.loads(refused.stdout)["leases"][0]
        assert answer["action"] == "refused" and "--handoff" in answer["reason"], answer
        assert checkpoints()[rewound][0] == before[rewound][0]

        done = checkpoint_cli(
            properties,
            "--shard",
            rewound,
            "--to",
            "TRIM_HORIZON",
            "--handoff",
            "--reason",
            "bad deploy",
            "--json",
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert json.loads(done.stdout)["leases"][0]["done"] is True
        assert f"checkpoint of lease {rewound} set from {last[rewound]} to TRIM_HORIZON" in done.stderr

        rewound_records = {data for data, shard in by_shard.items() if shard == rewound}
        wait_for(
            lambda: (
                all(Counter(r["data"] for r in recorded(records))[d] >= 2 for d in rewound_records)
                and checkpoints()[rewound][0] == last[rewound]
            ),
            60,
            "the rewound shard processed again and checkpointed",
            *daemons,
        )
        for daemon in daemons:
            assert daemon.stop() == 0, daemon.tail()
        after = Counter(row["data"] for row in recorded(records))
        for data, shard in by_shard.items():  # exactly once more on the rewound shard, never on the other
            assert after[data] == delivered[data] + (shard == rewound), (
                data,
                shard,
                delivered[data],
                after[data],
            )
        final = checkpoints()
        assert final[other][0] == before[other][0]  # the other shard did not move
        lease = lease_table.get_lease(rewound, consistent=True)
        assert lease is not None
        audit = lease.extra[AUDIT_ATTRIBUTE]["M"]  # type: ignore[index]
        assert audit["from"] == {"S": last[rewound]} and audit["to"] == {"S": "TRIM_HORIZON"}
        assert audit["reason"] == {"S": "bad deploy"} and audit["how"] == {"S": "hand-off, write and release"}
    finally:
        for daemon in daemons:
            daemon.kill()
