"""The PySpark data source ``format("kinesis")``: a streaming source and a sink (pyspark >= 4.2, pyarrow).

Processes (see the module docs of pyspark's Python data sources): the *driver's source runner* keeps
one stream reader per query and calls initialOffset / latestOffset / partitions / commit / stop on it;
executor workers call ``read`` on *another* instance, so every fact a read needs travels in the pickled
partition. Clients are looked up per process (:mod:`kcl_daemon.spark.source_clients`), never pickled.

Reading: :mod:`kcl_daemon.spark.planner` (``readMode=executor``, the default: executors fetch, the
driver plans) or :mod:`kcl_daemon.spark.driver_read` (``readMode=driver``). Writing:
:mod:`kcl_daemon.spark.sink` (``df.writeStream.format("kinesis")`` and ``df.write.format("kinesis")``).
Only what the default read plans with loads at import (the source runner imports this module in a new
process for every query); the driver-read mode and the sink load when asked for.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from kcl_daemon.spark.options import ReadMode, parse_options, parse_sink_options
from kcl_daemon.spark.partitions import SCHEMA_DDL
from kcl_daemon.spark.planner import ExecutorStreamReader


class KinesisDataSource(DataSource):
    """``format("kinesis")``: options are checked when the stream is loaded (or the write starts)."""

    @classmethod
    def name(cls) -> str:
        return "kinesis"

    def schema(self) -> str:
        parse_options(self.options)  # fail at load() with every bad option named
        return SCHEMA_DDL

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        options = parse_options(self.options)
        if options.read_mode is ReadMode.DRIVER:
            from kcl_daemon.spark.driver_read import DriverStreamReader

            return DriverStreamReader(options)
        return ExecutorStreamReader(options)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from kcl_daemon.spark.sink import KinesisBatchWriter, check_schema

        options = parse_sink_options(self.options)
        check_schema(schema, overwrite)
        return KinesisBatchWriter(options)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from kcl_daemon.spark.sink import KinesisStreamWriter, check_schema

        options = parse_sink_options(self.options)
        check_schema(schema, overwrite)
        return KinesisStreamWriter(options)
