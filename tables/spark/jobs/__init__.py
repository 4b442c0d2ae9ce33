"""The data jobs on Spark (a preview, change data, a keyed row diff, a row's history, RESTORE's
planning); the result files they write are read back by tables.spark.results."""
