"""Many small local data files read by pyarrow in the executors: one Spark read of them all.

Spark's own Parquet reader costs about a millisecond of JVM work per file (footer, reader
set-up) and packs small files into many tasks; a change-data range of 10,000 commits names
10,000 files of a few kilobytes each, where that per-file cost is nearly the whole job.
This Python data source (Spark 4's `pyspark.sql.datasource`) hands each task a share of the
files; the task opens them with pyarrow (a fraction of the cost per file), decodes them into
the read schema as the object-store route does (`objectstore_source._file_batches`: names,
or Parquet field ids in column-mapping id mode; missing columns null; Spark's types), and
sends Spark few, large Arrow batches with each row's file URI and index in its file, as
Spark's `_metadata.file_path` / `row_index` give them.

The paths are the driver's: every one was resolved and confined by the storage layer
(`read.local_file`) before the job, and executors open only those (they see the driver's
files as Spark's own reader would: a local master, or the same path on every worker).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from tables.spark.engine.control import default_parallelism
from tables.spark.reading.objectstore_source import (
    BATCH_ROWS,
    FILE_COL,
    ROW_COL,
    _file_batches,
    _nullable,
    arrow_schema,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

SOURCE_NAME = "deltaweb_local_files"
# Tasks per core: a few, so that a slow task (a busy core) does not hold up the read.
TASKS_PER_CORE = 2


class LocalFiles(InputPartition):
    """The files one task reads: (local path, URI) each."""

    def __init__(self, index: int, files: list[tuple[str, str]]) -> None:
        super().__init__(index)
        self.files = files


class LocalFilesSource(DataSource):
    """Local Parquet files as rows: the read schema's columns, then the file's URI and the
    row's index in it. Options: `files` (JSON: per file its path, URI and size), `tasks`."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def reader(self, schema: StructType) -> DataSourceReader:
        return LocalFilesReader(self.options, schema)


class LocalFilesReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.files: list[list[Any]] = json.loads(options["files"])
        self.tasks = max(1, int(options.get("tasks", "1")))
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        """Files dealt to `tasks` tasks of about equal bytes (largest first, each to the
        lightest task), in path order within a task."""
        loads = [0] * min(self.tasks, max(1, len(self.files)))
        shares: list[list[tuple[str, str]]] = [[] for _ in loads]
        for path, uri, size in sorted(self.files, key=lambda f: -int(f[2])):
            i = loads.index(min(loads))
            shares[i].append((path, uri))
            loads[i] += int(size) + 4096  # a file's footer and set-up cost about this much
        return [LocalFiles(i, sorted(files)) for i, files in enumerate(shares) if files]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, LocalFiles)
        target = arrow_schema(self.schema)
        fields = [f for f in target if f.name not in (FILE_COL, ROW_COL)]
        pending: list[pa.RecordBatch] = []
        rows = 0
        for path, uri in partition.files:
            for batch in _file_batches(path, uri, fields, target):
                pending.append(batch)
                rows += batch.num_rows
                if rows >= BATCH_ROWS:
                    yield pa.concat_batches(pending)
                    pending, rows = [], 0
        if pending:
            # small files' batches joined: each batch costs Spark a round of conversion
            yield pa.concat_batches(pending)


def read_local_files(spark: SparkSession, files: list[tuple[Path, str, int]], schema: dict[str, Any]) -> DataFrame:
    """The rows of local data files ((resolved path, URI, size) each, already checked by the
    storage layer) read by pyarrow in the executors, with `schema` (the Parquet read schema,
    Delta JSON), then FILE_COL (the URI) and ROW_COL."""
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    listing = [[str(path), uri, size] for path, uri, size in files]
    read_schema = StructType.fromJson(_nullable({"type": "struct", "fields": schema["fields"]}))
    read_schema = StructType(
        [*read_schema.fields, StructField(FILE_COL, StringType()), StructField(ROW_COL, LongType())]
    )
    spark.dataSource.register(LocalFilesSource)
    return (
        spark.read.format(SOURCE_NAME)
        .schema(read_schema)
        .option("files", json.dumps(listing))
        .option("tasks", str(TASKS_PER_CORE * default_parallelism(spark)))
        .load()
    )
