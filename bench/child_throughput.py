"""Records/s through one child: kcl-daemon's ChildSession vs a bare synchronous pipe loop (baseline).

Both drive the same no-op child over the same pre-built batches in this process, so the ratio shows
what supervision (asyncio pipes, bounded reads/writes, the conversation state machine) costs.

    .venv/bin/python bench/child_throughput.py [--batches 200] [--records 500] [--size 100]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time

from kcl_daemon.process.child import ChildProcess
from kcl_daemon.process.session import ActionTimeouts, ChildSession
from kcl_protocol import Initialize, ProcessRecords, Record, encode_daemon_message

NOOP_CHILD = r"""
import sys
out = sys.stdout
for line in sys.stdin:
    i = line.find('"action":"') + 10
    action = line[i:line.index('"', i)]
    out.write('{"action":"status","responseFor":"%s"}\n' % action)
    out.flush()
"""


def batches(count: int, per_batch: int, size: int) -> list[ProcessRecords]:
    payload = b"x" * size
    seq = 10**20
    out = []
    for _ in range(count):
        records = tuple(Record(payload, "pk", str(seq + i), 0, 1_700_000_000_000) for i in range(per_batch))
        seq += per_batch
        out.append(ProcessRecords(records, 0))
    return out


def baseline(work: list[ProcessRecords]) -> float:
    child = subprocess.Popen(
        [sys.executable, "-c", NOOP_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    assert child.stdin is not None
    assert child.stdout is not None
    start = time.perf_counter()
    child.stdin.write(encode_daemon_message(Initialize("s", "TRIM_HORIZON", 0)))
    child.stdin.flush()
    child.stdout.readline()
    for batch in work:
        child.stdin.write(encode_daemon_message(batch))
        child.stdin.flush()
        child.stdout.readline()
    elapsed = time.perf_counter() - start
    child.stdin.close()
    child.wait()
    return elapsed


async def ours(work: list[ProcessRecords]) -> float:
    child = await ChildProcess.spawn((sys.executable, "-c", NOOP_CHILD), line_limit_bytes=1 << 20)
    session = ChildSession(child, ActionTimeouts(default_s=60))
    start = time.perf_counter()
    await session.run_action(Initialize("s", "TRIM_HORIZON", 0), None)
    for batch in work:
        await session.run_action(batch, None)
    elapsed = time.perf_counter() - start
    await child.stop()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=200)
    parser.add_argument("--records", type=int, default=500)
    parser.add_argument("--size", type=int, default=100)
    args = parser.parse_args()
    work = batches(args.batches, args.records, args.size)
    total = args.batches * args.records
    runs = [(baseline(work), asyncio.run(ours(work))) for _ in range(3)]
    base = min(r[0] for r in runs)
    mine = min(r[1] for r in runs)
    print(f"{total} records in {args.batches} batches of {args.records} x {args.size} B (best of 3)")
    print(f"baseline (sync pipe loop): {total / base:12,.0f} records/s")
    print(f"kcl-daemon ChildSession:   {total / mine:12,.0f} records/s")
    print(f"ratio ours/baseline:       {base / mine:12.2f}")


if __name__ == "__main__":
    main()
