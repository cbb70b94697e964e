"""`kcl-daemon checkpoint` end to end on the emulators.

Against a running fleet, in both lease modes: without --handoff `set` refuses a lease a live worker holds
and changes nothing; with --handoff it rewinds one shard to TRIM_HORIZON, whose records are then processed
exactly once more than before the rewind, while nothing else moves (the other shard's records are not
delivered again, its checkpoint stays where it was). And on multi-stream lease keys: `set --stream
--shard` and `show --json` with the change recorded on the lease.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from kcl_daemon.aws.checkpoint_writes import AUDIT_ATTRIBUTE
from kcl_daemon.aws.clients import AwsClients
from kcl_daemon.aws.lease_table import DynamoLeaseTable
from kcl_daemon.aws.streams import describe_stream_identity
from kcl_daemon.core.leases.lease import Lease
from kcl_daemon.core.sequence import TRIM_HORIZON
from tests.support.daemon import run_cli
from tests.support.emulators import REGION, Backend
from tests.support.fleet import Fleet
from tests.support.streams import put

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

MODES = {
    "3.x": "",  # the fleet's default: KCL 3.x with LEASE_COUNT_BASED
    # One shard per worker: a lease the tool releases goes to whichever worker's taker runs first, and a
    # 2.x fleet left unbalanced by that steals it back, which can deliver a batch in flight twice (as any
    # 2.x rebalance does; docs/operating.md says so). The cap keeps the fleet's own balancing out of it.
    "2.x": "clientVersionConfig = CLIENT_VERSION_CONFIG_COMPATIBLE_WITH_2X_PHASE1\nmaxLeasesForWorker = 1\n",
}


def checkpoint(command: str, properties: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("checkpoint", command, "--properties", str(properties), *args, timeout_s=120)


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
    fleet = Fleet(tmp_path, backend, lease_table.table_name, stream, extra=MODES[mode])

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

    try:
        for worker in ("worker-a", "worker-b"):
            fleet.start(worker)
        fleet.wait(settled, 60, "all records processed and checkpointed, one shard each")
        before = checkpoints()
        # the baseline: 2.x steals while the fleet forms can deliver a batch twice already
        delivered = Counter(row["data"] for row in fleet.recorded())
        assert set(delivered) == {f"record-{n}" for n in range(60)}
        by_shard = {row["data"]: row["shard"] for row in fleet.recorded()}
        rewound, other = sorted(last)
        properties = tmp_path / "worker-a.properties"

        refused = checkpoint("set", properties, "--shard", rewound, "--to", "TRIM_HORIZON", "--json")
        assert refused.returncode == 1, refused.stdout + refused.stderr
        answer = json.loads(refused.stdout)["leases"][0]
        assert answer["action"] == "refused" and "--handoff" in answer["reason"], answer
        assert checkpoints()[rewound][0] == before[rewound][0]

        done = checkpoint(
            "set",
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
        fleet.wait(
            lambda: (
                all(Counter(r["data"] for r in fleet.recorded())[d] > delivered[d] for d in rewound_records)
                and checkpoints()[rewound][0] == last[rewound]
            ),
            60,
            "the rewound shard processed again and checkpointed",
        )
        for daemon in fleet.daemons.values():
            assert daemon.stop() == 0, daemon.tail()
        after = Counter(row["data"] for row in fleet.recorded())
        for data, shard in by_shard.items():  # exactly once more on the rewound shard, never on the other
            assert after[data] == delivered[data] + (shard == rewound), (
                data,
                shard,
                delivered[data],
                after[data],
            )
        assert checkpoints()[other][0] == before[other][0]
        lease = lease_table.get_lease(rewound, consistent=True)
        assert lease is not None
        audit = lease.extra[AUDIT_ATTRIBUTE]["M"]  # type: ignore[index]
        assert audit["from"] == {"S": last[rewound]} and audit["to"] == {"S": "TRIM_HORIZON"}
        assert audit["reason"] == {"S": "bad deploy"} and audit["how"] == {"S": "hand-off, write and release"}
    finally:
        fleet.close()


def test_multi_stream_keys_and_show(
    tmp_path: Path,
    backend: Backend,
    aws_clients: AwsClients,
    lease_table: DynamoLeaseTable,
    make_stream: Callable[[int], str],
) -> None:
    streams = [make_stream(1), make_stream(1)]
    identity = describe_stream_identity(aws_clients.kinesis, streams[1])
    assert identity is not None
    shard = aws_clients.kinesis.list_shards(StreamName=streams[1])["Shards"][0]["ShardId"]
    key = identity.lease_key(shard)
    lease_table.create_lease(
        Lease(key, TRIM_HORIZON, stream_identifier=identity.serialize(), stream_shard_id=shard)
    )
    sequence = aws_clients.kinesis.put_record(StreamName=streams[1], Data=b"x", PartitionKey="k")[
        "SequenceNumber"
    ]
    properties = tmp_path / "app.properties"
    properties.write_text(
        f"applicationName = {lease_table.table_name}\n"
        f"streamNames = {streams[0]}, {streams[1]}\n"
        f"regionName = {REGION}\n"
        f"kinesisEndpoint = {backend.kinesis_endpoint}\n"
        f"dynamoDBEndpoint = {backend.dynamodb_endpoint}\n"
    )
    missing_stream = checkpoint("set", properties, "--shard", shard, "--to", sequence)
    assert missing_stream.returncode == 2 and "--stream" in missing_stream.stderr
    started = time.time()
    done = checkpoint(
        "set",
        properties,
        "--stream",
        streams[1],
        "--shard",
        shard,
        "--to",
        sequence,
        "--by",
        "tester",
        "--json",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["leases"][0]["leaseKey"] == key
    shown = checkpoint("show", properties, "--all", "--stream", streams[1], "--json")
    assert shown.returncode == 0, shown.stderr
    (row,) = json.loads(shown.stdout)
    assert row["leaseKey"] == key and row["checkpoint"] == sequence
    last_set = row["lastSet"]
    assert last_set["by"] == "tester" and last_set["from"] == "TRIM_HORIZON" and last_set["to"] == sequence
    assert last_set["at"] >= int(started * 1000) - 1000
