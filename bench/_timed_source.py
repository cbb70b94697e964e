"""``format("kinesis-timed")``: the Kinesis source with a timeline, for ``spark_fixed_cost.py``.

Every Python process that unpickles this data source (the driver's source runner, planners, executor
workers) appends to the file ``KCL_TIMELINE`` names one JSON line per event, with wall-clock times:
the process's own start (from /proc), when this module's import began and ended (the import of the
source's modules inside it), which heavy modules were loaded before it, and the start and end of
every stream-reader call.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

_BEGAN = time.time()
_BEFORE = sorted(m for m in ("pyarrow", "boto3", "botocore", "pyspark.sql") if m in sys.modules)


def _process_start() -> float:
    """This process's start in epoch seconds (/proc's start time, in clock ticks since boot)."""
    ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    since_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.time() - (since_boot - ticks / os.sysconf("SC_CLK_TCK"))


def emit(event: str, **fields: Any) -> None:
    path = os.environ.get("KCL_TIMELINE")
    if not path:
        return
    line = json.dumps({"t": time.time(), "pid": os.getpid(), "event": event, **fields})
    with open(path, "a") as f:
        f.write(line + "\n")


from kcl_daemon.spark.planner import ExecutorStreamReader  # noqa: E402
from kcl_daemon.spark.source import KinesisDataSource  # noqa: E402

emit(
    "imported",
    began=_BEGAN,
    process_start=_process_start(),
    loaded_before=_BEFORE,
    loaded_after=sorted(m for m in ("pyarrow", "boto3", "botocore") if m in sys.modules),
    argv=" ".join(sys.argv)[-120:],
    pyspark_from=str(getattr(sys.modules.get("pyspark"), "__file__", None)),
)


def _wrap(owner: Any, attr: str, label: str) -> None:
    """Time every call of ``owner.attr`` (a function of this process's source modules)."""
    inner = getattr(owner, attr)

    def call(*args: Any, **kwargs: Any) -> Any:
        emit("begin", call=label)
        try:
            return inner(*args, **kwargs)
        finally:
            emit("end", call=label)

    setattr(owner, attr, call)


from kcl_daemon.aws import batch_ends, kinesis  # noqa: E402
from kcl_daemon.spark import source_clients  # noqa: E402

_wrap(source_clients, "_client", "client")
_wrap(batch_ends.MetadataTableEnds, "create_if_missing", "DescribeTable")
_wrap(batch_ends.MetadataTableEnds, "read_batch", "read ends")
_wrap(kinesis.Kinesis, "list_shards", "ListShards")


def _timed(name: str) -> Any:
    def call(self: Any, *args: Any) -> Any:
        emit("begin", call=name)
        try:
            return getattr(super(TimedReader, self), name)(*args)
        finally:
            emit("end", call=name)

    call.__name__ = name
    return call


class TimedReader(ExecutorStreamReader):
    initialOffset = _timed("initialOffset")
    partitions = _timed("partitions")
    commit = _timed("commit")
    stop = _timed("stop")
    prepareForTriggerAvailableNow = _timed("prepareForTriggerAvailableNow")
    getDefaultReadLimit = _timed("getDefaultReadLimit")
    reportLatestOffset = _timed("reportLatestOffset")

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, Any]:
        emit("begin", call="latestOffset")
        try:
            return super().latestOffset(start, limit)
        finally:
            emit("end", call="latestOffset")

    def read(self, partition: Any) -> Any:
        emit("begin", call="read")
        count = 0
        for batch in super().read(partition):
            count += batch.num_rows
            yield batch
        emit("end", call="read", rows=count)


class TimedKinesisDataSource(KinesisDataSource):
    @classmethod
    def name(cls) -> str:
        return "kinesis-timed"

    def schema(self) -> str:
        emit("begin", call="schema")
        try:
            return super().schema()
        finally:
            emit("end", call="schema")

    def streamReader(self, schema: Any) -> Any:
        emit("begin", call="streamReader")
        from kcl_daemon.spark.options import parse_options

        reader = TimedReader(parse_options(self.options))
        emit("end", call="streamReader")
        return reader
