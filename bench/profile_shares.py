"""Where kcl-daemon's GIL time goes, from the py-spy profiles ``bench/scaling.py --profile DIR`` writes.

Each file is py-spy's raw output (``--gil --threads --format raw``): one line per distinct stack of the
thread holding the GIL, frames from the thread's root to the leaf separated by ``;``, then the number of
samples. Every sample is put in one *layer* (what the thread was running) and one *purpose* (what the
daemon was doing it for), by the files its frames are in; the first rule that matches wins, in the order
of the tables below. Prints a table per file (or per group of files with ``--group``) of the shares of
samples.

    .venv/bin/python bench/profile_shares.py DIR/kcl-daemon-noop-256-0-steady.txt [...] [--markdown]
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Final

Rule = tuple[str, Callable[[list[str]], bool]]


def _any(*fragments: str) -> Callable[[list[str]], bool]:
    return lambda frames: any(fragment in frame for frame in frames for fragment in fragments)


def _leaf(*fragments: str) -> Callable[[list[str]], bool]:
    return lambda frames: bool(frames) and any(fragment in frames[-1] for fragment in fragments)


#: what the thread holding the GIL was running
LAYERS: Final[tuple[Rule, ...]] = (
    ("botocore (the calls not on the lean path)", _any("botocore/", "boto3/", "urllib3/", "dateutil/")),
    ("JSON (pages parsed, lines encoded/decoded)", _leaf("records_page.py", "codec.py", "json/", "orjson")),
    ("lean HTTP path (http.client, SigV4, sockets)", _any("aws/lean/", "http/client.py", "socket.py")),
    (
        "protocol I/O with the children (pipes, child sessions)",
        _any("kcl_daemon/process/", "kcl_protocol/", "subprocess.py", "asyncio/streams.py", "unix_events.py"),
    ),
    ("metrics (/proc sampler, registry)", _any("kcl_daemon/metrics/", "worker_metrics", "psutil/")),
    ("logging", _any("logging/")),
    ("retry policies (tenacity)", _any("tenacity/")),
    ("threads (hand-offs, pools, queues, locks)", _leaf("threading.py", "concurrent/futures", "queue.py")),
    ("event loop (asyncio, selectors, timers)", _leaf("asyncio/", "selectors.py")),
    ("the daemon's own Python (other)", lambda frames: True),
)

#: what the daemon was doing it for
PURPOSES: Final[tuple[Rule, ...]] = (
    ("checkpoints", _any("checkpoint")),
    ("lease renewals and taking", _any("kcl_daemon/leases/", "lease_table")),
    (
        "reads (GetRecords, iterators, prefetch)",
        _any("kcl_daemon/retrieval/", "aws/kinesis.py", "records_page"),
    ),
    ("records to the children (shard consumers)", _any("kcl_daemon/lifecycle/", "kcl_daemon/process/")),
    ("leader, shard discovery", _any("kcl_daemon/leader/", "kcl_daemon/shards/")),
    ("metrics", _any("kcl_daemon/metrics/", "worker_metrics")),
    ("event loop and threads, no daemon frame", lambda frames: not any("kcl_daemon/" in f for f in frames)),
    ("other", lambda frames: True),
)

_COUNT = re.compile(r"^(.*) (\d+)$")


def read_stacks(path: Path) -> Counter[tuple[str, ...]]:
    stacks: Counter[tuple[str, ...]] = Counter()
    for line in path.read_text(errors="replace").splitlines():
        match = _COUNT.match(line.strip())
        if match:
            stacks[tuple(match.group(1).split(";"))] += int(match.group(2))
    return stacks


def classify(stacks: Counter[tuple[str, ...]], rules: Iterable[Rule]) -> Counter[str]:
    shares: Counter[str] = Counter()
    rules = tuple(rules)
    for stack, samples in stacks.items():
        frames = list(stack)
        for name, matches in rules:
            if matches(frames):
                shares[name] += samples
                break
    return shares


def table(title: str, stacks: Counter[tuple[str, ...]], *, markdown: bool) -> str:
    total = sum(stacks.values())
    out = [f"{title}: {total} samples of the thread holding the GIL"]
    for label, rules in (("layer", LAYERS), ("purpose", PURPOSES)):
        shares = classify(stacks, rules)
        if markdown:
            out += [f"| {label} | share |", "| --- | --- |"]
            out += [f"| {name} | {shares[name] / total:.1%} |" for name, _ in rules if shares[name]]
        else:
            out += [f"  {name:<58} {shares[name] / total:6.1%}" for name, _ in rules if shares[name]]
        out.append("")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", type=Path, nargs="+")
    parser.add_argument("--group", action="store_true", help="one table for all the files together")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    if args.group:
        joined: Counter[tuple[str, ...]] = Counter()
        for path in args.files:
            joined.update(read_stacks(path))
        print(table(", ".join(p.name for p in args.files), joined, markdown=args.markdown))
        return
    for path in args.files:
        print(table(path.name, read_stacks(path), markdown=args.markdown))


if __name__ == "__main__":
    main()
