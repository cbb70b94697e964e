"""A PySpark Structured Streaming source and sink for Kinesis that share the KCL lease table (optional
extra).

``pip install 'kcl-daemon[spark]'`` (pyspark >= 4.2, pyarrow), then::

    from kcl_daemon.spark import register
    register(spark)
    df = spark.readStream.format("kinesis").option("streamName", "orders").load()
    df.select("data", "partitionKey").writeStream.format("kinesis").option("streamName", "out")...

Importing this package never imports pyspark; :func:`register` does, with a clear error if it is missing.

May import: ``retrieval``, ``aws``, ``config``, ``command_line`` (for its command), ``core`` and the root
utilities; pyspark only inside
:func:`register` and the modules it loads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMAT_NAME = "kinesis"


def register(spark: SparkSession) -> None:
    """Register ``format("kinesis")`` with ``spark``: the source and the sink."""
    try:
        from kcl_daemon.spark.source import KinesisDataSource
    except ImportError as exc:
        raise ImportError(
            "the Kinesis Spark source needs pyspark >= 4.2 and pyarrow: "
            f"pip install 'kcl-daemon[spark]' ({exc})"
        ) from exc
    spark.dataSource.register(KinesisDataSource)
